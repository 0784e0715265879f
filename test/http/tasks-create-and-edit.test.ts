/**
 * Creating, reading and editing tasks (SPEC.md 2.2, 4.5, 4.7; API-CONTRACT.md §2, §5, §8): full
 * success bodies, the initial-state rules of creation, labels (verbatim, length in code points),
 * planned_at and project_id checks, every validation error of a request at once, the order a
 * new task gets, and the re-sync of the state when an edit moves a task between projects.
 */
import { describe, expect, it } from 'vitest';
import { apiSteps, TASKS } from '../helpers/api-steps.js';
import { expectError, expectErrors, JSON_CT, META, taskDoc, taskExpectationOf, type TaskState } from '../helpers/envelope.js';
import { useTestApp } from '../helpers/test-app.js';
import { DAY, DUE, T0S } from '../helpers/times.js';

const app = useTestApp({ resetClock: true });
const { createTaskRes: createRes, createTask, createTasks, getTask, patchTask, changeTaskState: changeState, listedTaskIds: listedIds, projectIn } = apiSteps(app);

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
    const res = await app.request('POST', TASKS, {
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

  it('reports a project that is not the user\'s beside the schema\'s errors, on create and update, on both doors', async () => {
    const owner = await app.register();
    const user = await app.register();
    const foreign = (await app.request('POST', '/api/users/me/projects', { token: owner.token, body: { project: { name: 'theirs' } } })).body.data.id as number;
    const own = (await app.request('POST', '/api/users/me/projects', { token: user.token, body: { project: { name: 'mine' } } })).body.data.id as number;
    const task = (await createRes(user.token, { task: { label: 'kept' } })).body.data.id as number;
    const before = await app.request('GET', '/api/users/me/tasks', { token: user.token });
    for (const projectId of [foreign, 2_147_483_647]) {
      expectErrors(await createRes(user.token, { task: { label: 'x'.repeat(1_001), project_id: projectId } }), [
        ['too_long', '/task/label'],
        ['record_not_found', '/task/project_id'],
      ]);
      expectErrors(await patchTask(user.token, task, { task: { label: '', project_id: projectId } }), [
        ['invalid', '/task/label'],
        ['record_not_found', '/task/project_id'],
      ]);
      await expect(app.trpc(user.token).tasks.create.mutate({ task: { label: '', project_id: projectId } })).rejects.toMatchObject({
        data: { code: 'invalid', httpStatus: 422, errors: [{ code: 'invalid', source: { pointer: '/task/label' } }, { code: 'record_not_found', status: '422', source: { pointer: '/task/project_id' } }] },
      });
    }
    // The user's own project is no error: the schema's stand alone.
    expectErrors(await createRes(user.token, { task: { label: '', project_id: own } }), [['invalid', '/task/label']]);
    // A path id that is no id is a 404 alone, on both doors: no 422 of the project beside it.
    const malformed = await app.request('PATCH', '/api/tasks/9007199254740992', { token: user.token, body: { task: { project_id: foreign } } });
    expect([malformed.status, malformed.body.errors.map((e: { status: string; code: string }) => [e.status, e.code])]).toEqual([404, [['404', 'record_not_found']]]);
    for (const id of [0, 9_007_199_254_740_992]) {
      await expect(app.trpc(user.token).tasks.update.mutate({ id, task: { project_id: foreign } })).rejects.toMatchObject({
        data: { code: 'record_not_found', httpStatus: 404, errors: [{ status: '404', code: 'record_not_found', source: { pointer: '/task' } }] },
      });
    }
    expect((await app.request('GET', '/api/users/me/tasks', { token: user.token })).body).toEqual(before.body);
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
    expect(extra.body).toEqual(taskDoc({ ...taskExpectationOf(before.data), label: 'renamed' }));
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
    const before = taskExpectationOf(t);
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
