/**
 * Two instances of the service behind PgBouncer in transaction mode, started at the same
 * moment on a new database: both come up, the migrations run once (their lock is a
 * transaction's, on PostgreSQL directly, and nothing of it stays behind), and a change
 * written through one reaches an event stream open on the other within a second: the
 * LISTEN connection goes to PostgreSQL directly, where the pooler would lose its
 * notifications (they would then arrive only at the stream's idle re-read, 15 s later).
 * `npm run migrate` takes the same lock: run while an instance migrates, it waits for it.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { MIGRATION_LOCK } from '../../src/db/database.js';
import { migrationsList } from '../../src/db/migrations/index.js';
import { eventually } from '../helpers/eventually.js';
import { call, registerUser } from '../helpers/http.js';
import { pooledTierSkip, startPooledDatabase, type PooledDatabase } from '../helpers/pooled-database.js';
import { spawnService, type SpawnedService, stopServices } from '../helpers/spawn-service.js';
import { openStream, type SseStream } from '../helpers/sse.js';

let pooled: PooledDatabase;
let urls: { pooledUrl: string; directUrl: string };
const services: SpawnedService[] = [];
const streams: SseStream[] = [];

beforeAll(async () => {
  if (pooledTierSkip) return;
  pooled = await startPooledDatabase({ bouncer: { default_pool_size: 3 } });
  urls = await pooled.createDatabase();
});

afterAll(async () => {
  streams.forEach((s) => s.close());
  await stopServices(services);
  await pooled?.stop();
});

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

describe.skipIf(pooledTierSkip)('two instances behind PgBouncer', () => {
  let a: SpawnedService;
  let b: SpawnedService;
  let started: Promise<void> | undefined;
  /** Both instances, started at the same moment on the new database, once for either test (in any order). */
  const bothStarted = () =>
    (started ??= (async () => {
      const env = {
        DATABASE_URL: urls.pooledUrl,
        DATABASE_DIRECT_URL: urls.directUrl,
        DATABASE_POOL_SIZE: '8',
        RATE_LIMIT_PER_MINUTE: '0',
        RATE_LIMIT_AUTH_PER_MINUTE: '0',
      };
      [a, b] = await Promise.all([spawnService(env), spawnService(env)]);
      services.push(a, b);
    })());

  it('started at the same moment on a new database, both come up and the migrations run once', async () => {
    await bothStarted();
    const applied = await query<{ name: string; times: number }>(urls.directUrl, 'select name, count(*)::int as times from mikro_orm_migrations group by name order by name');
    expect(applied).toHaveLength(migrationsList.length);
    expect(applied.every((m) => m.times === 1)).toBe(true);
    // The migration lock ended with its transaction: no advisory lock is held anywhere.
    expect(await query(urls.directUrl, "select pid from pg_locks where locktype = 'advisory'")).toEqual([]);
    for (const service of [a, b]) expect((await call(service.url, 'GET', '/readyz')).status).toBe(200);
  }, 60_000);

  it('a change written through B reaches a stream open on A within a second', async () => {
    await bothStarted();
    const { token } = await registerUser(b.url, 'listener');
    const stream = await openStream(`${a.url}/api/users/me/events`, { Authorization: token });
    streams.push(stream);
    expect(stream.status, stream.text).toBe(200);
    const latencies: number[] = [];
    for (let i = 0; i < 10; i++) {
      const sent = performance.now();
      const created = await call(b.url, 'POST', '/api/users/me/tasks', { token, body: { task: { label: `live ${i}` } } });
      expect(created.status).toBe(201);
      const event = await stream.nextEvent(5_000);
      latencies.push(performance.now() - sent);
      expect(JSON.parse(event.data)).toMatchObject({ type: 'task.created' });
    }
    const sorted = [...latencies].sort((x, y) => x - y);
    console.log(
      `live event through B (PgBouncer, transaction mode) to a stream on A: median ${sorted[5]!.toFixed(1)} ms, ` +
        `max ${sorted.at(-1)!.toFixed(1)} ms, all ${latencies.map((l) => l.toFixed(1)).join(', ')} ms (write included)`,
    );
    expect(sorted.at(-1)).toBeLessThan(1_000);
  }, 60_000);
});

describe.skipIf(pooledTierSkip)('npm run migrate behind PgBouncer', () => {
  it('waits for the migration lock a starting instance holds, then finds the schema or applies it, once', async () => {
    const fresh = await pooled.createDatabase();
    // A starting instance's migration, as it holds the lock: a transaction on PostgreSQL directly.
    const holder = new pg.Client({ connectionString: fresh.directUrl });
    await holder.connect();
    await holder.query(`begin; select pg_advisory_xact_lock(${MIGRATION_LOCK})`);
    // src/migrate-cli.ts as the global setup compiled it, beside the service's entry.
    const cli = spawn(process.execPath, [path.join(path.dirname(inject('serviceEntry')), 'migrate-cli.js')], {
      env: { ...process.env, DATABASE_URL: fresh.pooledUrl, DATABASE_DIRECT_URL: fresh.directUrl, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    cli.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    cli.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    const exited = new Promise<number | null>((resolve) => cli.once('exit', (code) => resolve(code)));
    try {
      await eventually(async () => (await query(fresh.directUrl, "select 1 from pg_locks where locktype = 'advisory' and not granted")).length === 1, {
        message: 'npm run migrate waits for the migration lock',
        timeout: 10_000,
      });
      // Nothing ran while it waited: not even the migrations' own table.
      expect(await query(fresh.directUrl, "select to_regclass('mikro_orm_migrations') as t")).toEqual([{ t: null }]);
      await holder.query('commit');
      expect(await exited, out).toBe(0);
      expect(out).toContain(`applied ${migrationsList.length} migration(s)`);
      const applied = await query<{ times: number }>(fresh.directUrl, 'select count(*)::int as times from mikro_orm_migrations group by name');
      expect(applied).toHaveLength(migrationsList.length);
      expect(applied.every((m) => m.times === 1)).toBe(true);
      expect(await query(fresh.directUrl, "select pid from pg_locks where locktype = 'advisory'")).toEqual([]);
    } finally {
      if (cli.exitCode === null) cli.kill('SIGKILL');
      await holder.end().catch(() => undefined);
    }
  }, 30_000);
});
