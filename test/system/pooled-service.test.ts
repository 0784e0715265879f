/**
 * The service behind PgBouncer 1.18 in transaction mode (DATABASE_URL), with PostgreSQL 15 at
 * DATABASE_DIRECT_URL: it starts (no start-up parameter the pooler refuses), serves every kind
 * of write and read with more requests in flight than the pooler has server connections, and
 * leaves nothing of its own on them: its statement timeout is set per transaction (also for a
 * statement sent on its own), never on a session. Named prepared statements, forced on through
 * the pooler, fail on other server connections: each connection that says so is closed, never
 * reused, and the statement still answers. Every route of both doors answers through it.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MikroORM } from '@mikro-orm/postgresql';
import { openOrm } from '../../src/app/orm.js';
import { loadConfig } from '../../src/config.js';
import { timeoutEachTransaction } from '../../src/db/transaction-timeout.js';
import { execute } from '../../src/db/prepared.js';
import { registerUser, request } from '../helpers/http.js';
import { pooledTierSkip, startPooledDatabase, type PooledDatabase } from '../helpers/pooled-database.js';
import { walkEveryRoute } from '../helpers/route-walk.js';
import { spawnService, type SpawnedService, stopServices } from '../helpers/spawn-service.js';
import { startReceiver } from '../helpers/webhook-receiver.js';

/** Server connections PgBouncer opens per database: far fewer than the service's pool. */
const POOLER_POOL = 2;
const SERVICE_POOL = 10;

let pooled: PooledDatabase;
const services: SpawnedService[] = [];
const orms: MikroORM[] = [];

beforeAll(async () => {
  if (pooledTierSkip) return;
  pooled = await startPooledDatabase({ bouncer: { default_pool_size: POOLER_POOL } });
});

afterAll(async () => {
  await stopServices(services);
  for (const orm of orms) await orm.close(true);
  await pooled?.stop();
});

async function ormOn(url: string, options: Parameters<typeof openOrm>[1]): Promise<MikroORM> {
  const orm = await openOrm(url, options);
  orms.push(orm);
  return orm;
}

/** What a new connection through the pooler finds: nothing this service set may be left there. */
async function pooledSessionsTimeouts(url: string): Promise<string[]> {
  // As many clients in a transaction at once as the pooler has server connections: each gets another one.
  const clients = Array.from({ length: POOLER_POOL }, () => new pg.Client({ connectionString: url }));
  await Promise.all(clients.map((c) => c.connect()));
  try {
    await Promise.all(clients.map((c) => c.query('begin')));
    const timeouts = await Promise.all(clients.map(async (c) => (await c.query('show statement_timeout')).rows[0].statement_timeout as string));
    await Promise.all(clients.map((c) => c.query('commit')));
    return timeouts;
  } finally {
    await Promise.all(clients.map((c) => c.end()));
  }
}

let started: Promise<SpawnedService> | undefined;
/**
 * The service as a process on a database of its own behind the pooler, rate limits off, a
 * loopback webhook receiver allowed (the route walk's): started once, for whichever of the two
 * tests that send it requests comes first. Each of them registers users of its own and reads
 * only what they wrote; each checks the whole of its log (nothing logged at error level, nor
 * a warning), which holds the other's requests too.
 */
const pooledService = () =>
  (started ??= (async () => {
    const { pooledUrl, directUrl } = await pooled.createDatabase();
    const service = await spawnService({
      DATABASE_URL: pooledUrl,
      DATABASE_DIRECT_URL: directUrl,
      DATABASE_POOL_SIZE: String(SERVICE_POOL),
      RATE_LIMIT_PER_MINUTE: '0',
      RATE_LIMIT_AUTH_PER_MINUTE: '0',
      WEBHOOK_ALLOW_PRIVATE_URLS: '1',
    });
    services.push(service);
    return service;
  })());

describe.skipIf(pooledTierSkip)('the service behind PgBouncer in transaction mode', () => {
  it('starts and serves writes and reads of every kind with no answer other than 2xx', async () => {
    const service = await pooledService();
    const started = JSON.parse(service.output().split('\n').find((l) => l.includes('"listening on'))!) as Record<string, unknown>;
    expect(started).toMatchObject({ poolSize: SERVICE_POOL, preparedStatements: false });
    expect(started.database).toMatch(/through the pooler at .*, direct at /);

    const statuses = new Map<string, number>();
    const count = (what: string, status: number) => {
      const key = `${what} ${status}`;
      statuses.set(key, (statuses.get(key) ?? 0) + 1);
      return status;
    };
    const due = Math.floor(Date.now() / 1000) + 7 * 86_400;
    // Six users, each running every kind of write and read, all at once: up to 30 requests in
    // flight for 10 connections of the service and 2 of the pooler.
    const user = async (n: number) => {
      const { token } = await registerUser(service.url, `pooled${n}`);
      const send = async (what: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
        const res = await request(service.url, method, path, { token, body, headers });
        count(what, res.status);
        return res;
      };
      const project = await send('create project', 'POST', '/api/users/me/projects', { project: { name: `P${n}` } });
      const projectId = project.body?.data?.id;
      await send('start project', 'PUT', `/api/projects/${projectId}/state`, { project: { state: 'started', due_at: due } });
      const tasks = await Promise.all(
        Array.from({ length: 5 }, (_, i) =>
          send('create task', 'POST', '/api/users/me/tasks', { task: { label: `t${i}`, ...(i % 2 ? { project_id: projectId } : {}) } }),
        ),
      );
      const ids = tasks.map((t) => t.body?.data?.id as number);
      await Promise.all([
        ...ids.map((id) => send('change task state', 'PUT', `/api/tasks/${id}/state`, { task: { state: 'planned' } })),
        send('reorder', 'PUT', `/api/tasks/${ids[4]}/order`, { task: { order: 1 } }),
        send('rename task', 'PATCH', `/api/tasks/${ids[0]}`, { task: { label: 'renamed' } }),
        send('list tasks', 'GET', '/api/users/me/tasks'),
        send('list projects', 'GET', '/api/users/me/projects'),
        send('get task', 'GET', `/api/tasks/${ids[1]}`),
        send('get project', 'GET', `/api/projects/${projectId}`),
        send('keyed create', 'POST', '/api/users/me/tasks', { task: { label: 'keyed' } }, { 'Idempotency-Key': `k${n}` }),
      ]);
      await send('pause project', 'PUT', `/api/projects/${projectId}/state`, { project: { state: 'paused' } });
      const replay = await send('keyed create', 'POST', '/api/users/me/tasks', { task: { label: 'keyed' } }, { 'Idempotency-Key': `k${n}` });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      const list = await send('list tasks', 'GET', '/api/users/me/tasks');
      expect(list.body.data).toHaveLength(6);
      for (const id of ids) expect(list.body.data.map((t: { id: number }) => t.id)).toContain(id);
    };
    await Promise.all(Array.from({ length: 6 }, (_, n) => user(n)));
    const failed = [...statuses].filter(([key]) => !/ 2\d\d$/.test(key));
    console.log('through PgBouncer (transaction mode):', JSON.stringify(Object.fromEntries(statuses)));
    expect(failed).toEqual([]);
    // Nothing went wrong quietly either: no prepared statement on the wrong connection.
    expect(service.output()).not.toMatch(/Warning|"level":50/);
  }, 90_000);

  it('answers every route of both doors through the pooler (test/helpers/route-walk.ts)', async () => {
    const service = await pooledService();
    const receiver = await startReceiver();
    try {
      // The account's export reads in a REPEATABLE READ transaction: through the pooler its
      // opening once came after the statement timeout's prelude, and was refused (500).
      const walked = await walkEveryRoute(service.url, 'pooled_walk', receiver);
      expect(walked.rest.length + walked.trpc.length).toBeGreaterThan(0);
    } finally {
      await receiver.close();
    }
    expect(service.output()).not.toMatch(/"level":50/);
  }, 90_000);

  it('refuses to start without DATABASE_POOL_SIZE, which it cannot size from behind the pooler', async () => {
    const { pooledUrl, directUrl } = await pooled.createDatabase();
    const failed = await spawnService({ DATABASE_URL: pooledUrl, DATABASE_DIRECT_URL: directUrl }).then(
      (service) => {
        services.push(service);
        return 'started';
      },
      (error: Error) => error.message,
    );
    expect(failed).toMatch(/service exited with 1 before listening/);
    expect(failed).toMatch(/set DATABASE_POOL_SIZE.*max_client_conn/);
    expect(() => loadConfig({ DATABASE_DIRECT_URL: directUrl })).toThrow(/DATABASE_DIRECT_URL: only means something with DATABASE_URL/);
  }, 60_000);

  it('sets the statement timeout per transaction, also for a statement sent alone, and leaves none on the pooler\'s connections', async () => {
    const { pooledUrl, directUrl } = await pooled.createDatabase();
    const orm = await ormOn(pooledUrl, { migrate: true, poolSize: 6, directUrl });
    const em = orm.em.fork();
    const timeout = async (run: (sql: string) => Promise<Array<{ t: string }>>) => (await run("select current_setting('statement_timeout') as t"))[0]!.t;
    expect(await timeout((sql) => em.execute(sql))).toBe('15s');
    expect(await timeout((sql) => execute(em, sql))).toBe('15s');
    expect(await em.transactional((tx) => timeout((sql) => tx.execute(sql)))).toBe('15s');
    // Many statements on every server connection of the pooler, then what a new client finds there.
    await Promise.all(Array.from({ length: 30 }, (_, i) => (i % 3 ? execute(em.fork(), 'select 1') : em.fork().transactional((tx) => tx.execute('select 1')))));
    expect(await pooledSessionsTimeouts(pooledUrl)).toEqual(Array(POOLER_POOL).fill('0'));
  });

  it('bounds a statement sent alone through the pooler on the server, with the setting in its own message', async () => {
    const { pooledUrl } = await pooled.createDatabase();
    const client = new pg.Client({ connectionString: pooledUrl });
    await client.connect();
    try {
      timeoutEachTransaction(client, "select set_config('statement_timeout', '100', true)");
      const started = Date.now();
      await expect(client.query('select pg_sleep(2)')).rejects.toMatchObject({ code: '57014' });
      expect(Date.now() - started).toBeLessThan(1_500);
      await client.query('begin');
      await expect(client.query('select pg_sleep(2)')).rejects.toMatchObject({ code: '57014' });
      await client.query('rollback');
      expect((await client.query("select current_setting('statement_timeout') as t")).rows[0].t).toBe('100ms');
    } finally {
      await client.end();
    }
    // It held for the statements of each message only.
    expect(await pooledSessionsTimeouts(pooledUrl)).toEqual(Array(POOLER_POOL).fill('0'));
  });

  it('on PostgreSQL itself, keeps the timeout as a session setting (prepared statements included)', async () => {
    const { directUrl } = await pooled.createDatabase();
    const orm = await ormOn(directUrl, { migrate: true, poolSize: 2 });
    const em = orm.em.fork();
    expect((await execute<{ t: string }>(em, "select current_setting('statement_timeout') as t"))[0]!.t).toBe('15s');
    expect((await em.execute<Array<{ statement_timeout: string }>>('show statement_timeout'))[0]!.statement_timeout).toBe('15s');
  });

  it('with named prepared statements forced on, closes every connection that lost or doubled one, and still answers', async () => {
    const { pooledUrl, directUrl } = await pooled.createDatabase();
    const orm = await ormOn(pooledUrl, { migrate: true, poolSize: 8, directUrl, preparedStatements: true });
    const pool = (await (orm.em.getConnection() as unknown as { getNativeClient(): Promise<pg.Pool> }).getNativeClient()) as pg.Pool & {
      _clients: pg.PoolClient[];
    };
    const refused: pg.PoolClient[] = [];
    pool.on('release', (error: (Error & { code?: string }) | undefined, client: pg.PoolClient) => {
      if (error?.code === '26000' || error?.code === '42P05') refused.push(client);
    });
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on('warning', onWarning);
    try {
      const statements = ['select ?::int as n', 'select ?::int + 0 as n', 'select ?::int * 1 as n'];
      const results = await Promise.all(
        Array.from({ length: 300 }, async (_, i) => (await execute<{ n: number }>(orm.em.fork(), statements[i % 3]!, [i]))[0]!.n),
      );
      expect(results).toEqual(Array.from({ length: 300 }, (_, i) => i));
    } finally {
      process.off('warning', onWarning);
    }
    // The pooler did mix them up (else this test proves nothing), and every such connection is gone.
    expect(refused.length).toBeGreaterThan(0);
    for (const client of refused) expect(pool._clients).not.toContain(client);
    expect(warnings.join('\n')).toMatch(/PreparedStatementWarning: .*DATABASE_PREPARED_STATEMENTS=off/);
  });
});
