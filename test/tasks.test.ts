/**
 * Black-box tests of the task endpoints (SPEC.md 2.2, 3.2, 4.5–4.9; API-CONTRACT.md §1, §2, §4,
 * §5, §7, §8): full success bodies, the initial-state rules of creation, every action of the
 * task state machine and every refused move, updates and their state re-sync, reordering, the
 * list (pages, links, abandoned and long-finished tasks), ownership, concurrency (one and two
 * app instances on one database), and the same scenarios through the tRPC client.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { mulberry32 } from './helpers/prng.js';
import { DAY, T0, seconds, startTestApp, type ApiResponse, type TestApp } from './helpers/test-app.js';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});
beforeEach(() => {
  app.clock.set(T0);
});

// ---------------------------------------------------------------------------------------------
// Time: T0 is 2026-06-15T12:00:00Z (a Monday).
const T0S = seconds(T0);
const HOUR = 3600;
/** 2026-06-16T00:00:00Z. */
const NEXT_MIDNIGHT = T0S + 12 * HOUR;
/** A project due date comfortably after today. */
const DUE = NEXT_MIDNIGHT + 7 * DAY;

const META = { stability: 'unstable', notice: 'This output may change soon.' };
const JSON_CT = 'application/json; charset=utf-8';
const LIST = '/api/users/me/tasks';
const STATES = ['newed', 'started', 'planned', 'finished', 'abandoned'] as const;
type TaskState = (typeof STATES)[number];

type User = Awaited<ReturnType<TestApp['register']>>;

interface TaskExpectation {
  id: number;
  userId: number;
  label: string;
  order: number;
  state: TaskState;
  plannedCount?: number;
  startedAt?: number;
  plannedAt?: number;
  finishedAt?: number;
  abandonedAt?: number;
  projectId?: number | null;
}

/** A task resource as SPEC.md 2.2 describes it; unset timestamps are 0. */
function taskJson(t: TaskExpectation) {
  return {
    type: 'task',
    id: t.id,
    attributes: {
      label: t.label,
      order: t.order,
      plannedCount: t.plannedCount ?? 0,
      state: t.state,
      startedAt: t.startedAt ?? 0,
      plannedAt: t.plannedAt ?? 0,
      finishedAt: t.finishedAt ?? 0,
      abandonedAt: t.abandonedAt ?? 0,
    },
    relationships: {
      user: { data: { type: 'user', id: t.userId } },
      project: { data: t.projectId == null ? null : { type: 'project', id: t.projectId } },
    },
  };
}

function taskDoc(t: TaskExpectation) {
  return { data: taskJson(t), meta: META };
}

/** The expectation a response's resource corresponds to, to build on with overrides. */
function expectationOf(resource: any): TaskExpectation {
  const a = resource.attributes;
  return {
    id: resource.id,
    userId: resource.relationships.user.data.id,
    label: a.label,
    order: a.order,
    state: a.state,
    plannedCount: a.plannedCount,
    startedAt: a.startedAt,
    plannedAt: a.plannedAt,
    finishedAt: a.finishedAt,
    abandonedAt: a.abandonedAt,
    projectId: resource.relationships.project.data?.id ?? null,
  };
}

function orderDoc(pairs: Array<[number, number]>) {
  return { data: pairs.map(([id, order]) => ({ type: 'task', id, attributes: { order } })), meta: META };
}

interface Source {
  pointer?: string;
  parameter?: string;
}

/** Asserts the exact envelope of API-CONTRACT.md §2 with a single error. */
function expectError(res: ApiResponse, status: number, code: string, source?: Source) {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toBe(JSON_CT);
  const error: Record<string, unknown> = {
    status: String(status),
    code,
    title: expect.stringMatching(/\S/),
    detail: expect.stringMatching(/\S/),
  };
  if (source) error.source = source;
  expect(res.body).toEqual({ errors: [error] });
}

/** Asserts a 422 with exactly these [code, pointer] errors, in any order. */
function expectErrors(res: ApiResponse, expected: Array<[string, string]>) {
  expect(res.status, res.text).toBe(422);
  expect(Object.keys(res.body)).toEqual(['errors']);
  for (const e of res.body.errors) {
    expect(e).toEqual({
      status: '422',
      code: expect.any(String),
      title: expect.stringMatching(/\S/),
      detail: expect.stringMatching(/\S/),
      source: { pointer: expect.any(String) },
    });
  }
  const actual = res.body.errors.map((e: any) => [e.code, e.source.pointer] as [string, string]);
  const sort = (list: Array<[string, string]>) => [...list].sort((a, b) => (a.join(' ') < b.join(' ') ? -1 : 1));
  expect(sort(actual)).toEqual(sort(expected));
}

const notFound = (res: ApiResponse) => expectError(res, 404, 'record_not_found', { pointer: '/task' });

// ---------------------------------------------------------------------------------------------
// Request helpers.

const createRes = (token: string, body: unknown) => app.request('POST', LIST, { token, body });

async function createTask(token: string, task: Record<string, unknown>): Promise<any> {
  const res = await createRes(token, { task });
  expect(res.status, res.text).toBe(201);
  return res.body.data;
}

async function createTasks(token: string, n: number, prefix = 't'): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 1; i <= n; i++) ids.push((await createTask(token, { label: `${prefix}${i}` })).id);
  return ids;
}

async function getTask(token: string, id: number): Promise<any> {
  const res = await app.request('GET', `/api/tasks/${id}`, { token });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

const patchTask = (token: string, id: number | string, body: unknown) => app.request('PATCH', `/api/tasks/${id}`, { token, body });
const putState = (token: string, id: number | string, task: unknown) =>
  app.request('PUT', `/api/tasks/${id}/state`, { token, body: { task } });
const putOrder = (token: string, id: number | string, order: unknown) =>
  app.request('PUT', `/api/tasks/${id}/order`, { token, body: { task: { order } } });

async function changeState(token: string, id: number, state: string): Promise<any> {
  const res = await putState(token, id, { state });
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}

async function list(token: string, page?: number | string): Promise<ApiResponse> {
  const res = await app.request('GET', page === undefined ? LIST : `${LIST}?page=${page}`, { token });
  return res;
}

/** Ids of the first page of the list, in the order given. */
async function listedIds(token: string): Promise<number[]> {
  const res = await list(token);
  expect(res.status, res.text).toBe(200);
  return res.body.data.map((t: any) => t.id);
}

/** [id, order] of every listed task, across all pages. */
async function listedOrders(token: string): Promise<Array<[number, number]>> {
  const all: Array<[number, number]> = [];
  for (let page = 1; ; page++) {
    const res = await list(token, page);
    expect(res.status, res.text).toBe(200);
    if (res.body.data.length === 0) break;
    for (const t of res.body.data) all.push([t.id, t.attributes.order]);
    if (!res.body.links.next) break;
  }
  return all;
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

let projectCount = 0;
async function createProject(token: string): Promise<number> {
  const res = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: `proj_${++projectCount}` } } });
  expect(res.status, res.text).toBe(201);
  return res.body.data.id;
}

async function projectState(token: string, id: number, project: Record<string, unknown>): Promise<void> {
  const res = await app.request('PUT', `/api/projects/${id}/state`, { token, body: { project } });
  expect(res.status, res.text).toBe(200);
}

/** A project of the user in the given state. */
async function projectIn(token: string, state: 'newed' | 'started' | 'paused' | 'finished'): Promise<number> {
  const id = await createProject(token);
  if (state === 'newed') return id;
  await projectState(token, id, { state: 'started', due_at: DUE });
  if (state === 'paused') await projectState(token, id, { state: 'paused' });
  if (state === 'finished') await projectState(token, id, { state: 'finished' });
  return id;
}

/** A task of the user brought to the given state at the current clock time. */
async function taskIn(user: User, state: TaskState, newedProject?: number): Promise<any> {
  switch (state) {
    case 'newed':
      return createTask(user.token, { label: 'in newed', project_id: newedProject ?? (await projectIn(user.token, 'newed')) });
    case 'started':
      return createTask(user.token, { label: 'in started' });
    case 'planned':
      return createTask(user.token, { label: 'in planned', planned_at: NEXT_MIDNIGHT });
    case 'finished': {
      const t = await createTask(user.token, { label: 'in finished', planned_at: NEXT_MIDNIGHT });
      return changeState(user.token, t.id, 'finished');
    }
    case 'abandoned': {
      const t = await createTask(user.token, { label: 'in abandoned' });
      return changeState(user.token, t.id, 'abandoned');
    }
  }
}

// =============================================================================================
describe('POST /api/users/me/tasks', () => {
  it('keeps a label with quotes, backslashes, placeholders and emoji exactly as sent', async () => {
    const user = await app.register();
    const label = `it's a \\ "test" ? ?? $1 :name '' -- ; drop table tasks; 🐘 \u00e9\u0301 %s`;
    const created = await createTask(user.token, { label });
    expect(created.attributes.label).toBe(label);
    expect((await getTask(user.token, created.id)).data.attributes.label).toBe(label);
  });

  it('creates a started task without a project, answers 201 with the full task, and GET returns the same', async () => {
    const user = await app.register();
    const res = await createRes(user.token, { task: { label: 'Buy coffee' } });
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    const expected = taskDoc({
      id: res.body.data.id,
      userId: user.id,
      label: 'Buy coffee',
      order: 1,
      state: 'started',
      startedAt: T0S,
      projectId: null,
    });
    expect(res.body).toEqual(expected);
    expect(res.body.data.id).toEqual(expect.any(Number));

    app.clock.advance(3600);
    const got = await app.request('GET', `/api/tasks/${res.body.data.id}`, { token: user.token });
    expect(got.status).toBe(200);
    expect(got.headers.get('content-type')).toBe(JSON_CT);
    expect(got.body).toEqual(expected);
  });

  it('with planned_at: planned, plannedCount 1, plannedAt = planned_at, startedAt = now (before the project rule)', async () => {
    const user = await app.register();
    const newedProject = await projectIn(user.token, 'newed');
    app.clock.advance(17);
    const plain = await createTask(user.token, { label: 'plan me', planned_at: DUE });
    expect({ data: plain, meta: META }).toEqual(
      taskDoc({ id: plain.id, userId: user.id, label: 'plan me', order: 1, state: 'planned', plannedCount: 1, plannedAt: DUE, startedAt: T0S + 17 }),
    );
    // Rule 1 wins over rule 2: a project that is not started does not make it newed.
    const res = await createRes(user.token, { task: { label: 'planned in project', planned_at: T0S - DAY, project_id: newedProject } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual(
      taskDoc({
        id: res.body.data.id,
        userId: user.id,
        label: 'planned in project',
        order: 2,
        state: 'planned',
        plannedCount: 1,
        plannedAt: T0S - DAY,
        startedAt: T0S + 17,
        projectId: newedProject,
      }),
    );
    // 0 is a valid timestamp: planned_at is given.
    const zero = await createTask(user.token, { label: 'epoch', planned_at: 0 });
    expect(zero.attributes).toMatchObject({ state: 'planned', plannedCount: 1, plannedAt: 0, startedAt: T0S + 17, order: 3 });
  });

  it.each(['newed', 'paused', 'finished'] as const)('in a %s project (not started): newed with startedAt 0', async (projectState) => {
    const user = await app.register();
    const project = await projectIn(user.token, projectState);
    app.clock.advance(5);
    const res = await createRes(user.token, { task: { label: 'waiting', project_id: project } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual(
      taskDoc({ id: res.body.data.id, userId: user.id, label: 'waiting', order: 1, state: 'newed', startedAt: 0, projectId: project }),
    );
  });

  it('in a started project: started with startedAt = now', async () => {
    const user = await app.register();
    const project = await projectIn(user.token, 'started');
    app.clock.advance(42);
    const res = await createRes(user.token, { task: { label: 'going', project_id: project } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual(
      taskDoc({ id: res.body.data.id, userId: user.id, label: 'going', order: 1, state: 'started', startedAt: T0S + 42, projectId: project }),
    );
  });

  it('refuses a project_id of another user or an unknown one as record_not_found, and creates nothing', async () => {
    const owner = await app.register();
    const other = await app.register();
    const foreign = await projectIn(owner.token, 'started');
    for (const projectId of [foreign, 2_147_483_647]) {
      const res = await createRes(other.token, { task: { label: 'sneaky', project_id: projectId } });
      expectError(res, 422, 'record_not_found', { pointer: '/task/project_id' });
    }
    expect(await listedIds(other.token)).toEqual([]);
    // No order was consumed either.
    expect((await createTask(other.token, { label: 'first' })).attributes.order).toBe(1);
  });

  it('refuses a project that was deleted', async () => {
    const user = await app.register();
    const project = await projectIn(user.token, 'newed');
    expect((await app.request('DELETE', `/api/projects/${project}`, { token: user.token })).status).toBe(204);
    expectError(await createRes(user.token, { task: { label: 'x', project_id: project } }), 422, 'record_not_found', {
      pointer: '/task/project_id',
    });
  });

  it('accepts labels of 1000 code points (emoji count as one)', async () => {
    const user = await app.register();
    for (const label of ['a'.repeat(1000), '😀'.repeat(1000), ' ', 'Café – ☕ 日本']) {
      const task = await createTask(user.token, { label });
      expect(task.attributes.label).toBe(label);
      expect((await getTask(user.token, task.id)).data.attributes.label).toBe(label);
    }
  });

  it.each([
    ['empty', '', 'invalid'],
    ['1001 characters', 'a'.repeat(1001), 'too_long'],
    ['1001 emoji', '😀'.repeat(1001), 'too_long'],
    ['a NUL character', 'a\u0000b', 'invalid'],
    ['a number', 5, 'invalid'],
    ['null', null, 'invalid'],
    ['an object', { text: 'x' }, 'invalid'],
  ])('refuses a label that is %s', async (_what, label, code) => {
    const user = await app.register();
    expectError(await createRes(user.token, { task: { label } }), 422, code, { pointer: '/task/label' });
    expect(await listedIds(user.token)).toEqual([]);
  });

  it('refuses a label with an unpaired surrogate', async () => {
    const user = await app.register();
    const res = await app.request('POST', LIST, {
      token: user.token,
      rawBody: '{"task":{"label":"ab\\ud800cd"}}',
      headers: { 'Content-Type': 'application/json' },
    });
    expectError(res, 422, 'invalid', { pointer: '/task/label' });
  });

  it('requires the label and the task wrapper', async () => {
    const user = await app.register();
    expectError(await createRes(user.token, { task: {} }), 422, 'parameter_missing', { pointer: '/task/label' });
    expectError(await createRes(user.token, { task: { planned_at: DUE } }), 422, 'parameter_missing', { pointer: '/task/label' });
    for (const body of [{}, { label: 'x' }, { task: 'x' }, { task: null }, { task: ['x'] }]) {
      expectError(await createRes(user.token, body), 422, 'parameter_missing', { pointer: '/task' });
    }
    expect(await listedIds(user.token)).toEqual([]);
  });

  it.each([['123'], [-1], [1.5], [null], [true], [253_402_300_800]])('refuses planned_at %j as invalid', async (plannedAt) => {
    const user = await app.register();
    expectError(await createRes(user.token, { task: { label: 'x', planned_at: plannedAt } }), 422, 'invalid', {
      pointer: '/task/planned_at',
    });
  });

  it.each([['1'], [1.5], [true], [{ id: 1 }]])('refuses project_id %j as invalid', async (projectId) => {
    const user = await app.register();
    await projectIn(user.token, 'newed');
    expectError(await createRes(user.token, { task: { label: 'x', project_id: projectId } }), 422, 'invalid', {
      pointer: '/task/project_id',
    });
  });

  it('reports every validation error of one request', async () => {
    const user = await app.register();
    expectErrors(await createRes(user.token, { task: { planned_at: 'soon', project_id: '1' } }), [
      ['parameter_missing', '/task/label'],
      ['invalid', '/task/planned_at'],
      ['invalid', '/task/project_id'],
    ]);
    expectErrors(await createRes(user.token, { task: { label: '', planned_at: -5 } }), [
      ['invalid', '/task/label'],
      ['invalid', '/task/planned_at'],
    ]);
  });

  it('ignores unknown members', async () => {
    const user = await app.register();
    const res = await createRes(user.token, {
      task: { label: 'extra', state: 'finished', order: 99, plannedCount: 7, finished_at: 5, user_id: 1 },
      extra: true,
    });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual(
      taskDoc({ id: res.body.data.id, userId: user.id, label: 'extra', order: 1, state: 'started', startedAt: T0S }),
    );
  });

  it('gives a new task the highest order of all the user\'s tasks plus one, whatever their state', async () => {
    const user = await app.register();
    const [, t2, t3] = await createTasks(user.token, 3);
    await changeState(user.token, t3!, 'abandoned');
    expect((await createTask(user.token, { label: 'after abandoned' })).attributes.order).toBe(4);
    await changeState(user.token, t2!, 'planned');
    await changeState(user.token, t2!, 'finished');
    // Long finished: no longer listed, but it still holds its order.
    app.clock.advance(20 * DAY);
    const fresh = await app.register();
    expect((await createTask(user.token, { label: 'later' })).attributes.order).toBe(5);
    expect((await createTask(fresh.token, { label: 'fresh' })).attributes.order).toBe(1);
  });

  it('keeps orders per user independent', async () => {
    const a = await app.register();
    const b = await app.register();
    const seen: Array<[string, number]> = [];
    for (let i = 0; i < 3; i++) {
      seen.push(['a', (await createTask(a.token, { label: `a${i}` })).attributes.order]);
      seen.push(['b', (await createTask(b.token, { label: `b${i}` })).attributes.order]);
    }
    seen.push(['a', (await createTask(a.token, { label: 'a3' })).attributes.order]);
    expect(seen).toEqual([
      ['a', 1], ['b', 1], ['a', 2], ['b', 2], ['a', 3], ['b', 3], ['a', 4],
    ]);
  });
});

// =============================================================================================
describe('GET /api/tasks/:id', () => {
  it('returns the task with its project and every timestamp', async () => {
    const user = await app.register();
    const project = await projectIn(user.token, 'started');
    const created = await createTask(user.token, { label: 'full', project_id: project });
    app.clock.advance(10);
    await changeState(user.token, created.id, 'planned');
    app.clock.advance(10);
    await changeState(user.token, created.id, 'finished');
    expect(await getTask(user.token, created.id)).toEqual(
      taskDoc({
        id: created.id,
        userId: user.id,
        label: 'full',
        order: 1,
        state: 'finished',
        plannedCount: 1,
        startedAt: T0S,
        plannedAt: T0S + 10,
        finishedAt: T0S + 20,
        projectId: project,
      }),
    );
  });

  it('still returns an abandoned task', async () => {
    const user = await app.register();
    const t = await createTask(user.token, { label: 'gone' });
    app.clock.advance(9);
    await changeState(user.token, t.id, 'abandoned');
    expect(await getTask(user.token, t.id)).toEqual(
      taskDoc({ id: t.id, userId: user.id, label: 'gone', order: 1, state: 'abandoned', startedAt: T0S, abandonedAt: T0S + 9 }),
    );
  });
});

// =============================================================================================
describe('PUT /api/tasks/:id/state: the actions of SPEC.md 3.2', () => {
  it('start: newed -> started, startedAt = now', async () => {
    const user = await app.register();
    const project = await projectIn(user.token, 'newed');
    const t = await createTask(user.token, { label: 'go', project_id: project });
    app.clock.advance(60);
    const res = await putState(user.token, t.id, { state: 'started' });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    const expected = taskDoc({ id: t.id, userId: user.id, label: 'go', order: 1, state: 'started', startedAt: T0S + 60, projectId: project });
    expect(res.body).toEqual(expected);
    expect(await getTask(user.token, t.id)).toEqual(expected);
  });

  it('plan from newed: startedAt = plannedAt = now, plannedCount 1', async () => {
    const user = await app.register();
    const project = await projectIn(user.token, 'newed');
    const t = await createTask(user.token, { label: 'p', project_id: project });
    app.clock.advance(60);
    const res = await putState(user.token, t.id, { state: 'planned' });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(
      taskDoc({ id: t.id, userId: user.id, label: 'p', order: 1, state: 'planned', plannedCount: 1, startedAt: T0S + 60, plannedAt: T0S + 60, projectId: project }),
    );
  });

  it('plan from started: startedAt kept, plannedAt = now, plannedCount 1', async () => {
    const user = await app.register();
    const t = await createTask(user.token, { label: 'p' });
    app.clock.advance(60);
    const res = await putState(user.token, t.id, { state: 'planned' });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(
      taskDoc({ id: t.id, userId: user.id, label: 'p', order: 1, state: 'planned', plannedCount: 1, startedAt: T0S, plannedAt: T0S + 60 }),
    );
  });

  it('replan from planned: plannedAt = now, plannedCount + 1', async () => {
    const user = await app.register();
    const t = await createTask(user.token, { label: 'r', planned_at: DUE });
    app.clock.advance(60);
    const once = await putState(user.token, t.id, { state: 'planned' });
    expect(once.status, once.text).toBe(200);
    expect(once.body).toEqual(
      taskDoc({ id: t.id, userId: user.id, label: 'r', order: 1, state: 'planned', plannedCount: 2, startedAt: T0S, plannedAt: T0S + 60 }),
    );
    app.clock.advance(60);
    const twice = await putState(user.token, t.id, { state: 'planned' });
    expect(twice.body.data.attributes).toMatchObject({ plannedCount: 3, plannedAt: T0S + 120, startedAt: T0S, finishedAt: 0 });
  });

  it('finish: finishedAt = now; replan from finished: plannedAt = now, plannedCount + 1, finishedAt back to 0', async () => {
    const user = await app.register();
    const t = await createTask(user.token, { label: 'f', planned_at: DUE });
    app.clock.advance(60);
    const finished = await putState(user.token, t.id, { state: 'finished' });
    expect(finished.status, finished.text).toBe(200);
    expect(finished.body).toEqual(
      taskDoc({ id: t.id, userId: user.id, label: 'f', order: 1, state: 'finished', plannedCount: 1, startedAt: T0S, plannedAt: DUE, finishedAt: T0S + 60 }),
    );
    app.clock.advance(60);
    const replanned = await putState(user.token, t.id, { state: 'planned' });
    expect(replanned.status, replanned.text).toBe(200);
    const expected = taskDoc({ id: t.id, userId: user.id, label: 'f', order: 1, state: 'planned', plannedCount: 2, startedAt: T0S, plannedAt: T0S + 120, finishedAt: 0 });
    expect(replanned.body).toEqual(expected);
    expect(await getTask(user.token, t.id)).toEqual(expected);
  });

  it('cancel from started: newed, startedAt and plannedAt 0; a later start sets startedAt anew', async () => {
    const user = await app.register();
    const t = await createTask(user.token, { label: 'c' });
    app.clock.advance(60);
    const cancelled = await putState(user.token, t.id, { state: 'newed' });
    expect(cancelled.status, cancelled.text).toBe(200);
    expect(cancelled.body).toEqual(taskDoc({ id: t.id, userId: user.id, label: 'c', order: 1, state: 'newed' }));
    app.clock.advance(60);
    const restarted = await putState(user.token, t.id, { state: 'started' });
    expect(restarted.body).toEqual(taskDoc({ id: t.id, userId: user.id, label: 'c', order: 1, state: 'started', startedAt: T0S + 120 }));
  });

  it('cancel from planned: newed, startedAt and plannedAt 0, plannedCount kept', async () => {
    const user = await app.register();
    const t = await createTask(user.token, { label: 'c', planned_at: DUE });
    app.clock.advance(30);
    await changeState(user.token, t.id, 'planned');
    app.clock.advance(30);
    const cancelled = await putState(user.token, t.id, { state: 'newed' });
    expect(cancelled.status, cancelled.text).toBe(200);
    expect(cancelled.body).toEqual(taskDoc({ id: t.id, userId: user.id, label: 'c', order: 1, state: 'newed', plannedCount: 2 }));
    // Planning again counts on from there.
    app.clock.advance(30);
    const planned = await putState(user.token, t.id, { state: 'planned' });
    expect(planned.body.data.attributes).toMatchObject({ plannedCount: 3, startedAt: T0S + 90, plannedAt: T0S + 90 });
  });

  it('abandon from newed: abandonedAt = now', async () => {
    const user = await app.register();
    const project = await projectIn(user.token, 'newed');
    const t = await createTask(user.token, { label: 'a', project_id: project });
    app.clock.advance(60);
    const res = await putState(user.token, t.id, { state: 'abandoned' });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(
      taskDoc({ id: t.id, userId: user.id, label: 'a', order: 1, state: 'abandoned', abandonedAt: T0S + 60, projectId: project }),
    );
  });

  it('abandon from started: abandonedAt = now, startedAt kept', async () => {
    const user = await app.register();
    const t = await createTask(user.token, { label: 'a' });
    app.clock.advance(60);
    const res = await putState(user.token, t.id, { state: 'abandoned' });
    expect(res.body).toEqual(taskDoc({ id: t.id, userId: user.id, label: 'a', order: 1, state: 'abandoned', startedAt: T0S, abandonedAt: T0S + 60 }));
  });

  it('abandon from planned: abandonedAt = now, the plan kept', async () => {
    const user = await app.register();
    const t = await createTask(user.token, { label: 'a', planned_at: DUE });
    app.clock.advance(60);
    const res = await putState(user.token, t.id, { state: 'abandoned' });
    expect(res.body).toEqual(
      taskDoc({ id: t.id, userId: user.id, label: 'a', order: 1, state: 'abandoned', plannedCount: 1, startedAt: T0S, plannedAt: DUE, abandonedAt: T0S + 60 }),
    );
  });
});

describe('PUT /api/tasks/:id/state: refused moves', () => {
  const VALID = new Set([
    'newed>started', 'newed>planned', 'newed>abandoned',
    'started>planned', 'started>newed', 'started>abandoned',
    'planned>planned', 'planned>finished', 'planned>newed', 'planned>abandoned',
    'finished>planned',
  ]);
  const REQUESTED = [...STATES, 'paused', 'unknown', '', 'STARTED', ' started'];
  const INVALID: Array<[TaskState, string]> = [];
  for (const from of STATES) for (const to of REQUESTED) if (!VALID.has(`${from}>${to}`)) INVALID.push([from, to]);

  let user: User;
  let newedProject: number;
  beforeAll(async () => {
    user = await app.register();
    newedProject = await projectIn(user.token, 'newed');
  });

  it('covers the whole table', () => {
    expect(INVALID).toHaveLength(5 * REQUESTED.length - VALID.size);
  });

  it.each(INVALID)('%s -> %j is invalid_transition and changes nothing', async (from, to) => {
    const task = await taskIn(user, from, newedProject);
    expect(task.attributes.state).toBe(from);
    const before = await getTask(user.token, task.id);
    app.clock.advance(60);
    expectError(await putState(user.token, task.id, { state: to }), 422, 'invalid_transition', { pointer: '/task/state' });
    expect(await getTask(user.token, task.id)).toEqual(before);
  });

  it('requires the state: must_be_set on /task/state, before anything else', async () => {
    const task = await taskIn(user, 'started');
    expectError(await putState(user.token, task.id, {}), 422, 'must_be_set', { pointer: '/task/state' });
    expectError(await putState(user.token, task.id, { planned_at: DUE }), 422, 'must_be_set', { pointer: '/task/state' });
    expectError(await putState(user.token, task.id, { state: undefined, order: 3 }), 422, 'must_be_set', { pointer: '/task/state' });
  });

  it.each([[5], [null], [true], [['started']], [{ name: 'started' }]])('refuses a state %j that is not a string as invalid', async (state) => {
    const task = await taskIn(user, 'started');
    expectError(await putState(user.token, task.id, { state }), 422, 'invalid', { pointer: '/task/state' });
  });

  it('requires the task wrapper', async () => {
    const task = await taskIn(user, 'started');
    for (const body of [{}, { state: 'planned' }, { task: 'planned' }]) {
      const res = await app.request('PUT', `/api/tasks/${task.id}/state`, { token: user.token, body });
      expectError(res, 422, 'parameter_missing', { pointer: '/task' });
    }
    expect((await getTask(user.token, task.id)).data.attributes.state).toBe('started');
  });

  it.each([
    ['planned_at', DUE],
    ['label', 'renamed'],
    ['order', 1],
    ['startedAt', 0],
    ['finished_at', T0S],
  ])('refuses any other member (%s) as cannot_be_set on its own pointer, and changes nothing', async (member, value) => {
    const task = await taskIn(user, 'started');
    const before = await getTask(user.token, task.id);
    app.clock.advance(60);
    expectError(await putState(user.token, task.id, { state: 'planned', [member]: value }), 422, 'cannot_be_set', {
      pointer: `/task/${member}`,
    });
    expect(await getTask(user.token, task.id)).toEqual(before);
  });

  it('refuses a __proto__ member as cannot_be_set too', async () => {
    const task = await taskIn(user, 'started');
    const res = await app.request('PUT', `/api/tasks/${task.id}/state`, {
      token: user.token,
      rawBody: '{"task":{"state":"planned","__proto__":{"x":1}}}',
      headers: { 'Content-Type': 'application/json' },
    });
    expectError(res, 422, 'cannot_be_set', { pointer: '/task/__proto__' });
    expect((await getTask(user.token, task.id)).data.attributes.state).toBe('started');
  });

  it('checks invalid_transition before cannot_be_set', async () => {
    const finished = await taskIn(user, 'finished');
    expectError(await putState(user.token, finished.id, { state: 'started', planned_at: DUE }), 422, 'invalid_transition', {
      pointer: '/task/state',
    });
    const abandoned = await taskIn(user, 'abandoned');
    expectError(await putState(user.token, abandoned.id, { state: 'planned', planned_at: DUE }), 422, 'invalid_transition', {
      pointer: '/task/state',
    });
    expectError(await putState(user.token, abandoned.id, { state: 'nope', label: 'x' }), 422, 'invalid_transition', {
      pointer: '/task/state',
    });
  });
});

// =============================================================================================
describe('PATCH /api/tasks/:id', () => {
  it('changes the label and nothing else', async () => {
    const user = await app.register();
    const project = await projectIn(user.token, 'started');
    const t = await createTask(user.token, { label: 'old', project_id: project, planned_at: DUE });
    app.clock.advance(600);
    const res = await patchTask(user.token, t.id, { task: { label: 'new label ✓' } });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    const expected = taskDoc({
      id: t.id, userId: user.id, label: 'new label ✓', order: 1, state: 'planned', plannedCount: 1,
      startedAt: T0S, plannedAt: DUE, projectId: project,
    });
    expect(res.body).toEqual(expected);
    expect(await getTask(user.token, t.id)).toEqual(expected);
  });

  it('with an empty task changes nothing; unknown members are ignored', async () => {
    const user = await app.register();
    const t = await createTask(user.token, { label: 'same' });
    const before = await getTask(user.token, t.id);
    app.clock.advance(600);
    const empty = await patchTask(user.token, t.id, { task: {} });
    expect(empty.status, empty.text).toBe(200);
    expect(empty.body).toEqual(before);
    const extra = await patchTask(user.token, t.id, { task: { label: 'renamed', state: 'finished', order: 9, plannedCount: 4 }, x: 1 });
    expect(extra.status, extra.text).toBe(200);
    expect(extra.body).toEqual(taskDoc({ ...expectationOf(before.data), label: 'renamed' }));
  });

  it.each([
    ['', 'invalid'],
    ['a'.repeat(1001), 'too_long'],
    [null, 'invalid'],
    [7, 'invalid'],
  ])('refuses the label %j as %s and changes nothing', async (label, code) => {
    const user = await app.register();
    const t = await createTask(user.token, { label: 'keep' });
    expectError(await patchTask(user.token, t.id, { task: { label } }), 422, code, { pointer: '/task/label' });
    expect((await getTask(user.token, t.id)).data.attributes.label).toBe('keep');
  });

  it('accepts a 1000-character label', async () => {
    const user = await app.register();
    const t = await createTask(user.token, { label: 'short' });
    const res = await patchTask(user.token, t.id, { task: { label: '日'.repeat(1000) } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.attributes.label).toBe('日'.repeat(1000));
  });

  it('requires the task wrapper', async () => {
    const user = await app.register();
    const t = await createTask(user.token, { label: 'keep' });
    for (const body of [{}, { label: 'x' }, { task: 'x' }, { task: null }]) {
      expectError(await patchTask(user.token, t.id, body), 422, 'parameter_missing', { pointer: '/task' });
    }
  });

  it.each([['1'], [1.5], [true], [0], [-3]])('refuses project_id %j as invalid', async (projectId) => {
    const user = await app.register();
    const t = await createTask(user.token, { label: 'keep' });
    expectError(await patchTask(user.token, t.id, { task: { project_id: projectId } }), 422, 'invalid', { pointer: '/task/project_id' });
  });

  // API-CONTRACT.md §5: re-sync of the state when project_id changes.
  type ProjectChoice = 'none' | 'newed' | 'started' | 'paused';
  const RESYNC: Array<[TaskState, ProjectChoice, ProjectChoice, TaskState]> = [
    ['newed', 'newed', 'started', 'started'],
    ['newed', 'newed', 'none', 'started'],
    ['newed', 'newed', 'newed', 'newed'],
    ['newed', 'newed', 'paused', 'newed'],
    ['newed', 'paused', 'started', 'started'],
    ['started', 'none', 'newed', 'newed'],
    ['started', 'none', 'paused', 'newed'],
    ['started', 'started', 'newed', 'newed'],
    ['started', 'none', 'started', 'started'],
    ['started', 'started', 'none', 'started'],
    ['started', 'started', 'started', 'started'],
    ['planned', 'none', 'newed', 'planned'],
    ['planned', 'started', 'none', 'planned'],
    ['finished', 'none', 'newed', 'finished'],
    ['finished', 'newed', 'started', 'finished'],
    ['abandoned', 'none', 'newed', 'abandoned'],
    ['abandoned', 'none', 'started', 'abandoned'],
  ];

  it.each(RESYNC)('a %s task moved from project %s to %s becomes %s', async (state, fromProject, toProject, expected) => {
    const user = await app.register();
    const projectOf = async (choice: ProjectChoice) => (choice === 'none' ? null : projectIn(user.token, choice));
    const from = await projectOf(fromProject);
    const to = await projectOf(toProject);

    // Bring the task to `state` in project `from`, at T0.
    const task: Record<string, unknown> = { label: 'mover' };
    if (from !== null) task.project_id = from;
    if (state === 'planned' || state === 'finished') task.planned_at = DUE;
    let t = await createTask(user.token, task);
    if (state === 'finished' || state === 'abandoned') t = await changeState(user.token, t.id, state);
    if (state === 'newed' && t.attributes.state !== 'newed') t = await changeState(user.token, t.id, 'newed');
    if (state === 'started' && t.attributes.state !== 'started') t = await changeState(user.token, t.id, 'started');
    expect(t.attributes.state).toBe(state);
    expect(t.relationships.project.data).toEqual(from === null ? null : { type: 'project', id: from });

    app.clock.advance(300);
    const res = await patchTask(user.token, t.id, { task: { project_id: to } });
    expect(res.status, res.text).toBe(200);
    const before = expectationOf(t);
    let startedAt = before.startedAt;
    if (state === 'newed' && expected === 'started') startedAt = T0S + 300;
    if (state === 'started' && expected === 'newed') startedAt = 0;
    const doc = taskDoc({ ...before, state: expected, startedAt, projectId: to });
    expect(res.body).toEqual(doc);
    expect(await getTask(user.token, t.id)).toEqual(doc);
  });

  it('changes label and project together', async () => {
    const user = await app.register();
    const project = await projectIn(user.token, 'newed');
    const t = await createTask(user.token, { label: 'a' });
    const res = await patchTask(user.token, t.id, { task: { label: 'b', project_id: project } });
    expect(res.body).toEqual(taskDoc({ id: t.id, userId: user.id, label: 'b', order: 1, state: 'newed', projectId: project }));
  });

  it('detaches with project_id null', async () => {
    const user = await app.register();
    const project = await projectIn(user.token, 'started');
    const t = await createTask(user.token, { label: 'attached', project_id: project });
    const res = await patchTask(user.token, t.id, { task: { project_id: null } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(taskDoc({ id: t.id, userId: user.id, label: 'attached', order: 1, state: 'started', startedAt: T0S, projectId: null }));
    const project_ = await app.request('GET', `/api/projects/${project}`, { token: user.token });
    expect(project_.body.data.relationships.tasks.data).toEqual([]);
  });

  it('refuses a project of another user or an unknown one as record_not_found, and changes nothing', async () => {
    const owner = await app.register();
    const other = await app.register();
    const foreign = await projectIn(owner.token, 'started');
    const own = await projectIn(other.token, 'newed');
    const t = await createTask(other.token, { label: 'mine', project_id: own });
    const before = await getTask(other.token, t.id);
    app.clock.advance(60);
    for (const projectId of [foreign, 2_147_483_647]) {
      expectError(await patchTask(other.token, t.id, { task: { project_id: projectId, label: 'changed' } }), 422, 'record_not_found', {
        pointer: '/task/project_id',
      });
    }
    expect(await getTask(other.token, t.id)).toEqual(before);
  });
});

// =============================================================================================
describe('PUT /api/tasks/:id/order', () => {
  let user: User;
  let ids: number[];
  const t = (n: number) => ids[n - 1]!;
  beforeEach(async () => {
    user = await app.register();
    ids = await createTasks(user.token, 5);
  });

  it('moves a task up (4 -> 2): answers the moved and shifted tasks, by order', async () => {
    const res = await putOrder(user.token, t(4), 2);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    expect(res.body).toEqual(orderDoc([[t(4), 2], [t(2), 3], [t(3), 4]]));
    expect(await listedOrders(user.token)).toEqual([[t(1), 1], [t(4), 2], [t(2), 3], [t(3), 4], [t(5), 5]]);
  });

  it('moves a task down (2 -> 4)', async () => {
    const res = await putOrder(user.token, t(2), 4);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(orderDoc([[t(3), 2], [t(4), 3], [t(2), 4]]));
    expect(await listedOrders(user.token)).toEqual([[t(1), 1], [t(3), 2], [t(4), 3], [t(2), 4], [t(5), 5]]);
  });

  it('moves to the very top and to the very bottom', async () => {
    const up = await putOrder(user.token, t(5), 1);
    expect(up.body).toEqual(orderDoc([[t(5), 1], [t(1), 2], [t(2), 3], [t(3), 4], [t(4), 5]]));
    const down = await putOrder(user.token, t(5), 5);
    expect(down.body).toEqual(orderDoc([[t(1), 1], [t(2), 2], [t(3), 3], [t(4), 4], [t(5), 5]]));
  });

  it('clamps an order above the highest to the highest', async () => {
    const res = await putOrder(user.token, t(2), 999);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(orderDoc([[t(3), 2], [t(4), 3], [t(5), 4], [t(2), 5]]));
    const big = await putOrder(user.token, t(1), Number.MAX_SAFE_INTEGER);
    expect(big.body).toEqual(orderDoc([[t(3), 1], [t(4), 2], [t(5), 3], [t(2), 4], [t(1), 5]]));
    expect(await listedOrders(user.token)).toEqual([[t(3), 1], [t(4), 2], [t(5), 3], [t(2), 4], [t(1), 5]]);
  });

  it('returns just the task when it does not move (same order, or clamped to its own)', async () => {
    const same = await putOrder(user.token, t(3), 3);
    expect(same.status, same.text).toBe(200);
    expect(same.body).toEqual(orderDoc([[t(3), 3]]));
    const clamped = await putOrder(user.token, t(5), 6);
    expect(clamped.body).toEqual(orderDoc([[t(5), 5]]));
    expect(await listedOrders(user.token)).toEqual(ids.map((id, i) => [id, i + 1]));
  });

  it.each([[0], [-1], ['2'], [1.5], [null], [true], [[2]]])('refuses the order %j as invalid and changes nothing', async (order) => {
    expectError(await putOrder(user.token, t(4), order), 422, 'invalid', { pointer: '/task/order' });
    expect(await listedOrders(user.token)).toEqual(ids.map((id, i) => [id, i + 1]));
  });

  it('requires the order and the wrapper', async () => {
    const missing = await app.request('PUT', `/api/tasks/${t(2)}/order`, { token: user.token, body: { task: {} } });
    expectError(missing, 422, 'parameter_missing', { pointer: '/task/order' });
    const wrapper = await app.request('PUT', `/api/tasks/${t(2)}/order`, { token: user.token, body: { order: 1 } });
    expectError(wrapper, 422, 'parameter_missing', { pointer: '/task' });
  });

  it('ignores unknown members', async () => {
    const res = await app.request('PUT', `/api/tasks/${t(3)}/order`, { token: user.token, body: { task: { order: 1, label: 'x' } } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(orderDoc([[t(3), 1], [t(1), 2], [t(2), 3]]));
    expect((await getTask(user.token, t(3))).data.attributes.label).toBe('t3');
  });

  it('keeps orders a permutation of 1..n through a sequence of moves', async () => {
    await putOrder(user.token, t(1), 5); // 2 3 4 5 1
    await putOrder(user.token, t(4), 1); // 4 2 3 5 1
    await putOrder(user.token, t(2), 4); // 4 3 5 2 1
    await putOrder(user.token, t(1), 2); // 4 1 3 5 2
    expect(await listedOrders(user.token)).toEqual([[t(4), 1], [t(1), 2], [t(3), 3], [t(5), 4], [t(2), 5]]);
    // A new task still goes to the end.
    const next = await createTask(user.token, { label: 'sixth' });
    expect(next.attributes.order).toBe(6);
    // The single-task view agrees with the list.
    expect((await getTask(user.token, t(5))).data.attributes.order).toBe(4);
  });
});

// =============================================================================================
describe('GET /api/users/me/tasks', () => {
  const base = () => `${app.baseUrl}${LIST}?page=`;

  it('with no tasks: an empty page 1 with first and last', async () => {
    const user = await app.register();
    const res = await list(user.token);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    expect(res.body).toEqual({ data: [], links: { first: `${base()}1`, last: `${base()}1` }, meta: META });
  });

  it('with one task: the full task and one page', async () => {
    const user = await app.register();
    const project = await projectIn(user.token, 'newed');
    const t = await createTask(user.token, { label: 'only', project_id: project });
    const res = await list(user.token);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: [taskJson({ id: t.id, userId: user.id, label: 'only', order: 1, state: 'newed', projectId: project })],
      links: { first: `${base()}1`, last: `${base()}1` },
      meta: META,
    });
    expect(await list(user.token, 1).then((r) => r.body)).toEqual(res.body);
  });

  it('pages 50 at a time: 50, 51, a page beyond the last, and abandoned tasks not counted', async () => {
    const user = await app.register();
    const ids = await createTasks(user.token, 50);
    const fifty = await list(user.token);
    expect(fifty.body.data.map((t: any) => t.id)).toEqual(ids);
    expect(fifty.body.data.map((t: any) => t.attributes.order)).toEqual(range(50));
    expect(fifty.body.links).toEqual({ first: `${base()}1`, last: `${base()}1` });
    expect(fifty.body.meta).toEqual(META);

    ids.push((await createTask(user.token, { label: 't51' })).id);
    const first = await list(user.token, 1);
    expect(first.body.data).toHaveLength(50);
    expect(first.body.links).toEqual({ first: `${base()}1`, last: `${base()}2`, next: `${base()}2` });
    const second = await list(user.token, 2);
    expect(second.status).toBe(200);
    expect(second.body).toEqual({
      data: [taskJson({ id: ids[50]!, userId: user.id, label: 't51', order: 51, state: 'started', startedAt: T0S })],
      links: { first: `${base()}1`, last: `${base()}2`, prev: `${base()}1` },
      meta: META,
    });
    const beyond = await list(user.token, 3);
    expect(beyond.status).toBe(200);
    expect(beyond.body).toEqual({ data: [], links: { first: `${base()}1`, last: `${base()}2`, prev: `${base()}2` }, meta: META });

    // Abandoning one brings it back to 50 listed tasks on one page.
    await changeState(user.token, ids[9]!, 'abandoned');
    const after = await list(user.token);
    expect(after.body.data.map((t: any) => t.id)).toEqual([...ids.slice(0, 9), ...ids.slice(10)]);
    expect(after.body.links).toEqual({ first: `${base()}1`, last: `${base()}1` });
    const emptySecond = await list(user.token, 2);
    expect(emptySecond.body).toEqual({ data: [], links: { first: `${base()}1`, last: `${base()}1`, prev: `${base()}1` }, meta: META });
  });

  it('lists the middle page with prev and next', async () => {
    const user = await app.register();
    const created = await Promise.all(range(101).map((i) => createTask(user.token, { label: `m${i}` })));
    expect(created.map((t) => t.attributes.order).sort((a, b) => a - b)).toEqual(range(101));
    const middle = await list(user.token, 2);
    expect(middle.body.data.map((t: any) => t.attributes.order)).toEqual(range(50).map((i) => i + 50));
    expect(middle.body.links).toEqual({ first: `${base()}1`, last: `${base()}3`, prev: `${base()}1`, next: `${base()}3` });
    const last = await list(user.token, 3);
    expect(last.body.data.map((t: any) => t.attributes.order)).toEqual([101]);
  });

  it('sorts by order, not by id, and never lists abandoned tasks', async () => {
    const user = await app.register();
    const [a, b, c, d] = await createTasks(user.token, 4);
    await putOrder(user.token, d!, 1); // d a b c
    await putOrder(user.token, b!, 4); // d a c b
    await changeState(user.token, a!, 'abandoned');
    const res = await list(user.token);
    expect(res.body.data.map((t: any) => [t.id, t.attributes.order, t.attributes.state])).toEqual([
      [d, 1, 'started'],
      [c, 3, 'started'],
      [b, 4, 'started'],
    ]);
  });

  it('lists finished tasks until the end of the UTC day 14 days after the day they finished', async () => {
    // 2026-06-15T00:00:00Z and the second before it.
    const midnight = T0 - 12 * HOUR * 1000;
    app.clock.set(midnight - 1000);
    const user = await app.register();
    const early = await createTask(user.token, { label: 'early', planned_at: DUE });
    const onTime = await createTask(user.token, { label: 'on time', planned_at: DUE });
    const open = await createTask(user.token, { label: 'open' });
    const earlyDone = await changeState(user.token, early.id, 'finished');
    expect(earlyDone.attributes.finishedAt).toBe(seconds(midnight) - 1);
    app.clock.set(midnight);
    const onTimeDone = await changeState(user.token, onTime.id, 'finished');
    expect(onTimeDone.attributes.finishedAt).toBe(seconds(midnight));

    const at = async (ms: number) => {
      app.clock.set(ms);
      return listedIds(user.token);
    };
    const days = (n: number) => n * DAY * 1000;
    expect(await at(midnight + days(7))).toEqual([early.id, onTime.id, open.id]);
    // 2026-06-28T23:59:59Z: the start of the day 14 days ago is 2026-06-14T00:00:00Z.
    expect(await at(midnight + days(14) - 1000)).toEqual([early.id, onTime.id, open.id]);
    // 2026-06-29T00:00:00Z: the cut-off is 2026-06-15T00:00:00Z; 'early' finished one second before it.
    expect(await at(midnight + days(14))).toEqual([onTime.id, open.id]);
    // 2026-06-29T23:59:59Z: 'on time' still listed (finishedAt == cut-off).
    expect(await at(midnight + days(15) - 1000)).toEqual([onTime.id, open.id]);
    // 2026-06-30T00:00:00Z: gone.
    const gone = await list(user.token);
    app.clock.set(midnight + days(15));
    const res = await list(user.token);
    expect(gone.body.data.map((t: any) => t.id)).toEqual([onTime.id, open.id]);
    expect(res.body).toEqual({
      data: [taskJson({ id: open.id, userId: user.id, label: 'open', order: 3, state: 'started', startedAt: seconds(midnight) - 1 })],
      links: { first: `${base()}1`, last: `${base()}1` },
      meta: META,
    });
    // Still readable on its own, and listed again once replanned.
    expect((await getTask(user.token, early.id)).data.attributes.state).toBe('finished');
    await changeState(user.token, early.id, 'planned');
    expect(await listedIds(user.token)).toEqual([early.id, open.id]);
  });

  it('counts only listed tasks in the page links', async () => {
    const user = await app.register();
    const ids = await createTasks(user.token, 51);
    const last = ids[50]!;
    await changeState(user.token, last, 'planned');
    await changeState(user.token, last, 'finished');
    expect((await list(user.token)).body.links.last).toBe(`${base()}2`);
    app.clock.advance(20 * DAY);
    const res = await list(user.token);
    expect(res.body.data).toHaveLength(50);
    expect(res.body.links).toEqual({ first: `${base()}1`, last: `${base()}1` });
  });

  it.each(['abc', '0', '-1', '1.5', '2x'])('refuses page=%s with 400 invalid on the parameter page', async (page) => {
    const user = await app.register();
    await createTasks(user.token, 1);
    expectError(await app.request('GET', `${LIST}?page=${page}`, { token: user.token }), 400, 'invalid', { parameter: 'page' });
  });
});

// =============================================================================================
describe('ownership', () => {
  it("answers 404 record_not_found to another user's task on every endpoint, and changes nothing", async () => {
    const a = await app.register();
    const b = await app.register();
    const aProject = await projectIn(a.token, 'newed');
    const [a1, a2] = await createTasks(a.token, 2, 'a');
    const aTask = await createTask(a.token, { label: 'private', project_id: aProject });
    const bIds = await createTasks(b.token, 3, 'b');
    const bProject = await projectIn(b.token, 'started');
    const before = await getTask(a.token, aTask.id);
    const aOrders = await listedOrders(a.token);
    const bOrders = await listedOrders(b.token);

    app.clock.advance(60);
    notFound(await app.request('GET', `/api/tasks/${aTask.id}`, { token: b.token }));
    notFound(await patchTask(b.token, aTask.id, { task: { label: 'hacked' } }));
    notFound(await patchTask(b.token, aTask.id, { task: { project_id: bProject } }));
    notFound(await patchTask(b.token, aTask.id, { task: { project_id: null } }));
    for (const state of ['started', 'planned', 'abandoned', 'finished']) notFound(await putState(b.token, aTask.id, { state }));
    notFound(await putOrder(b.token, aTask.id, 1));
    notFound(await putOrder(b.token, a1!, 3));

    expect(await getTask(a.token, aTask.id)).toEqual(before);
    expect(await listedOrders(a.token)).toEqual(aOrders);
    expect(await listedOrders(b.token)).toEqual(bOrders);
    expect(aOrders).toEqual([[a1, 1], [a2, 2], [aTask.id, 3]]);
    expect(bOrders).toEqual(bIds.map((id, i) => [id, i + 1]));
    const listed = await list(b.token);
    expect(listed.body.data.every((t: any) => t.relationships.user.data.id === b.id)).toBe(true);
  });

  it.each(['abc', '0', '-5', '2.5', '99999999999', '2147483647', '%20'])('answers 404 record_not_found to the id %s', async (id) => {
    const user = await app.register();
    await createTasks(user.token, 2);
    notFound(await app.request('GET', `/api/tasks/${id}`, { token: user.token }));
    notFound(await patchTask(user.token, id, { task: { label: 'x' } }));
    notFound(await putState(user.token, id, { state: 'planned' }));
    notFound(await putOrder(user.token, id, 1));
  });

  it.each([
    ['POST', LIST, { task: { label: 'x' } }],
    ['GET', LIST, undefined],
    ['GET', '/api/tasks/1', undefined],
    ['PATCH', '/api/tasks/1', { task: { label: 'x' } }],
    ['PUT', '/api/tasks/1/state', { task: { state: 'planned' } }],
    ['PUT', '/api/tasks/1/order', { task: { order: 1 } }],
  ])('answers 401 to %s %s without a token', async (method, path, body) => {
    const res = await app.request(method, path, { body });
    expectError(res, 401, 'unauthorized');
  });
});

// =============================================================================================
describe('concurrency', () => {
  async function parallelCreate(doors: TestApp[], token: string, n: number): Promise<ApiResponse[]> {
    return Promise.all(
      range(n).map((i) => doors[i % doors.length]!.request('POST', LIST, { token, body: { task: { label: `c${i}` } } })),
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

  it('parallel creations of two users keep each user\'s orders 1..n', async () => {
    const a = await app.register();
    const b = await app.register();
    const [ra, rb] = await Promise.all([parallelCreate([app], a.token, 15), parallelCreate([app], b.token, 15)]);
    expect(ra!.map((r) => r.body.data.attributes.order).sort((x, y) => x - y)).toEqual(range(15));
    expect(rb!.map((r) => r.body.data.attributes.order).sort((x, y) => x - y)).toEqual(range(15));
  });

  describe('two app instances on one database', () => {
    let second: TestApp;
    beforeAll(async () => {
      second = await startTestApp({ databaseUrl: app.databaseUrl, clock: app.clock });
    });
    afterAll(async () => {
      await second?.close();
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
      const viaSecond = await second.request('GET', LIST, { token: user.token });
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

// =============================================================================================
describe('the tRPC door', () => {
  it('creates, reads, lists, updates, moves and changes state with the same data as REST', async () => {
    const user = await app.register();
    const api = app.trpc(user.token);
    const first = await api.tasks.create.mutate({ task: { label: 'via trpc' } });
    expect(first).toEqual(taskDoc({ id: first.data.id, userId: user.id, label: 'via trpc', order: 1, state: 'started', startedAt: T0S }));
    expect(await getTask(user.token, first.data.id)).toEqual(first);
    expect(await api.tasks.get.query({ id: first.data.id })).toEqual(first);

    const project = await projectIn(user.token, 'newed');
    const second = await api.tasks.create.mutate({ task: { label: 'planned', planned_at: DUE, project_id: project } });
    expect(second).toEqual(
      taskDoc({ id: second.data.id, userId: user.id, label: 'planned', order: 2, state: 'planned', plannedCount: 1, plannedAt: DUE, startedAt: T0S, projectId: project }),
    );
    const rest = await createTask(user.token, { label: 'rest' });
    expect(rest.attributes.order).toBe(3);

    expect(await api.tasks.list.query({})).toEqual((await list(user.token)).body);
    expect(await api.tasks.list.query({ page: 2 })).toEqual((await list(user.token, 2)).body);

    const moved = await api.tasks.reorder.mutate({ id: rest.id, task: { order: 1 } });
    expect(moved).toEqual(orderDoc([[rest.id, 1], [first.data.id, 2], [second.data.id, 3]]));
    expect(await listedOrders(user.token)).toEqual([[rest.id, 1], [first.data.id, 2], [second.data.id, 3]]);

    app.clock.advance(60);
    const planned = await api.tasks.changeState.mutate({ id: first.data.id, task: { state: 'planned' } });
    expect(planned).toEqual(
      taskDoc({ id: first.data.id, userId: user.id, label: 'via trpc', order: 2, state: 'planned', plannedCount: 1, startedAt: T0S, plannedAt: T0S + 60 }),
    );
    expect(await getTask(user.token, first.data.id)).toEqual(planned);

    const updated = await api.tasks.update.mutate({ id: first.data.id, task: { label: 'renamed', project_id: project } });
    expect(updated).toEqual(taskDoc({ ...expectationOf(planned.data), label: 'renamed', projectId: project }));
    expect(await getTask(user.token, first.data.id)).toEqual(updated);
  });

  it('reports the same error codes as REST in data.code', async () => {
    const user = await app.register();
    const other = await app.register();
    const api = app.trpc(user.token);
    const t = await api.tasks.create.mutate({ task: { label: 'x' } });
    const foreignProject = await projectIn(other.token, 'newed');

    await expect(api.tasks.create.mutate({ task: { label: '' } })).rejects.toMatchObject({
      data: { code: 'invalid', httpStatus: 422, errors: [expect.objectContaining({ code: 'invalid', source: { pointer: '/task/label' } })] },
    });
    await expect(api.tasks.create.mutate({ task: { label: 'a'.repeat(1001) } })).rejects.toMatchObject({
      data: { code: 'too_long', httpStatus: 422 },
    });
    await expect(api.tasks.create.mutate({ task: {} } as any)).rejects.toMatchObject({
      data: { code: 'parameter_missing', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/task/label' } })] },
    });
    await expect(api.tasks.create.mutate({ task: { label: 'x', project_id: foreignProject } })).rejects.toMatchObject({
      data: { code: 'record_not_found', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/task/project_id' } })] },
    });
    await expect(api.tasks.create.mutate({ task: { label: 'x', planned_at: -1 } })).rejects.toMatchObject({
      data: { code: 'invalid', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/task/planned_at' } })] },
    });
    await expect(api.tasks.changeState.mutate({ id: t.data.id, task: { state: 'finished' } })).rejects.toMatchObject({
      data: { code: 'invalid_transition', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/task/state' } })] },
    });
    await expect(api.tasks.changeState.mutate({ id: t.data.id, task: {} } as any)).rejects.toMatchObject({
      data: { code: 'must_be_set', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/task/state' } })] },
    });
    await expect(api.tasks.changeState.mutate({ id: t.data.id, task: { state: 'planned', planned_at: DUE } })).rejects.toMatchObject({
      data: { code: 'cannot_be_set', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/task/planned_at' } })] },
    });
    await expect(api.tasks.reorder.mutate({ id: t.data.id, task: { order: 0 } })).rejects.toMatchObject({
      data: { code: 'invalid', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/task/order' } })] },
    });
    await expect(api.tasks.update.mutate({ id: t.data.id, task: { project_id: foreignProject } })).rejects.toMatchObject({
      data: { code: 'record_not_found', httpStatus: 422 },
    });
    await expect(api.tasks.list.query({ page: 0 })).rejects.toMatchObject({
      data: { code: 'invalid', httpStatus: 400, errors: [expect.objectContaining({ source: { parameter: 'page' } })] },
    });

    const intruder = app.trpc(other.token);
    for (const call of [
      () => intruder.tasks.get.query({ id: t.data.id }),
      () => intruder.tasks.update.mutate({ id: t.data.id, task: { label: 'hacked' } }),
      () => intruder.tasks.changeState.mutate({ id: t.data.id, task: { state: 'abandoned' } }),
      () => intruder.tasks.reorder.mutate({ id: t.data.id, task: { order: 1 } }),
      () => api.tasks.get.query({ id: 0 }),
    ]) {
      await expect(call()).rejects.toMatchObject({
        data: { code: 'record_not_found', httpStatus: 404, errors: [expect.objectContaining({ source: { pointer: '/task' } })] },
      });
    }
    await expect(app.trpc().tasks.list.query({})).rejects.toMatchObject({ data: { code: 'unauthorized', httpStatus: 401 } });
    // Nothing changed for the owner.
    expect(await getTask(user.token, t.data.id)).toEqual(t);
  });
});
