/**
 * Tasks under concurrent requests, on one app and on two app instances sharing a database:
 * orders stay exactly 1..n under parallel creation and a permutation under parallel moves,
 * parallel plans never lose an update, a task's change racing its project's pause leaves
 * it consistent, and tasks created in a project racing its pauses and starts take the
 * project's state of the moment and keep its document's task list whole.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { apiSteps, range, TASKS } from '../helpers/api-steps.js';
import { eventually } from '../helpers/eventually.js';
import { mulberry32 } from '../helpers/prng.js';
import { type ApiResponse, type TestApp, useTestApp } from '../helpers/test-app.js';

const app = useTestApp({ resetClock: true });
const { createTask, getTask, putTaskState: putState, listedTaskOrders: listedOrders, projectIn } = apiSteps(app);

describe('concurrency', () => {
  async function parallelCreate(doors: TestApp[], token: string, n: number): Promise<ApiResponse[]> {
    return Promise.all(
      range(n).map((i) => doors[i % doors.length]!.request('POST', TASKS, { token, body: { task: { label: `c${i}` } } })),
    );
  }

  async function parallelReorder(doors: TestApp[], token: string, ids: number[], count: number, seed: number) {
    const random = mulberry32(seed);
    const moves = range(count).map(() => ({
      id: ids[Math.floor(random() * ids.length)]!,
      order: 1 + Math.floor(random() * (ids.length + 3)),
    }));
    return Promise.all(
      moves.map((m, i) => doors[i % doors.length]!.request('PUT', `/api/tasks/${m.id}/order`, { token, body: { task: { order: m.order } } })),
    );
  }

  function expectPermutation(orders: Array<[number, number]>, ids: number[]) {
    expect(orders.map(([, o]) => o)).toEqual(range(ids.length));
    expect(orders.map(([id]) => id).sort((x, y) => x - y)).toEqual([...ids].sort((x, y) => x - y));
  }

  it('30 parallel creations get orders exactly 1..30; 20 parallel reorders keep a permutation of 1..30', async () => {
    const user = await app.register();
    const created = await parallelCreate([app], user.token, 30);
    expect(created.map((r) => r.status)).toEqual(Array(30).fill(201));
    const orders = created.map((r) => r.body.data.attributes.order as number).sort((x, y) => x - y);
    expect(orders).toEqual(range(30));
    const ids = created.map((r) => r.body.data.id as number);
    expect(new Set(ids).size).toBe(30);

    const moved = await parallelReorder([app], user.token, ids, 20, 12345);
    expect(moved.map((r) => r.status)).toEqual(Array(20).fill(200));
    for (const r of moved) {
      const responseOrders = r.body.data.map((d: any) => d.attributes.order);
      expect(responseOrders).toEqual([...responseOrders].sort((x: number, y: number) => x - y));
      expect(new Set(responseOrders).size).toBe(responseOrders.length);
    }
    expectPermutation(await listedOrders(user.token), ids);
    // Still gap-free for the next task.
    expect((await createTask(user.token, { label: 'next' })).attributes.order).toBe(31);
  });

  it('20 parallel plans of one task each count: plannedCount 20, never a lost update', async () => {
    const user = await app.register();
    const id = (await createTask(user.token, { label: 'busy' })).id as number;
    const answers = await Promise.all(range(20).map(() => putState(user.token, id, { state: 'planned' })));
    expect(answers.map((r) => r.status)).toEqual(Array(20).fill(200));
    const counts = answers.map((r) => r.body.data.attributes.plannedCount as number).sort((x, y) => x - y);
    expect(counts).toEqual(range(20)); // each answer saw the one before it
    expect((await getTask(user.token, id)).data.attributes.plannedCount).toBe(20);
  });

  it('a task state change and its project\'s pause in parallel leave the task consistent', async () => {
    const user = await app.register();
    for (let round = 0; round < 8; round++) {
      const project = await projectIn(user.token, 'started');
      const ids = await Promise.all(range(6).map(async (i) => (await createTask(user.token, { label: `r${round}-${i}`, project_id: project })).id as number));
      await Promise.all([
        ...ids.map((id) => putState(user.token, id, { state: 'planned' })),
        app.request('PUT', `/api/projects/${project}/state`, { token: user.token, body: { project: { state: 'paused' } } }),
      ]);
      for (const id of ids) {
        const task = (await getTask(user.token, id)).data;
        // Planned before or after the pause: a planned task has been started either way.
        if (task.attributes.state === 'planned') expect(task.attributes.startedAt, `task ${id}`).toBeGreaterThan(0);
        if (task.attributes.state === 'newed') expect(task.attributes).toMatchObject({ startedAt: 0, plannedAt: 0 });
      }
      await app.request('DELETE', `/api/projects/${project}`, { token: user.token });
    }
  });

  it('a change refused in a snapshot older than a write that allows it is made, not refused', async () => {
    const user = await app.register();
    const task = await createTask(user.token, { label: 'raced' }); // started
    const holder = new pg.Client({ connectionString: app.databaseUrl });
    await holder.connect();
    const waiting = async (n: number) => {
      const { rows } = await holder.query(
        "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
      );
      return rows[0].n >= n;
    };
    try {
      // The owner's lock held outside the service: both one-statement writes take their
      // snapshot, then wait for it, the plan first.
      await holder.query('begin');
      await holder.query('select id from users where id = $1 for no key update', [user.id]);
      const plan = putState(user.token, task.id, { state: 'planned' });
      await eventually(() => waiting(1), { message: 'the plan waits for the lock' });
      // started -> finished is refused, but planned -> finished is not: after the plan commits,
      // the finish's snapshot (a started task) is stale, and it must not answer from it.
      const finish = putState(user.token, task.id, { state: 'finished' });
      await eventually(() => waiting(2), { message: 'the finish waits for the lock' });
      await holder.query('commit');
      expect((await plan).status).toBe(200);
      const finished = await finish;
      expect(finished.status, finished.text).toBe(200);
      expect(finished.body.data.attributes.state).toBe('finished');
    } finally {
      await holder.end();
    }
  });

  it('a write that waits for its user\'s lock past the lock timeout (5 s) is 503 with Retry-After and changes nothing', async () => {
    // The write function sets the bound itself (`key_open`): behind a transaction-mode pooler,
    // where this file also runs, the service's statement timeout cannot head a statement sent
    // with parameters, as a write is (docs/operations.md, "Timeouts").
    const user = await app.register();
    const task = await createTask(user.token, { label: 'held' }); // started
    const holder = new pg.Client({ connectionString: app.databaseUrl });
    await holder.connect();
    let waited = 0;
    try {
      await holder.query('begin');
      await holder.query('select id from users where id = $1 for update', [user.id]);
      const started = performance.now();
      const refused = await putState(user.token, task.id, { state: 'planned' });
      waited = performance.now() - started;
      expect(refused.status, refused.text).toBe(503);
      expect(refused.body.errors[0].code).toBe('unavailable');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      await holder.query('rollback').catch(() => undefined);
      await holder.end();
    }
    // The lock's 5 s, not the statement timeout's 15 s.
    expect(waited).toBeGreaterThanOrEqual(4_900);
    expect(waited).toBeLessThan(12_000);
    expect((await getTask(user.token, task.id)).data.attributes.state).toBe('started');
    expect((await putState(user.token, task.id, { state: 'planned' })).status).toBe(200);
  }, 30_000);

  /**
   * Tasks created in one project in parallel with its pauses and starts, over `doors`: each
   * creation reads the project's state after the owner's lock (a started project's task
   * starts, another's stays newed), so at the end every task follows the project's last state;
   * and each creation's project event lists every task created before it.
   */
  async function createsRacingPauses(doors: TestApp[]) {
    const user = await app.register();
    const project = await projectIn(user.token, 'started');
    const due = Math.floor(app.clock.now().getTime() / 1000) + 30 * 86_400;
    const toggles = range(12).map((i) => ({ state: i % 2 === 1 ? 'paused' : 'started', due_at: i % 2 === 1 ? undefined : due })); // range is 1..12: pause first, start last
    const [created, changed] = await Promise.all([
      Promise.all(range(30).map((i) => doors[i % doors.length]!.request('POST', TASKS, { token: user.token, body: { task: { label: `p${i}`, project_id: project } } }))),
      (async () => {
        const answers: ApiResponse[] = [];
        for (const [i, project_] of toggles.entries()) {
          answers.push(await doors[(i + 1) % doors.length]!.request('PUT', `/api/projects/${project}/state`, { token: user.token, body: { project: project_ } }));
        }
        return answers;
      })(),
    ]);
    expect(created.map((r) => r.status)).toEqual(Array(30).fill(201));
    expect(changed.map((r) => r.status), JSON.stringify(changed.map((r) => r.body.errors))).toEqual(Array(12).fill(200));
    const ids = created.map((r) => r.body.data.id as number);
    const final = (await app.request('GET', `/api/projects/${project}`, { token: user.token })).body.data;
    expect(final.attributes.state).toBe('started');
    // Every task (the project had none before) follows the project's last state: started.
    for (const id of ids) expect((await getTask(user.token, id)).data.attributes.state, `task ${id}`).toBe('started');
    expect(final.relationships.tasks.data.map((t: { id: number }) => t.id).sort((a: number, b: number) => a - b)).toEqual([...ids].sort((a, b) => a - b));
    // Their orders are dense: 1..30, each once.
    expectPermutation(await listedOrders(user.token), ids);
    // In the change log, a creation's project event follows its task's and lists every task created so far.
    const events: Array<{ id: string; type: string; data: any }> = [];
    for (let after = '0'; ;) {
      const page = (await app.request('GET', `/api/users/me/events?after=${after}`, { token: user.token })).body;
      events.push(...page.data);
      if (!page.links?.next) break;
      after = events.at(-1)!.id;
    }
    const seen: number[] = [];
    let projectState = 'started'; // as the log last showed it
    for (const [i, event] of events.entries()) {
      if (event.type === 'project.updated' && events[i - 1]?.type !== 'task.created') projectState = event.data.attributes.state;
      if (event.type !== 'task.created') continue;
      seen.push(event.data.id);
      const next = events[i + 1]!;
      expect(next.type).toBe('project.updated');
      expect(next.data.relationships.tasks.data.map((t: { id: number }) => t.id).sort((a: number, b: number) => a - b)).toEqual([...seen].sort((a, b) => a - b));
      // A creation does not change its project: the project is as the log last showed it, and
      // the task was created in the state that project had then.
      expect(next.data.attributes.state).toBe(projectState);
      expect(event.data.attributes.state).toBe(projectState === 'started' ? 'started' : 'newed');
    }
    expect(seen).toHaveLength(30);
  }

  it('30 creations in one project racing 12 pauses and starts: each task in its project\'s state, each project event complete', async () => {
    await createsRacingPauses([app]);
  });

  /**
   * Tasks created in one project in parallel with its deletion, over `doors`: each creation
   * lands before the delete (and is then abandoned and released) or after it (422 on
   * project_id); none is left in the deleted project, none answers 5xx, orders stay dense.
   */
  async function createsRacingDelete(doors: TestApp[]) {
    const user = await app.register();
    const project = await projectIn(user.token, 'started');
    const [created, deleted] = await Promise.all([
      Promise.all(range(20).map((i) => doors[i % doors.length]!.request('POST', TASKS, { token: user.token, body: { task: { label: `d${i}`, project_id: project } } }))),
      (async () => {
        await new Promise((resolve) => setTimeout(resolve, 5));
        return doors[doors.length - 1]!.request('DELETE', `/api/projects/${project}`, { token: user.token });
      })(),
    ]);
    expect(deleted.status).toBe(204);
    for (const res of created) expect([201, 422], res.text).toContain(res.status);
    for (const res of created.filter((r) => r.status === 422)) expect(res.body.errors[0]).toMatchObject({ code: 'record_not_found', source: { pointer: '/task/project_id' } });
    const ids = created.filter((r) => r.status === 201).map((r) => r.body.data.id as number);
    for (const id of ids) {
      const task = (await getTask(user.token, id)).data;
      expect(task.relationships.project.data, `task ${id}`).toBeNull();
      expect(task.attributes.state, `task ${id}`).toBe('abandoned');
    }
    // Abandoned, none of them is listed.
    expect(await listedOrders(user.token)).toEqual([]);
  }

  it('20 creations in one project racing its delete: each lands before it (abandoned, released) or is refused after it', async () => {
    await createsRacingDelete([app]);
  });

  it('parallel creations of two users keep each user\'s orders 1..n', async () => {
    const a = await app.register();
    const b = await app.register();
    const [ra, rb] = await Promise.all([parallelCreate([app], a.token, 15), parallelCreate([app], b.token, 15)]);
    expect(ra!.map((r) => r.body.data.attributes.order).sort((x, y) => x - y)).toEqual(range(15));
    expect(rb!.map((r) => r.body.data.attributes.order).sort((x, y) => x - y)).toEqual(range(15));
  });

  describe('two app instances on one database', () => {
    const second = useTestApp(() => ({ databaseUrl: app.databaseUrl, clock: app.clock }));

    it('30 creations in one project racing pauses and starts, spread over both: each task in its project\'s state', async () => {
      await createsRacingPauses([app, second]);
    });

    it('20 creations in one project racing its delete, spread over both: none left in the deleted project', async () => {
      await createsRacingDelete([app, second]);
    });

    it('30 parallel creations spread over both get orders exactly 1..30, and reorders keep a permutation', async () => {
      const user = await app.register();
      const created = await parallelCreate([app, second], user.token, 30);
      expect(created.map((r) => r.status)).toEqual(Array(30).fill(201));
      const ids = created.map((r) => r.body.data.id as number);
      expect(created.map((r) => r.body.data.attributes.order).sort((x, y) => x - y)).toEqual(range(30));
      expect(new Set(ids).size).toBe(30);
      expectPermutation(await listedOrders(user.token), ids);

      const moved = await parallelReorder([app, second], user.token, ids, 20, 777);
      expect(moved.map((r) => r.status)).toEqual(Array(20).fill(200));
      const viaFirst = await listedOrders(user.token);
      expectPermutation(viaFirst, ids);
      const viaSecond = await second.request('GET', TASKS, { token: user.token });
      expect(viaSecond.body.data.map((t: any) => [t.id, t.attributes.order])).toEqual(viaFirst);

      // Creations and reorders mixed, over both instances.
      const mixed = await Promise.all([
        parallelCreate([second, app], user.token, 10),
        parallelReorder([second, app], user.token, ids, 10, 4242),
      ]);
      expect(mixed[0].map((r) => r.status)).toEqual(Array(10).fill(201));
      expect(mixed[1].map((r) => r.status)).toEqual(Array(10).fill(200));
      const all = [...ids, ...mixed[0].map((r) => r.body.data.id as number)];
      expectPermutation(await listedOrders(user.token), all);
    });
  });
});
