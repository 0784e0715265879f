/**
 * SQL statements per request, for every endpoint: an exact, small number that does not
 * grow with the page size of a list, with the tasks of a project, or with how many tasks a
 * reorder shifts (no N+1, no per-row statements). Counted through openOrm's onQuery hook:
 * every statement the ORM sends is logged once as a line starting with "[query]"
 * (`begin` and `commit` of write transactions included).
 *
 * The numbers are the ones observed with MikroORM 7.2.1 on the current schema; when a
 * change makes an endpoint cheaper, lower them here. A failure prints the statements.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MikroORM } from '@mikro-orm/postgresql';
import { ManualClock } from '../../src/core/clock.js';
import { createLogger } from '../../src/core/logger.js';
import { openOrm } from '../../src/app/orm.js';
import { createApp } from '../../src/http/app.js';
import { Announcer } from '../../src/writes/announcer.js';
import { T0, createTestDatabase } from '../helpers/test-app.js';

/** Statements per request, each a message to PostgreSQL of its own (one round trip). */
// Every write of projects and tasks is one call of its write function (docs/design/writes.md),
// after the token's lookup; its NOTIFY follows the answer (src/writes/announcer.ts).
const EXPECTED = {
  register: 6, // username check; begin, insert user, its name in the directory, insert token, commit
  authorize: 6, // the name's user id in the directory; the user by id; begin, the user's row still with the password checked (for share), insert token, commit
  me: 1, // token lookup
  revoke: 3, // token lookup; delete token; its revocation announced to every instance (src/users/revocation.ts)
  projectCreate: 3, // token; the write function's call: the user's lock, the name checked, insert, event; its NOTIFY
  projectList: 2, // token; the page with its total and each project's task ids
  projectGet: 2, // token; the project with its task ids
  projectUpdate: 3, // token; the call: the project, every edit rule, update, event; NOTIFY
  projectRename: 3, // the same, the name checked
  projectStart: 3, // token; the call: the project, its transition from the table, the started limit, the tasks' effect, events; NOTIFY
  projectPause: 3, // the same, without the started limit
  projectFinish: 3, // the same, with no effect on tasks
  projectDelete: 3, // token; the call: release its tasks, delete, events; NOTIFY
  taskCreate: 3, // token; the write function's call (docs/design/writes.md): the user's lock, insert at the end of the order, event; its NOTIFY after the answer
  taskCreateInProject: 3, // token; NOTIFY; the call: the user's lock, the project, insert in its state, both events (the task's, the project's with its task ids)
  taskList: 2, // token; the page with its total
  taskGet: 2, // token; task
  taskUpdateLabel: 3, // token; the write function's call; its NOTIFY
  taskUpdateProject: 3, // token; the call: the task, the project, update with the state synced, events of both projects and the task; NOTIFY
  taskDetach: 3, // the same, with no project to join
  taskChangeState: 3, // token; NOTIFY; the call: the user's lock, the task, its action from the table, update, event
  taskChangeStateRefused: 2, // token; the call, which refuses
  taskAbandon: 3, // token; NOTIFY; the call: update, events (the task's and its project's, if any)
  taskReorder: 3, // token; the call: the task, the highest order (a counter), the shift, the moved tasks' events and their projects'; NOTIFY
  taskReorderInPlace: 2, // token; the call, which finds nothing to move: no event, no NOTIFY
  rateLimiter: 1, // one upsert per request when the per-token limit is on
} as const;
type Endpoint = keyof typeof EXPECTED;

const DUE = Math.floor(T0 / 1000) + 7 * 86_400;

interface Counted {
  status: number;
  body: any;
  sql: string[];
}

let orm: MikroORM;
let announcer: Announcer;
const servers: Server[] = [];
let baseUrl = '';
let limitedUrl = '';
let databaseUrl = '';
/** Statements of the request in flight; requests are sent one at a time. */
let log: string[] | null = null;
const observed: Partial<Record<Endpoint, number>> = {};

async function listen(app: ReturnType<typeof createApp>): Promise<string> {
  const server = createServer(app);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  orm = await openOrm(databaseUrl, {
    migrate: true,
    poolSize: 5,
    onQuery: (line) => {
      if (log && line.startsWith('[query]')) log.push(line);
    },
  });
  announcer = new Announcer(() => orm.em.fork());
  const deps = { orm, announcer, clock: new ManualClock(T0), logger: createLogger('silent'), trustProxy: false, passwordHashCost: 1024 };
  baseUrl = await listen(createApp(deps));
  limitedUrl = await listen(createApp({ ...deps, rateLimits: { authPerMinute: 0, perMinute: 1_000_000 } }));
});

afterAll(async () => {
  if (Object.keys(observed).length) console.log('SQL statements per request:', JSON.stringify(observed));
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  await orm?.close(true);
});

/** One request; returns its status, parsed body and the statements it issued. */
async function call(method: string, path: string, token?: string, body?: unknown, base = baseUrl): Promise<Counted> {
  const headers: Record<string, string> = {};
  if (token) headers.Authorization = token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  log = [];
  const res = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  // A write's NOTIFY is sent after its answer (src/writes/announcer.ts): it counts as the write's.
  await announcer.idle();
  const sql = log;
  log = null;
  return { status: res.status, body: text ? JSON.parse(text) : undefined, sql };
}

function expectStatements(name: Endpoint, status: number, res: Counted): Counted {
  observed[name] = res.sql.length;
  expect(res.status, `${name}: ${JSON.stringify(res.body)?.slice(0, 300)}`).toBe(status);
  expect(res.sql.length, `${name} issued:\n${res.sql.join('\n')}`).toBe(EXPECTED[name]);
  return res;
}

/** Same statements count as `reference`, with the statements in the message when not. */
function expectSameCost(res: Counted, reference: Counted, what: string) {
  expect(res.sql.length, `${what} issued:\n${res.sql.join('\n')}\nreference:\n${reference.sql.join('\n')}`).toBe(reference.sql.length);
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

/** `n` tasks of `userId` with orders after its current highest, spread over `projectIds`. */
async function seedTasks(userId: number, n: number, projectIds: number[] = [], state = 'newed') {
  await sql(
    `insert into tasks (user_id, project_id, label, "order", state, started_at, created_at)
     select $1, case when cardinality($3::int[]) = 0 then null else ($3::int[])[1 + (g % cardinality($3::int[]))] end,
            'task ' || g, (select coalesce(max("order"), 0) from tasks where user_id = $1) + g, $4,
            case when $4 = 'newed' then null else now() end, now()
     from generate_series(1, $2::int) g`,
    [userId, n, `{${projectIds.join(',')}}`, state],
  );
  // The order the user's next task takes follows (a write moves it with its insert).
  await sql(`update users set next_task_order = (select max("order") + 1 from tasks where user_id = $1) where id = $1`, [userId]);
}

async function seedProjects(userId: number, n: number): Promise<number[]> {
  const rows = await sql<{ id: number }>(
    `insert into projects (user_id, name, slug, created_at)
     select $1, 'Bulk-' || g, 'bulk-' || g, now() from generate_series(1, $2::int) g returning id`,
    [userId, n],
  );
  return rows.map((r) => r.id);
}

async function taskAtOrder(userId: number, order: number): Promise<number> {
  const [row] = await sql<{ id: number }>('select id from tasks where user_id = $1 and "order" = $2', [userId, order]);
  return row!.id;
}

describe('users', () => {
  it('register, authorize, me and revoke', async () => {
    const u = await register();
    expectStatements('register', 201, u.res);
    const auth = expectStatements(
      'authorize',
      201,
      await call('POST', '/api/users/authorizations', undefined, { username: u.username, password: 'correct horse' }),
    );
    expectStatements('me', 200, await call('GET', '/api/users/me', u.token));
    expectStatements('revoke', 204, await call('DELETE', '/api/users/me/authorizations/current', auth.body.meta.token));
  });
});

describe('projects', () => {
  it('create, get, update, start, pause, restart, finish and delete', async () => {
    const u = await register();
    const created = expectStatements('projectCreate', 201, await call('POST', '/api/users/me/projects', u.token, { project: { name: 'Alpha' } }));
    const id = created.body.data.id as number;
    await seedTasks(u.id, 5, [id]);
    expectStatements('projectGet', 200, await call('GET', `/api/projects/${id}`, u.token));
    expectStatements('projectUpdate', 200, await call('PATCH', `/api/projects/${id}`, u.token, { project: { description: 'd' } }));
    expectStatements('projectRename', 200, await call('PATCH', `/api/projects/${id}`, u.token, { project: { name: 'Beta' } }));
    const state = (body: object) => call('PUT', `/api/projects/${id}/state`, u.token, { project: body });
    expectStatements('projectStart', 200, await state({ state: 'started', due_at: DUE }));
    expectStatements('projectPause', 200, await state({ state: 'paused' }));
    expectStatements('projectStart', 200, await state({ state: 'started' })); // restart
    expectStatements('projectFinish', 200, await state({ state: 'finished' }));
    expectStatements('projectDelete', 204, await call('DELETE', `/api/projects/${id}`, u.token));
  });

  it('a list page of 1 project and a full page of 25 projects with 20 tasks each cost the same', async () => {
    const one = await register();
    const [p1] = await seedProjects(one.id, 1);
    await seedTasks(one.id, 1, [p1!]);
    const small = await call('GET', '/api/users/me/projects', one.token);
    expect(small.body.data).toHaveLength(1);
    expectStatements('projectList', 200, small);

    const full = await register();
    const ids = await seedProjects(full.id, 30);
    await seedTasks(full.id, 600, ids);
    const big = await call('GET', '/api/users/me/projects', full.token);
    expect(big.status).toBe(200);
    expect(big.body.data).toHaveLength(25);
    expect(big.body.data[0].relationships.tasks.data).toHaveLength(20);
    expectSameCost(big, small, 'a page of 25 projects');
    expectSameCost(await call('GET', '/api/users/me/projects?page=2', full.token), small, 'the last page of projects');
  });

  it('get, start, pause and delete cost the same for a project with 1 task and with 400', async () => {
    const u = await register();
    const [small, busy] = await seedProjects(u.id, 2);
    await seedTasks(u.id, 1, [small!]);
    await seedTasks(u.id, 400, [busy!]);
    const cost = async (project: number) => {
      const get = await call('GET', `/api/projects/${project}`, u.token);
      const start = await call('PUT', `/api/projects/${project}/state`, u.token, { project: { state: 'started', due_at: DUE } });
      const pause = await call('PUT', `/api/projects/${project}/state`, u.token, { project: { state: 'paused' } });
      const del = await call('DELETE', `/api/projects/${project}`, u.token);
      for (const res of [get, start, pause]) expect(res.status).toBe(200);
      expect(del.status).toBe(204);
      return { get, start, pause, del };
    };
    const a = await cost(small!);
    const b = await cost(busy!);
    expect(b.get.body.data.relationships.tasks.data).toHaveLength(400);
    expect(a.get.sql).toHaveLength(EXPECTED.projectGet);
    expect(a.start.sql).toHaveLength(EXPECTED.projectStart);
    expect(a.pause.sql).toHaveLength(EXPECTED.projectPause);
    expect(a.del.sql).toHaveLength(EXPECTED.projectDelete);
    expectSameCost(b.get, a.get, 'get of a project with 400 tasks');
    expectSameCost(b.start, a.start, 'start of a project with 400 tasks');
    expectSameCost(b.pause, a.pause, 'pause of a project with 400 tasks');
    expectSameCost(b.del, a.del, 'delete of a project with 400 tasks');
    const [row] = await sql<{ n: string }>(`select count(*) as n from tasks where user_id = $1 and state = 'abandoned'`, [u.id]);
    expect(Number(row!.n)).toBe(401);
  });
});

describe('tasks', () => {
  it('create, get, update and change state', async () => {
    const u = await register();
    const created = expectStatements('taskCreate', 201, await call('POST', '/api/users/me/tasks', u.token, { task: { label: 'one' } }));
    const id = created.body.data.id as number;
    const project = (await call('POST', '/api/users/me/projects', u.token, { project: { name: 'Home' } })).body.data.id as number;
    expectStatements('taskCreateInProject', 201, await call('POST', '/api/users/me/tasks', u.token, { task: { label: 'two', project_id: project } }));
    expectStatements('taskGet', 200, await call('GET', `/api/tasks/${id}`, u.token));
    expectStatements('taskUpdateLabel', 200, await call('PATCH', `/api/tasks/${id}`, u.token, { task: { label: 'uno' } }));
    expectStatements('taskUpdateProject', 200, await call('PATCH', `/api/tasks/${id}`, u.token, { task: { project_id: project } }));
    expectStatements('taskDetach', 200, await call('PATCH', `/api/tasks/${id}`, u.token, { task: { project_id: null } }));
    for (const state of ['planned', 'finished', 'planned', 'newed', 'started']) {
      expectStatements('taskChangeState', 200, await call('PUT', `/api/tasks/${id}/state`, u.token, { task: { state } }));
    }
    // A refused change says why from the task's state, read by the one statement itself.
    expectStatements('taskChangeStateRefused', 422, await call('PUT', `/api/tasks/${id}/state`, u.token, { task: { state: 'finished' } }));
    expectStatements('taskAbandon', 200, await call('PUT', `/api/tasks/${id}/state`, u.token, { task: { state: 'abandoned' } }));
  });

  it('a list page of 1 task and full pages of 50 cost the same', async () => {
    const one = await register();
    await seedTasks(one.id, 1);
    const small = await call('GET', '/api/users/me/tasks', one.token);
    expect(small.body.data).toHaveLength(1);
    expectStatements('taskList', 200, small);

    const full = await register();
    await seedTasks(full.id, 1_000);
    for (const page of [1, 2, 20, 21]) {
      const res = await call('GET', `/api/users/me/tasks?page=${page}`, full.token);
      expect(res.status).toBe(200);
      expect(res.body.data).toHaveLength(page <= 20 ? 50 : 0);
      expectSameCost(res, small, `page ${page} of 1,000 tasks`);
    }
  });

  it('a reorder over 10 tasks and over 300 tasks cost the same, in both directions', async () => {
    const small = await register();
    await seedTasks(small.id, 10);
    const r10 = await call('PUT', `/api/tasks/${await taskAtOrder(small.id, 10)}/order`, small.token, { task: { order: 1 } });
    expectStatements('taskReorder', 200, r10);
    expect(r10.body.data).toHaveLength(10);

    const big = await register();
    await seedTasks(big.id, 300);
    const up = await call('PUT', `/api/tasks/${await taskAtOrder(big.id, 300)}/order`, big.token, { task: { order: 1 } });
    expect(up.status).toBe(200);
    expect(up.body.data).toHaveLength(300);
    expectSameCost(up, r10, 'moving a task up over 300 tasks');
    const down = await call('PUT', `/api/tasks/${await taskAtOrder(big.id, 1)}/order`, big.token, { task: { order: 10_000 } });
    expect(down.status).toBe(200);
    expect(down.body.data).toHaveLength(300); // clamped to the highest order
    expectSameCost(down, r10, 'moving a task down over 300 tasks');
    expectStatements('taskReorderInPlace', 200, await call('PUT', `/api/tasks/${await taskAtOrder(big.id, 7)}/order`, big.token, { task: { order: 7 } }));

    const orders = await sql<{ order: number }>('select "order" from tasks where user_id = $1 order by "order"', [big.id]);
    expect(orders.map((o) => o.order)).toEqual(Array.from({ length: 300 }, (_, i) => i + 1));
  });
});

describe('the tRPC door and the rate limiter', () => {
  it('tRPC calls cost what their REST routes cost', async () => {
    const u = await register();
    await seedTasks(u.id, 60);
    const trpcList = await call('GET', `/trpc/tasks.list?input=${encodeURIComponent(JSON.stringify({ json: { page: 1 } }))}`, u.token);
    expect(trpcList.status).toBe(200);
    expect(trpcList.body.result.data.json.data).toHaveLength(50);
    expect(trpcList.sql).toHaveLength(EXPECTED.taskList);
    const trpcCreate = await call('POST', '/trpc/tasks.create', u.token, { json: { task: { label: 'via trpc' } } });
    expect(trpcCreate.status).toBe(200);
    expect(trpcCreate.sql).toHaveLength(EXPECTED.taskCreate);
  });

  it('the per-token rate limit adds one statement to each request', async () => {
    const u = await register();
    await seedTasks(u.id, 3);
    const list = await call('GET', '/api/users/me/tasks', u.token, undefined, limitedUrl);
    expect(list.status).toBe(200);
    expect(list.sql.length - EXPECTED.taskList, list.sql.join('\n')).toBe(EXPECTED.rateLimiter);
    const me = await call('GET', '/api/users/me', u.token, undefined, limitedUrl);
    expect(me.status).toBe(200);
    observed.rateLimiter = me.sql.length - EXPECTED.me;
    expect(me.sql.length - EXPECTED.me, me.sql.join('\n')).toBe(EXPECTED.rateLimiter);
  });
});
