/**
 * Batches (API-CONTRACT.md §15) racing other writes of the same user: each batch is one
 * write under the owner's lock, so whatever runs beside it (other batches, single requests,
 * another server process on the same database) sees all of it or none of it.
 *
 * - Batches and single requests of one user sent at once, in rounds: task orders stay
 *   exactly 1..n, at most 3 projects are started at any point of the change log (replayed
 *   event by event), the log's numbers stay dense, no row is lost or added (the tasks are
 *   those created by the writes that answered success), no 5xx.
 * - Two batches that each start a project when one place is left, sent at once: one starts
 *   its project, the other is refused (reached_max_started, under its operation), 3 started.
 *   A batch that pauses one project and starts another is never seen half done: a batch
 *   starting a project beside it is refused, whichever runs first.
 * - The same across two server processes (src/main.ts as a user runs it) on one database:
 *   the limit and the orders are kept in the database, not in a process.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request, registerUser, type ApiResponse, type RequestOptions } from '../helpers/http.js';
import { mulberry32 } from '../helpers/prng.js';
import { spawnService, stopServices, type SpawnedService } from '../helpers/spawn-service.js';
import { createTestDatabase, useTestAppWithSql } from '../helpers/test-app.js';
import { DUE } from '../helpers/times.js';

type Json = Record<string, any>;
type Send = (method: string, path: string, options?: RequestOptions) => Promise<ApiResponse>;

const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);
const MAX_STARTED = 3;

interface Door {
  send: Send;
  token: string;
}

const post = (door: Door, path: string, body: unknown) => door.send('POST', path, { token: door.token, body });
const batch = (door: Door, operations: unknown[]) => post(door, '/api/batch', { operations });

async function createProject(door: Door, name: string): Promise<number> {
  const res = await post(door, '/api/users/me/projects', { project: { name } });
  expect(res.status, res.text).toBe(201);
  return res.body.data.id;
}

async function changeProject(door: Door, id: number, project: Json): Promise<ApiResponse> {
  return door.send('PUT', `/api/projects/${id}/state`, { token: door.token, body: { project } });
}

async function createTask(door: Door, label: string, project_id?: number): Promise<number> {
  const res = await post(door, '/api/users/me/tasks', { task: { label, project_id } });
  expect(res.status, res.text).toBe(201);
  return res.body.data.id;
}

/**
 * What must hold of a user's rows and change log whatever ran: orders exactly 1..n; the
 * log numbered 1..m, the user's mark at m; at most 3 started projects in the rows and after
 * every event of the log (each event carries its project as that write left it). Returns
 * the number of tasks and of started projects.
 */
async function expectConsistent(sql: pg.Client, userId: number): Promise<{ tasks: number; started: number[] }> {
  const orders = (await sql.query('select "order" from tasks where user_id = $1 order by "order"', [userId])).rows.map((r) => r.order);
  expect(orders, 'task orders').toEqual(range(orders.length));
  const started = (await sql.query(`select id from projects where user_id = $1 and state = 'started' order by id`, [userId])).rows.map((r) => Number(r.id));
  expect(started.length, 'started projects').toBeLessThanOrEqual(MAX_STARTED);
  const events = (await sql.query('select seq::int as seq, type, data from events where user_id = $1 order by seq', [userId])).rows;
  expect(events.map((e) => e.seq), 'event numbers').toEqual(range(events.length));
  const mark = (await sql.query('select last_event_seq::int as n from users where id = $1', [userId])).rows[0].n;
  expect(mark, 'the user\'s last event number').toBe(events.length);
  const states = new Map<number, string>();
  for (const event of events) {
    if (event.type === 'project.deleted') states.delete(event.data.id);
    else if (event.type.startsWith('project.')) states.set(event.data.id, event.data.attributes.state);
    const n = [...states.values()].filter((s) => s === 'started').length;
    expect(n, `started projects after event ${event.seq} (${event.type} ${event.data.id})`).toBeLessThanOrEqual(MAX_STARTED);
  }
  // The log, replayed, ends where the rows are.
  expect([...states].filter(([, s]) => s === 'started').map(([id]) => id).sort((a, b) => a - b), 'started projects by the log').toEqual(started);
  return { tasks: orders.length, started };
}

/** The error of a refused batch: one, of these codes, under an operation. */
function expectRefusedOperation(res: ApiResponse, codes: string[]) {
  expect(res.status, res.text).toBe(422);
  expect(res.body.errors, res.text).toHaveLength(1);
  const [error] = res.body.errors;
  expect(codes, res.text).toContain(error.code);
  expect(error.source.pointer, res.text).toMatch(/^\/operations\/\d+\//);
}

/**
 * Rounds of batches and single requests of one user, all of a round sent at once (from
 * `doors`, in turn): task creates, reorders, moves between projects, task state changes,
 * project starts, pauses and swaps. Each write is drawn from a seeded PRNG; which of the
 * refusable ones are refused depends on the interleaving, and is not asserted. Returns how
 * many tasks the writes that succeeded created.
 */
async function interleaved(doors: Door[], projects: number[], tasks: number[], seed: number, due: number): Promise<number> {
  const random = mulberry32(seed);
  const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)]!;
  const order = () => 1 + Math.floor(random() * (tasks.length + 5));
  let created = 0;
  const door = (() => {
    let n = 0;
    return () => doors[n++ % doors.length]!;
  })();

  /** A batch that only creates, reorders and moves tasks between projects: it always lands. */
  const safeBatch = () => {
    const ops: Json[] = [];
    const n = 3 + Math.floor(random() * 6);
    for (let i = 0; i < n; i++) {
      const kind = random();
      if (kind < 0.4) ops.push({ op: 'tasks.create', ref: `c${i}`, input: { task: { label: `b${i}`, project_id: random() < 0.5 ? pick(projects) : undefined } } });
      else if (kind < 0.7) {
        const own = ops.filter((o) => o.ref);
        const id = own.length > 0 && random() < 0.5 ? { ref: pick(own).ref } : pick(tasks);
        ops.push({ op: 'tasks.reorder', input: { id, task: { order: order() } } });
      } else ops.push({ op: 'tasks.update', input: { id: pick(tasks), task: { project_id: random() < 0.3 ? null : pick(projects) } } });
    }
    return ops;
  };
  /** A batch that changes states: a swap (pause one, start another), starts, task moves; it may be refused. */
  const riskyBatch = () => {
    const ops: Json[] = [];
    const kind = random();
    if (kind < 0.5) {
      ops.push({ op: 'projects.changeState', input: { id: pick(projects), project: { state: 'paused' } } });
      ops.push({ op: 'projects.changeState', input: { id: pick(projects), project: { state: 'started', due_at: due } } });
    } else {
      ops.push({ op: 'tasks.create', ref: 't', input: { task: { label: 'r', project_id: pick(projects) } } });
      ops.push({ op: 'projects.changeState', input: { id: pick(projects), project: { state: 'started', due_at: due } } });
      ops.push({ op: 'tasks.changeState', input: { id: pick(tasks), task: { state: pick(['started', 'planned', 'newed']) } } });
      ops.push({ op: 'tasks.reorder', input: { id: { ref: 't' }, task: { order: 1 } } });
    }
    return ops;
  };

  for (let round = 0; round < 3; round++) {
    const work: Array<Promise<void>> = [];
    for (let i = 0; i < 24; i++) {
      const d = door();
      const kind = i % 4;
      if (kind === 0) {
        const ops = safeBatch();
        work.push(batch(d, ops).then((res) => {
          expect(res.status, `a batch of creates, reorders and moves: ${res.text}`).toBe(200);
          created += ops.filter((o) => o.op === 'tasks.create').length;
          // Each answer is the operation's, in request order.
          expect(res.body.data.map((r: Json) => r.status)).toEqual(ops.map((o) => (o.op === 'tasks.create' ? 201 : 200)));
        }));
      } else if (kind === 1) {
        const ops = riskyBatch();
        work.push(batch(d, ops).then((res) => {
          if (res.status === 200) created += ops.filter((o) => o.op === 'tasks.create').length;
          else expectRefusedOperation(res, ['reached_max_started', 'invalid_transition']);
        }));
      } else {
        const single = random();
        const write: Promise<ApiResponse> =
          single < 0.35 ? post(d, '/api/users/me/tasks', { task: { label: `s${round}.${i}`, project_id: random() < 0.5 ? pick(projects) : undefined } })
          : single < 0.65 ? d.send('PUT', `/api/tasks/${pick(tasks)}/order`, { token: d.token, body: { task: { order: order() } } })
          : single < 0.8 ? changeProject(d, pick(projects), random() < 0.5 ? { state: 'paused' } : { state: 'started', due_at: due })
          : d.send('PUT', `/api/tasks/${pick(tasks)}/state`, { token: d.token, body: { task: { state: pick(['started', 'planned', 'finished', 'newed']) } } });
        work.push(write.then((res) => {
          expect([200, 201, 422], res.text).toContain(res.status);
          if (res.status === 201) created += 1;
          if (res.status === 422) expect(['reached_max_started', 'invalid_transition'], res.text).toContain(res.body.errors[0].code);
        }));
      }
    }
    await Promise.all(work);
  }
  return created;
}

describe('one server process', () => {
  const { app, db } = useTestAppWithSql({ resetClock: true });

  async function world(door: Door) {
    const projects: number[] = [];
    for (const name of ['A', 'B', 'C', 'D', 'E', 'F']) projects.push(await createProject(door, name));
    for (const id of projects.slice(0, 2)) expect((await changeProject(door, id, { state: 'started', due_at: DUE })).status).toBe(200);
    const tasks: number[] = [];
    for (let i = 0; i < 10; i++) tasks.push(await createTask(door, `t${i}`, i % 3 === 0 ? undefined : projects[i % projects.length]));
    return { projects, tasks };
  }

  it('batches and single requests of one user, sent at once, keep orders 1..n and at most 3 started', async () => {
    const user = await app.register();
    const door: Door = { send: app.request, token: user.token };
    const { projects, tasks } = await world(door);
    const created = await interleaved([door], projects, tasks, 20261127, DUE);
    const { tasks: total } = await expectConsistent(db, user.id);
    expect(total, 'the tasks are those the successful writes created').toBe(tasks.length + created);
  });

  it('two batches that each start a project when one place is left, sent at once: one lands, the other is refused', async () => {
    const user = await app.register();
    const door: Door = { send: app.request, token: user.token };
    const [a, b, c, d] = [await createProject(door, 'A'), await createProject(door, 'B'), await createProject(door, 'C'), await createProject(door, 'D')];
    for (const id of [a!, b!]) expect((await changeProject(door, id, { state: 'started', due_at: DUE })).status).toBe(200);
    const starting = (id: number) => [
      { op: 'tasks.create', input: { task: { label: 'before', project_id: id } } },
      // Newed the first time, paused after: `started` with a due date is a start, then a restart.
      { op: 'projects.changeState', input: { id, project: { state: 'started', due_at: DUE } } },
      { op: 'tasks.create', input: { task: { label: 'after', project_id: id } } },
    ];
    for (let round = 0; round < 8; round++) {
      const answers = await Promise.all([batch(door, starting(c!)), batch(door, starting(d!))]);
      expect(answers.map((r) => r.status).sort(), answers.map((r) => r.text).join('\n')).toEqual([200, 422]);
      const refused = answers.find((r) => r.status === 422)!;
      expect(refused.body.errors).toEqual([expect.objectContaining({ code: 'reached_max_started', source: { pointer: '/operations/1/project/state' } })]);
      const { started } = await expectConsistent(db, user.id);
      expect(started).toHaveLength(3);
      const winner = answers[0]!.status === 200 ? c! : d!;
      expect(started).toContain(winner);
      expect((await changeProject(door, winner, { state: 'paused' })).status).toBe(200);
    }
    // Only the batches that landed created tasks: two per round.
    expect((await db.query('select count(*)::int as n from tasks where user_id = $1', [user.id])).rows[0].n).toBe(16);
  });

  it('a swap at the limit is never seen half done: a start sent beside it is refused, whichever runs first', async () => {
    const user = await app.register();
    const door: Door = { send: app.request, token: user.token };
    const ids: number[] = [];
    for (const name of ['A', 'B', 'C', 'D', 'E']) ids.push(await createProject(door, name));
    const [a, b, c, d, e] = ids as [number, number, number, number, number];
    for (const id of [a, b, c]) expect((await changeProject(door, id, { state: 'started', due_at: DUE })).status).toBe(200);
    let [out, into] = [a, d];
    for (let round = 0; round < 8; round++) {
      const [swap, start] = await Promise.all([
        batch(door, [
          { op: 'projects.changeState', input: { id: out, project: { state: 'paused' } } },
          { op: 'projects.changeState', input: { id: into, project: { state: 'started', due_at: DUE } } },
        ]),
        batch(door, [{ op: 'projects.changeState', input: { id: e, project: { state: 'started', due_at: DUE } } }]),
      ]);
      expect(swap!.status, swap!.text).toBe(200);
      expect(start!.body.errors, start!.text).toEqual([expect.objectContaining({ code: 'reached_max_started', source: { pointer: '/operations/0/project/state' } })]);
      const { started } = await expectConsistent(db, user.id);
      expect(started).toHaveLength(3);
      [out, into] = [into, out];
    }
  });
});

describe('two server processes on one database', () => {
  let databaseUrl: string;
  let one: SpawnedService;
  let two: SpawnedService;
  let sql: pg.Client;
  /** The spawned services run on the real clock: a due date 30 days after now is after their today. */
  const due = Math.floor(Date.now() / 1000) + 30 * 86_400;

  beforeAll(async () => {
    databaseUrl = await createTestDatabase();
    const env = { DATABASE_URL: databaseUrl, RATE_LIMIT_PER_MINUTE: '0', RATE_LIMIT_AUTH_PER_MINUTE: '0' };
    // The first migrates (nothing to do on a copy of the migrated template); the second starts beside it.
    one = await spawnService(env);
    two = await spawnService(env);
    sql = new pg.Client({ connectionString: databaseUrl });
    await sql.connect();
  }, 90_000);

  afterAll(async () => {
    await sql?.end();
    await stopServices([one, two]);
  });

  const doorsOf = (token: string): [Door, Door] => [
    { send: (method, path, options) => request(one.url, method, path, options), token },
    { send: (method, path, options) => request(two.url, method, path, options), token },
  ];

  it('batches and single requests through both, sent at once, keep orders 1..n and at most 3 started', async () => {
    const user = await registerUser(one.url, 'interleaved');
    const [first, second] = doorsOf(user.token);
    const projects: number[] = [];
    for (const name of ['A', 'B', 'C', 'D', 'E', 'F']) projects.push(await createProject(first, name));
    for (const id of projects.slice(0, 2)) expect((await changeProject(second, id, { state: 'started', due_at: due })).status).toBe(200);
    const tasks: number[] = [];
    for (let i = 0; i < 10; i++) tasks.push(await createTask(i % 2 === 0 ? first : second, `t${i}`, i % 3 === 0 ? undefined : projects[i % projects.length]));
    const created = await interleaved([first, second], projects, tasks, 424242, due);
    const { tasks: total } = await expectConsistent(sql, user.id);
    expect(total, 'the tasks are those the successful writes created').toBe(tasks.length + created);
  });

  it('two batches that each start a project when one place is left, one through each process: one lands, the other is refused', async () => {
    const user = await registerUser(two.url, 'limit');
    const [first, second] = doorsOf(user.token);
    const ids: number[] = [];
    for (const name of ['A', 'B', 'C', 'D']) ids.push(await createProject(first, name));
    const [a, b, c, d] = ids as [number, number, number, number];
    for (const id of [a, b]) expect((await changeProject(first, id, { state: 'started', due_at: due })).status).toBe(200);
    const starting = (id: number) => [
      { op: 'tasks.create', ref: 't', input: { task: { label: 'before', project_id: id } } },
      { op: 'projects.changeState', input: { id, project: { state: 'started', due_at: due } } },
      { op: 'tasks.reorder', input: { id: { ref: 't' }, task: { order: 1 } } },
    ];
    let landed = 0;
    for (let round = 0; round < 8; round++) {
      // Beside them, batches of creates through both, which always land.
      const creates = Array.from({ length: 5 }, (_, i) => ({ op: 'tasks.create', input: { task: { label: `x${i}` } } }));
      const [viaOne, viaTwo, ...more] = await Promise.all([
        batch(first, starting(c)), batch(second, starting(d)), batch(first, creates), batch(second, creates),
      ]);
      expect(more.map((r) => r!.status)).toEqual([200, 200]);
      expect([viaOne!.status, viaTwo!.status].sort(), `${viaOne!.text}\n${viaTwo!.text}`).toEqual([200, 422]);
      const refused = viaOne!.status === 422 ? viaOne! : viaTwo!;
      expect(refused.body.errors).toEqual([expect.objectContaining({ code: 'reached_max_started', source: { pointer: '/operations/1/project/state' } })]);
      const { started } = await expectConsistent(sql, user.id);
      expect(started).toHaveLength(3);
      const winner = viaOne!.status === 200 ? c : d;
      expect(started).toContain(winner);
      landed += 1;
      expect((await changeProject(round % 2 === 0 ? second : first, winner, { state: 'paused' })).status).toBe(200);
    }
    const { tasks } = await expectConsistent(sql, user.id);
    expect(tasks).toBe(landed * (1 + 10));
  });
});
