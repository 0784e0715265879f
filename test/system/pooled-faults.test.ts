/**
 * Faults of the database tier behind PgBouncer in transaction mode, under a load of keyed
 * writes and event streams on two instances (test/helpers/retrying-clients.ts), with docs/operations.md's
 * pgbouncer.ini settings (`query_wait_timeout`, `server_login_retry`: test/helpers/deployment.ts):
 *
 * - PostgreSQL stopped behind PgBouncer, then started again: meanwhile writes are 503 with
 *   Retry-After (never a 500, never a hang past the pooler's query_wait_timeout); open streams
 *   end with an error event (their process's LISTEN connection, direct to PostgreSQL, is cut)
 *   and resume with Last-Event-ID once it is back; no acknowledged write is lost or doubled.
 * - PgBouncer itself restarted: the same, but streams need not end (their LISTEN connection does
 *   not go through PgBouncer); those that read meanwhile end with an error event and resume.
 *
 * The same faults without a pooler: system/outage.test.ts, system/change-log-outage.test.ts and
 * system/stream-limits-outage.test.ts (one in-process app, no load).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { bouncerSettings, readDeployment } from '../helpers/deployment.js';
import { eventually } from '../helpers/eventually.js';
import { pooledTierSkip, startPooledDatabase, type PooledDatabase } from '../helpers/pooled-database.js';
import { describeLoad, expectNothingLost, register, startLoad, type Load } from '../helpers/retrying-clients.js';
import { spawnService, type SpawnedService, stopServices } from '../helpers/spawn-service.js';

const settings = bouncerSettings(readDeployment().ini);
/** How long PgBouncer keeps a client waiting for a server it cannot reach (docs/operations.md's pgbouncer.ini). */
const QUERY_WAIT_MS = Number(settings.query_wait_timeout) * 1000;

let pooled: PooledDatabase | undefined;
let database: { pooledUrl: string; directUrl: string };
const services: SpawnedService[] = [];
let started: Promise<SpawnedService[]> | undefined;
/** PostgreSQL, PgBouncer and two instances on one database, started once for whichever test comes first. */
const twoInstances = () =>
  (started ??= (async () => {
    pooled = await startPooledDatabase({ bouncer: settings });
    database = await pooled.createDatabase();
    const env = {
      DATABASE_URL: database.pooledUrl,
      DATABASE_DIRECT_URL: database.directUrl,
      DATABASE_POOL_SIZE: '10',
      RATE_LIMIT_PER_MINUTE: '0',
      RATE_LIMIT_AUTH_PER_MINUTE: '0',
    };
    services.push(...(await Promise.all([spawnService(env), spawnService(env)])));
    return services;
  })());

afterAll(async () => {
  await stopServices(services);
  await pooled?.stop();
});

/** Writes go to both instances in turn; each user's two streams open on either, in turn. */
async function loadOn(instances: SpawnedService[], prefix: string): Promise<{ load: Load; tokens: string[] }> {
  const tokens = await Promise.all(Array.from({ length: 4 }, (_, u) => register(instances[u % 2]!.url, `${prefix}_${u}`)));
  const at = (n: number) => instances[n % 2]!.url;
  return { load: startLoad({ tokens, writeUrl: at, streamUrl: at, streamsPerUser: 2, prefix: prefix.replace(/_/g, '') }), tokens };
}

const count503 = (load: Load) => load.statuses.get(503) ?? 0;

describe.skipIf(pooledTierSkip)('the database tier behind PgBouncer fails under load', () => {
  it('PostgreSQL stopped and started again: 503s meanwhile, streams end with an error event and resume, nothing lost', async () => {
    const instances = await twoInstances();
    const { load, tokens } = await loadOn(instances, 'pg_restart');
    const t0 = performance.now();
    await load.afterMore(20, 'before PostgreSQL stops');
    const before = count503(load);
    await pooled!.stopPostgres();
    // Every stream ends with an error event, and writes are refused with 503.
    await eventually(() => load.followers.every((f) => f.errorEvents > 0) && count503(load) > before, {
      timeout: QUERY_WAIT_MS + 5_000,
      message: 'every stream ended with an error event and writes were 503',
    });
    await pooled!.startPostgres();
    await load.afterMore(20, 'once PostgreSQL is back');
    await load.stopWriting();
    const loadMs = performance.now() - t0;

    await expectNothingLost(load, { directUrl: database.directUrl, url: instances[0]!.url, tokens });
    for (const service of instances) expect(service.output()).not.toMatch(/"level":50/);
    console.info(`PostgreSQL restarted behind PgBouncer: ${describeLoad(load, loadMs)}`);
  }, 60_000);

  it('PgBouncer restarted: 503s meanwhile, streams resume where they stood, nothing lost', async () => {
    const instances = await twoInstances();
    const { load, tokens } = await loadOn(instances, 'bouncer_restart');
    const t0 = performance.now();
    await load.afterMore(20, 'before PgBouncer stops');
    const before = count503(load);
    await pooled!.stopBouncer();
    await eventually(() => count503(load) > before, { timeout: 5_000, message: 'writes were 503 while PgBouncer was down' });
    await pooled!.startBouncer();
    await load.afterMore(20, 'once PgBouncer is back');
    await load.stopWriting();
    const loadMs = performance.now() - t0;

    await expectNothingLost(load, { directUrl: database.directUrl, url: instances[0]!.url, tokens });
    for (const service of instances) expect(service.output()).not.toMatch(/"level":50/);
    console.info(`PgBouncer restarted: ${describeLoad(load, loadMs)}`);
  }, 60_000);
});
