/**
 * What the service does when its database stops being a primary it can write to, without a
 * failover cluster (API-CONTRACT.md §17; the real failover is test/system/failover.test.ts):
 * a PostgreSQL of the test's own is made read-only (`default_transaction_read_only`, as a
 * demoted primary or a standby refuses writes: 25006), its backends are terminated
 * (`pg_terminate_backend`, as a shutdown or a crash ends them: 57P01), and it is stopped.
 *
 * - Writes are 503 `unavailable` with Retry-After on both doors, never a 500; reads go on.
 * - Each pooled connection that saw a 25006 is closed, never handed out again.
 * - /healthz and /metrics say `read-only`, then `unreachable`, then `primary` again, and count
 *   the 503s.
 * - Once the server takes writes again, the service writes again, without a restart.
 * - While the server is gone, each request is answered 503 within a second.
 * - A change-log cursor beyond the log of a read-only server is 503, not 410: a standby's log
 *   may be behind the primary's, and a client that reloaded on a 410 would restart from there.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/core/logger.js';
import { createClient } from '../../src/client.js';
import { startService, type RunningService } from '../../src/server.js';
import { eventually } from '../helpers/eventually.js';
import { call, registerUser } from '../helpers/http.js';
import { sample, scrape } from '../helpers/metrics.js';
import { startOwnDatabase } from '../helpers/own-database.js';
import { openStream } from '../helpers/sse.js';

let db: Awaited<ReturnType<typeof startOwnDatabase>>;
let service: RunningService;
let token: string;

async function admin<T extends pg.QueryResultRow = Record<string, unknown>>(sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    // One statement a message: ALTER SYSTEM may not run in the implicit transaction of several.
    let rows: T[] = [];
    for (const statement of sql.split(';').map((t) => t.trim()).filter(Boolean)) rows = (await client.query<T>(statement)).rows;
    return rows;
  } finally {
    await client.end();
  }
}

/** The service's pool (pg's), as the ORM holds it. */
async function pool(): Promise<pg.Pool> {
  return (service.orm.em.getConnection() as unknown as { getNativeClient(): Promise<pg.Pool> }).getNativeClient();
}

/** Backends of the service on its database (every connection but this test's own: the pool's, and a LISTEN). */
async function serviceBackends(): Promise<number> {
  const [row] = await admin<{ n: number }>(
    "select count(*)::int as n from pg_stat_activity where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()",
  );
  return row!.n;
}

async function health(): Promise<{ role: string; failovers: number; unavailable: number }> {
  const res = await call(service.url, 'GET', '/healthz');
  expect(res.status, res.text).toBe(200);
  return res.body.database;
}

const createTask = (label: string) => call(service.url, 'POST', '/api/users/me/tasks', { token, body: { task: { label } } });

function expectUnavailable(res: { status: number; text: string; body: any; headers: Headers }): void {
  expect(res.status, res.text).toBe(503);
  expect(res.body).toEqual({ errors: [{ status: '503', code: 'unavailable', title: 'Service unavailable', detail: expect.any(String) }] });
  expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
}

beforeAll(async () => {
  db = await startOwnDatabase('planning-read-only-');
  const config = {
    ...loadConfig({}),
    databaseUrl: db.url,
    databasePoolSize: 8,
    port: 0,
    host: '127.0.0.1',
    passwordHashCost: 1024,
    rateLimitAuthPerMinute: 0,
    rateLimitPerMinute: 0,
    metricsPort: 0,
  };
  // No webhook round during the test: its statements would take (and lose) connections too.
  service = await startService({ config, logger: createLogger('silent'), webhookPollMs: 600_000 });
  ({ token } = await registerUser(service.url, 'read_only'));
}, 60_000);

afterAll(async () => {
  await admin('alter system reset default_transaction_read_only; select pg_reload_conf()').catch(() => undefined);
  await service?.stop();
  await db?.remove();
});

describe('a database that stops taking writes', () => {
  it('answers writes 503 on both doors while it is read-only, closes each connection that saw it, and writes again once it is a primary', async () => {
    expect(await health()).toEqual({ role: 'primary', failovers: 0, unavailable: 0 });
    // Several connections in the pool, idle: the failing writes below take them, no new one.
    const warm = await Promise.all(Array.from({ length: 6 }, (_, i) => createTask(`warm ${i}`)));
    expect(warm.map((r) => r.status)).toEqual(Array(6).fill(201));
    const p = await pool();
    const before = p.totalCount;
    expect(before).toBeGreaterThanOrEqual(4);
    // Besides the pool: the LISTEN connection of the webhook deliverer.
    const others = (await serviceBackends()) - before;
    expect(others).toBeGreaterThanOrEqual(0);
    expect(others).toBeLessThanOrEqual(1);

    await admin('alter system set default_transaction_read_only = on; select pg_reload_conf()');
    // A reload reaches each backend when it next reads a command.
    await eventually(async () => (await createTask('probe')).status === 503, { message: 'a write is refused once the server is read-only', timeout: 10_000 });

    // Three writes one after the other: each takes an idle connection, is refused, and the
    // connection is closed (the refused probes above already closed theirs).
    const afterProbes = p.totalCount;
    for (let i = 0; i < 3; i++) expectUnavailable(await createTask(`refused ${i}`));
    await eventually(() => p.totalCount === afterProbes - 3, { message: `the pool closed the 3 connections that saw 25006 (holds ${p.totalCount} of ${afterProbes})`, timeout: 5_000 });
    await eventually(async () => (await serviceBackends()) === p.totalCount + others, { message: 'PostgreSQL saw them closed', timeout: 5_000 });

    // The tRPC door says the same; reads go on.
    const trpcError = await createClient({ url: service.url, token })
      .tasks.create.mutate({ task: { label: 'refused on trpc' } })
      .then(() => undefined, (e: any) => e);
    expect(trpcError, 'the call succeeded').toBeDefined();
    expect(trpcError.data?.httpStatus).toBe(503);
    expect(trpcError.data?.code).toBe('unavailable');
    const list = await call(service.url, 'GET', '/api/users/me/tasks', { token });
    expect(list.status, list.text).toBe(200);
    expect(list.body.data.map((t: any) => t.attributes.label)).not.toContain('refused 0');

    const seen = await health();
    expect(seen.role).toBe('read-only');
    expect(seen.unavailable).toBeGreaterThanOrEqual(5);
    const metrics = await scrape(service.metricsUrl!);
    expect(sample(metrics, 'planning_db_role', { role: 'read-only' })).toBe(1);
    expect(sample(metrics, 'planning_db_role', { role: 'primary' })).toBe(0);
    expect(sample(metrics, 'planning_unavailable_answers_total')).toBe(seen.unavailable);
    expect(sample(metrics, 'planning_db_failovers_total')).toBe(0);

    await admin('alter system reset default_transaction_read_only; select pg_reload_conf()');
    await eventually(async () => (await createTask('after')).status === 201, { message: 'writes are taken again without a restart', timeout: 10_000 });
    expect((await health()).role).toBe('primary');
    const labels = (await call(service.url, 'GET', '/api/users/me/tasks', { token })).body.data.map((t: any) => t.attributes.label);
    expect(labels).toContain('after');
    expect(labels.filter((l: string) => l.startsWith('refused'))).toEqual([]);
  });

  it('answers 503 (never 500) to writes whose backends are terminated under them, then serves on new connections', async () => {
    const terminate = async () =>
      admin("select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()");
    const burst = Array.from({ length: 16 }, (_, i) => createTask(`burst ${i}`));
    await terminate();
    const answers = await Promise.all(burst);
    for (const res of answers) {
      expect([201, 503], res.text).toContain(res.status);
      if (res.status === 503) expectUnavailable(res);
    }
    await terminate();
    // The pool dropped what was terminated while idle; the next write gets a new connection.
    await eventually(async () => (await createTask('after terminate')).status === 201, { message: 'a write succeeds after the terminations', timeout: 5_000 });
    const created = answers.filter((r) => r.status === 201).map((r) => r.body.data.attributes.label);
    const labels = (await call(service.url, 'GET', '/api/users/me/tasks?page_size=100', { token })).body.data.map((t: any) => t.attributes.label);
    // Every acknowledged write is there.
    for (const label of created) expect(labels).toContain(label);
  });

  it('answers a cursor beyond the log 503 on both doors while the server is read-only, and 410 once it is a primary', async () => {
    expect((await createTask('an event')).status).toBe(201);
    const position = await call(service.url, 'GET', '/api/users/me/events', { token });
    expect(position.status, position.text).toBe(200);
    const last = BigInt(position.body.meta.last_event_id);
    expect(last).toBeGreaterThan(0n);
    const ahead = (last + 5n).toString();
    const trpc = createClient({ url: service.url, token });
    const beyond = async () => ({
      list: await call(service.url, 'GET', `/api/users/me/events?after=${ahead}`, { token }),
      stream: await openStream(`${service.url}/api/users/me/events`, { Authorization: token, 'Last-Event-ID': ahead }),
      trpc: await trpc.events.list.query({ after: ahead }).then(() => undefined, (e: any) => e),
    });

    await admin('alter system set default_transaction_read_only = on; select pg_reload_conf()');
    try {
      await eventually(async () => (await createTask('probe')).status === 503, { message: 'a write is refused once the server is read-only', timeout: 10_000 });
      const readOnly = await beyond();
      expectUnavailable(readOnly.list);
      expect(readOnly.stream.status, readOnly.stream.text).toBe(503);
      expect(Number(readOnly.stream.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(JSON.parse(readOnly.stream.text!).errors[0].code).toBe('unavailable');
      expect(readOnly.trpc?.data?.httpStatus).toBe(503);
      expect(readOnly.trpc?.data?.code).toBe('unavailable');
      // A cursor within the log is read as before.
      const within = await call(service.url, 'GET', `/api/users/me/events?after=${last - 1n}`, { token });
      expect(within.status, within.text).toBe(200);
      expect(within.body.meta.last_event_id).toBe(last.toString());
      expect((await health()).role).toBe('read-only');
    } finally {
      // Also when a check above failed: the next test needs a primary.
      await admin('alter system reset default_transaction_read_only; select pg_reload_conf()');
    }
    await eventually(async () => (await createTask('after read-only')).status === 201, { message: 'writes are taken again', timeout: 10_000 });
    const primary = await beyond();
    for (const res of [primary.list, { status: primary.stream.status, text: primary.stream.text!, body: JSON.parse(primary.stream.text!) }]) {
      expect(res.status, res.text).toBe(410);
      expect(res.body.errors[0].code).toBe('cursor_expired');
      expect(BigInt(res.body.meta.last_event_id)).toBeGreaterThan(last);
    }
    expect(primary.trpc?.data?.httpStatus).toBe(410);
  });

  it('answers every request within a second while the server is down, says unreachable, and recovers when it is back', async () => {
    await db.stop();
    for (const [method, path] of [['GET', '/api/users/me/tasks'], ['POST', '/api/users/me/tasks'], ['GET', '/readyz']] as const) {
      const started = performance.now();
      const res = method === 'POST' ? await createTask('while down') : await call(service.url, method, path, { token });
      expect(performance.now() - started, `${method} ${path}`).toBeLessThan(1_000);
      expectUnavailable(res);
    }
    const started = performance.now();
    expect((await health()).role).toBe('unreachable');
    expect(performance.now() - started).toBeLessThan(1_500);
    expect(sample(await scrape(service.metricsUrl!), 'planning_db_role', { role: 'unreachable' })).toBe(1);

    await db.restart();
    await eventually(async () => (await createTask('back')).status === 201, { message: 'writes are taken once the server is back', timeout: 10_000 });
    expect((await health()).role).toBe('primary');
  });
});
