/**
 * SQL statements per request, for every endpoint: a fixed number, independent of the page
 * size of lists and of how many tasks a reorder shifts (no N+1, no per-row statements).
 * Counted through openOrm's onQuery hook: each logged statement is one database call.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MikroORM } from '@mikro-orm/postgresql';
import { ManualClock } from '../src/core/clock.js';
import { createLogger } from '../src/core/logger.js';
import { openOrm } from '../src/db/database.js';
import { createApp } from '../src/http/app.js';
import { T0, createTestDatabase } from './helpers/test-app.js';

/** Statements per request, as observed (ORM 7.2.1, initial migration). */
const EXPECTED = {
  register: 7,
  authorize: 4,
  me: 1,
  revoke: 2,
  projectCreate: 5,
  projectList: 4,
  projectGet: 3,
  projectUpdate: 6,
  projectStart: 9,
  projectPause: 8,
  projectDelete: 7,
  taskCreate: 6,
  taskList: 3,
  taskGet: 2,
  taskUpdate: 5,
  taskChangeState: 5,
  taskReorder: 7,
} as const;

let orm: MikroORM;
let server: Server;
let baseUrl = '';
let databaseUrl = '';
let count = 0;
let counting = false;
const observed: Record<string, number> = {};

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  orm = await openOrm(databaseUrl, {
    migrate: true,
    poolSize: 5,
    onQuery: () => {
      if (counting) count++;
    },
  });
  const app = createApp({
    orm,
    clock: new ManualClock(T0),
    logger: createLogger('silent'),
    trustProxy: false,
    passwordHashCost: 1024,
  });
  server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  if (Object.keys(observed).length) console.log('SQL statements per request:', JSON.stringify(observed));
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await orm?.close(true);
});

/** One request; returns its status, parsed body and the statements it issued. */
async function call(method: string, path: string, token?: string, body?: unknown) {
  const headers: Record<string, string> = {};
  if (token) headers.Authorization = token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  count = 0;
  counting = true;
  const res = await fetch(baseUrl + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  counting = false;
  const statements = count;
  return { status: res.status, body: text ? JSON.parse(text) : undefined, statements };
}

async function expectStatements(name: keyof typeof EXPECTED, status: number, res: { status: number; statements: number }) {
  observed[name] = res.statements;
  if (process.env.QC_OBSERVE) console.log(name, res.status, JSON.stringify((res as { body?: unknown }).body).slice(0, 300));
  expect(res.status).toBe(status);
  if (process.env.QC_OBSERVE) return;
  expect(res.statements, name).toBe(EXPECTED[name]);
}

async function sql<T extends pg.QueryResultRow = any>(text: string, params: unknown[] = []) {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query<T>(text, params)).rows;
  } finally {
    await client.end();
  }
}

let userSeq = 0;
async function register() {
  const username = `qc_user_${++userSeq}`;
  const res = await call('POST', '/api/users', undefined, { user: { username, password: 'correct horse' } });
  return { res, username, id: res.body.data.id as number, token: res.body.meta.token as string };
}

/** Bulk rows: `n` tasks of `userId`, orders 1..n, optionally spread over `projectIds`. */
async function seedTasks(userId: number, n: number, projectIds: number[] = []) {
  await sql(
    `insert into tasks (user_id, project_id, label, "order", state, created_at)
     select $1, case when cardinality($3::int[]) = 0 then null else ($3::int[])[1 + (g % cardinality($3::int[]))] end,
            'task ' || g, g, 'newed', now()
     from generate_series(1, $2::int) g`,
    [userId, n, projectIds],
  );
}

async function seedProjects(userId: number, n: number): Promise<number[]> {
  const rows = await sql<{ id: number }>(
    `insert into projects (user_id, name, slug, created_at)
     select $1, 'Bulk ' || g, 'bulk ' || g, now() from generate_series(1, $2::int) g returning id`,
    [userId, n],
  );
  return rows.map((r) => r.id);
}

describe('users', () => {
  it('register, authorize, me and revoke issue a fixed number of statements', async () => {
    const u = await register();
    await expectStatements('register', 201, u.res);
    const auth = await call('POST', '/api/users/authorizations', undefined, { username: u.username, password: 'correct horse' });
    await expectStatements('authorize', 201, auth);
    await expectStatements('me', 200, await call('GET', '/api/users/me', u.token));
    const revoke = await call('DELETE', '/api/users/me/authorizations/current', auth.body.meta.token);
    expect([200, 204]).toContain(revoke.status);
    observed.revoke = revoke.statements;
    if (process.env.QC_OBSERVE) return;
    expect(revoke.statements, 'revoke').toBe(EXPECTED.revoke);
  });
});

describe('projects', () => {
  it('create, get, update, start, pause and delete issue a fixed number of statements', async () => {
    const u = await register();
    const created = await call('POST', '/api/users/me/projects', u.token, { project: { name: 'Alpha' } });
    await expectStatements('projectCreate', 201, created);
    const id = created.body.data.id as number;
    await seedTasks(u.id, 5, [id]);
    await expectStatements('projectGet', 200, await call('GET', `/api/projects/${id}`, u.token));
    await expectStatements('projectUpdate', 200, await call('PATCH', `/api/projects/${id}`, u.token, { project: { description: 'd' } }));
    await expectStatements('projectStart', 200, await call('PUT', `/api/projects/${id}/state`, u.token, { project: { state: 'started', due_at: Math.floor(T0 / 1000) + 7 * 86_400 } }));
    await expectStatements('projectPause', 200, await call('PUT', `/api/projects/${id}/state`, u.token, { project: { state: 'paused' } }));
    const del = await call('DELETE', `/api/projects/${id}`, u.token);
    observed.projectDelete = del.statements;
    expect(del.status).toBe(204);
    expect(del.statements, 'projectDelete').toBe(EXPECTED.projectDelete);
  });

  it('a list page of 1 project and a full page of 25 (with tasks) cost the same', async () => {
    const one = await register();
    const [p1] = await seedProjects(one.id, 1);
    await seedTasks(one.id, 3, [p1!]);
    const small = await call('GET', '/api/users/me/projects', one.token);
    expect(small.body.data).toHaveLength(1);
    await expectStatements('projectList', 200, small);

    const full = await register();
    const ids = await seedProjects(full.id, 30);
    await seedTasks(full.id, 300, ids);
    const big = await call('GET', '/api/users/me/projects', full.token);
    expect(big.body.data).toHaveLength(25);
    expect(big.body.data[0].relationships.tasks.data.length).toBeGreaterThan(0);
    expect(big.statements).toBe(small.statements);
  });
});

describe('tasks', () => {
  it('create, get, update and change state issue a fixed number of statements', async () => {
    const u = await register();
    const created = await call('POST', '/api/users/me/tasks', u.token, { task: { label: 'one' } });
    await expectStatements('taskCreate', 201, created);
    const id = created.body.data.id as number;
    await expectStatements('taskGet', 200, await call('GET', `/api/tasks/${id}`, u.token));
    await expectStatements('taskUpdate', 200, await call('PATCH', `/api/tasks/${id}`, u.token, { task: { label: 'two' } }));
    await expectStatements('taskChangeState', 200, await call('PUT', `/api/tasks/${id}/state`, u.token, { task: { state: 'planned' } }));
  });

  it('a list page of 1 task and a full page of 50 cost the same', async () => {
    const one = await register();
    await seedTasks(one.id, 1);
    const small = await call('GET', '/api/users/me/tasks', one.token);
    expect(small.body.data).toHaveLength(1);
    await expectStatements('taskList', 200, small);

    const full = await register();
    await seedTasks(full.id, 120);
    const big = await call('GET', '/api/users/me/tasks?page=2', full.token);
    expect(big.body.data).toHaveLength(50);
    expect(big.statements).toBe(small.statements);
  });

  it('a reorder over 10 tasks and over 300 tasks cost the same', async () => {
    const small = await register();
    await seedTasks(small.id, 10);
    const [s] = await sql<{ id: number }>('select id from tasks where user_id = $1 and "order" = 10', [small.id]);
    const r10 = await call('PUT', `/api/tasks/${s!.id}/order`, small.token, { task: { order: 1 } });
    await expectStatements('taskReorder', 200, r10);

    const big = await register();
    await seedTasks(big.id, 300);
    const [b] = await sql<{ id: number }>('select id from tasks where user_id = $1 and "order" = 300', [big.id]);
    const r300 = await call('PUT', `/api/tasks/${b!.id}/order`, big.token, { task: { order: 1 } });
    expect(r300.status).toBe(200);
    expect(r300.statements).toBe(r10.statements);
    const orders = await sql<{ order: number }>('select "order" from tasks where user_id = $1 order by "order"', [big.id]);
    expect(orders.map((o) => o.order)).toEqual(Array.from({ length: 300 }, (_, i) => i + 1));
  });
});
