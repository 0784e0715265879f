/**
 * The task state machine (SPEC.md 3.2; API-CONTRACT.md §2, §5), in the fast tier: the task
 * procedures called directly (createCaller), on the real database, without HTTP. Every action
 * and what it does to the dates and the plan count, every refused move of the transition
 * table, and the checks of the state input. What HTTP adds to PUT /api/tasks/:id/state is in
 * test/http/tasks-state.test.ts.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { TASK_STATES, taskDoc, type TaskState } from '../helpers/envelope.js';
import { expectProcedureError, useProcedures } from '../helpers/procedures.js';
import { DUE, NEXT_MIDNIGHT, T0S } from '../helpers/times.js';

const procedures = useProcedures({ resetClock: true });
const { clock } = procedures;
type User = Awaited<ReturnType<typeof procedures.register>>;

let projects = 0;
/** A new project of the user, newed. */
async function newedProject(user: User): Promise<number> {
  return (await user.api.projects.create({ project: { name: `proj_${++projects}` } })).data.id;
}

async function createTask(user: User, task: { label: string; planned_at?: number; project_id?: number }): Promise<any> {
  return (await user.api.tasks.create({ task })).data;
}

/** The task's state changed as a client asks for it; the input is sent as it is, checked or not. */
const changeState = (user: User, id: number, task: Record<string, unknown>) => user.api.tasks.changeState({ id, task } as never);
const getTask = (user: User, id: number) => user.api.tasks.get({ id });

/** A task of the user brought to the given state at the current clock time. */
async function taskIn(user: User, state: TaskState, project?: number): Promise<any> {
  switch (state) {
    case 'newed':
      return createTask(user, { label: 'in newed', project_id: project ?? (await newedProject(user)) });
    case 'started':
      return createTask(user, { label: 'in started' });
    case 'planned':
      return createTask(user, { label: 'in planned', planned_at: NEXT_MIDNIGHT });
    case 'finished': {
      const t = await createTask(user, { label: 'in finished', planned_at: NEXT_MIDNIGHT });
      return (await changeState(user, t.id, { state: 'finished' })).data;
    }
    case 'abandoned': {
      const t = await createTask(user, { label: 'in abandoned' });
      return (await changeState(user, t.id, { state: 'abandoned' })).data;
    }
  }
}

// =============================================================================================
describe('the actions of SPEC.md 3.2', () => {
  it('start: newed -> started, startedAt = now', async () => {
    const user = await procedures.register();
    const project = await newedProject(user);
    const t = await createTask(user, { label: 'go', project_id: project });
    clock.advance(60);
    const expected = taskDoc({ id: t.id, userId: user.id, label: 'go', order: 1, state: 'started', startedAt: T0S + 60, projectId: project });
    expect(await changeState(user, t.id, { state: 'started' })).toEqual(expected);
    expect(await getTask(user, t.id)).toEqual(expected);
  });

  it('plan from newed: startedAt = plannedAt = now, plannedCount 1', async () => {
    const user = await procedures.register();
    const project = await newedProject(user);
    const t = await createTask(user, { label: 'p', project_id: project });
    clock.advance(60);
    expect(await changeState(user, t.id, { state: 'planned' })).toEqual(
      taskDoc({ id: t.id, userId: user.id, label: 'p', order: 1, state: 'planned', plannedCount: 1, startedAt: T0S + 60, plannedAt: T0S + 60, projectId: project }),
    );
  });

  it('plan from started: startedAt kept, plannedAt = now, plannedCount 1', async () => {
    const user = await procedures.register();
    const t = await createTask(user, { label: 'p' });
    clock.advance(60);
    expect(await changeState(user, t.id, { state: 'planned' })).toEqual(
      taskDoc({ id: t.id, userId: user.id, label: 'p', order: 1, state: 'planned', plannedCount: 1, startedAt: T0S, plannedAt: T0S + 60 }),
    );
  });

  it('replan from planned: plannedAt = now, plannedCount + 1', async () => {
    const user = await procedures.register();
    const t = await createTask(user, { label: 'r', planned_at: DUE });
    clock.advance(60);
    expect(await changeState(user, t.id, { state: 'planned' })).toEqual(
      taskDoc({ id: t.id, userId: user.id, label: 'r', order: 1, state: 'planned', plannedCount: 2, startedAt: T0S, plannedAt: T0S + 60 }),
    );
    clock.advance(60);
    const twice = await changeState(user, t.id, { state: 'planned' });
    expect(twice.data.attributes).toMatchObject({ plannedCount: 3, plannedAt: T0S + 120, startedAt: T0S, finishedAt: 0 });
  });

  it('finish: finishedAt = now; replan from finished: plannedAt = now, plannedCount + 1, finishedAt back to 0', async () => {
    const user = await procedures.register();
    const t = await createTask(user, { label: 'f', planned_at: DUE });
    clock.advance(60);
    expect(await changeState(user, t.id, { state: 'finished' })).toEqual(
      taskDoc({ id: t.id, userId: user.id, label: 'f', order: 1, state: 'finished', plannedCount: 1, startedAt: T0S, plannedAt: DUE, finishedAt: T0S + 60 }),
    );
    clock.advance(60);
    const expected = taskDoc({ id: t.id, userId: user.id, label: 'f', order: 1, state: 'planned', plannedCount: 2, startedAt: T0S, plannedAt: T0S + 120, finishedAt: 0 });
    expect(await changeState(user, t.id, { state: 'planned' })).toEqual(expected);
    expect(await getTask(user, t.id)).toEqual(expected);
  });

  it('cancel from started: newed, startedAt and plannedAt 0; a later start sets startedAt anew', async () => {
    const user = await procedures.register();
    const t = await createTask(user, { label: 'c' });
    clock.advance(60);
    expect(await changeState(user, t.id, { state: 'newed' })).toEqual(taskDoc({ id: t.id, userId: user.id, label: 'c', order: 1, state: 'newed' }));
    clock.advance(60);
    expect(await changeState(user, t.id, { state: 'started' })).toEqual(
      taskDoc({ id: t.id, userId: user.id, label: 'c', order: 1, state: 'started', startedAt: T0S + 120 }),
    );
  });

  it('cancel from planned: newed, startedAt and plannedAt 0, plannedCount kept', async () => {
    const user = await procedures.register();
    const t = await createTask(user, { label: 'c', planned_at: DUE });
    clock.advance(30);
    await changeState(user, t.id, { state: 'planned' });
    clock.advance(30);
    expect(await changeState(user, t.id, { state: 'newed' })).toEqual(
      taskDoc({ id: t.id, userId: user.id, label: 'c', order: 1, state: 'newed', plannedCount: 2 }),
    );
    // Planning again counts on from there.
    clock.advance(30);
    const planned = await changeState(user, t.id, { state: 'planned' });
    expect(planned.data.attributes).toMatchObject({ plannedCount: 3, startedAt: T0S + 90, plannedAt: T0S + 90 });
  });

  it('abandon from newed: abandonedAt = now', async () => {
    const user = await procedures.register();
    const project = await newedProject(user);
    const t = await createTask(user, { label: 'a', project_id: project });
    clock.advance(60);
    expect(await changeState(user, t.id, { state: 'abandoned' })).toEqual(
      taskDoc({ id: t.id, userId: user.id, label: 'a', order: 1, state: 'abandoned', abandonedAt: T0S + 60, projectId: project }),
    );
  });

  it('abandon from started: abandonedAt = now, startedAt kept', async () => {
    const user = await procedures.register();
    const t = await createTask(user, { label: 'a' });
    clock.advance(60);
    expect(await changeState(user, t.id, { state: 'abandoned' })).toEqual(
      taskDoc({ id: t.id, userId: user.id, label: 'a', order: 1, state: 'abandoned', startedAt: T0S, abandonedAt: T0S + 60 }),
    );
  });

  it('abandon from planned: abandonedAt = now, the plan kept', async () => {
    const user = await procedures.register();
    const t = await createTask(user, { label: 'a', planned_at: DUE });
    clock.advance(60);
    expect(await changeState(user, t.id, { state: 'abandoned' })).toEqual(
      taskDoc({ id: t.id, userId: user.id, label: 'a', order: 1, state: 'abandoned', plannedCount: 1, startedAt: T0S, plannedAt: DUE, abandonedAt: T0S + 60 }),
    );
  });
});

// =============================================================================================
describe('refused moves and state inputs', () => {
  const VALID = new Set([
    'newed>started', 'newed>planned', 'newed>abandoned',
    'started>planned', 'started>newed', 'started>abandoned',
    'planned>planned', 'planned>finished', 'planned>newed', 'planned>abandoned',
    'finished>planned',
  ]);
  const REQUESTED = [...TASK_STATES, 'paused', 'unknown', '', 'STARTED', ' started'];
  const INVALID: Array<[TaskState, string]> = [];
  for (const from of TASK_STATES) for (const to of REQUESTED) if (!VALID.has(`${from}>${to}`)) INVALID.push([from, to]);

  let user: User;
  let project: number;
  beforeAll(async () => {
    user = await procedures.register();
    project = await newedProject(user);
  });

  it('covers the whole table', () => {
    expect(INVALID).toHaveLength(5 * REQUESTED.length - VALID.size);
  });

  it.each(INVALID)('%s -> %j is invalid_transition and changes nothing', async (from, to) => {
    const task = await taskIn(user, from, project);
    expect(task.attributes.state).toBe(from);
    const before = await getTask(user, task.id);
    clock.advance(60);
    await expectProcedureError(changeState(user, task.id, { state: to }), 422, 'invalid_transition', { pointer: '/task/state' });
    expect(await getTask(user, task.id)).toEqual(before);
  });

  it('requires the state: must_be_set on /task/state, before anything else', async () => {
    const task = await taskIn(user, 'started');
    await expectProcedureError(changeState(user, task.id, {}), 422, 'must_be_set', { pointer: '/task/state' });
    await expectProcedureError(changeState(user, task.id, { planned_at: DUE }), 422, 'must_be_set', { pointer: '/task/state' });
    await expectProcedureError(changeState(user, task.id, { state: undefined, order: 3 }), 422, 'must_be_set', { pointer: '/task/state' });
  });

  it.each([[5], [null], [true], [['started']], [{ name: 'started' }]])('refuses a state %j that is not a string as invalid', async (state) => {
    const task = await taskIn(user, 'started');
    await expectProcedureError(changeState(user, task.id, { state }), 422, 'invalid', { pointer: '/task/state' });
  });

  it.each([
    ['planned_at', DUE],
    ['label', 'renamed'],
    ['order', 1],
    ['startedAt', 0],
    ['finished_at', T0S],
  ])('refuses any other member (%s) as cannot_be_set on its own pointer, and changes nothing', async (member, value) => {
    const task = await taskIn(user, 'started');
    const before = await getTask(user, task.id);
    clock.advance(60);
    await expectProcedureError(changeState(user, task.id, { state: 'planned', [member]: value }), 422, 'cannot_be_set', {
      pointer: `/task/${member}`,
    });
    expect(await getTask(user, task.id)).toEqual(before);
  });

  it('checks invalid_transition before cannot_be_set', async () => {
    const finished = await taskIn(user, 'finished');
    await expectProcedureError(changeState(user, finished.id, { state: 'started', planned_at: DUE }), 422, 'invalid_transition', {
      pointer: '/task/state',
    });
    const abandoned = await taskIn(user, 'abandoned');
    await expectProcedureError(changeState(user, abandoned.id, { state: 'planned', planned_at: DUE }), 422, 'invalid_transition', {
      pointer: '/task/state',
    });
    await expectProcedureError(changeState(user, abandoned.id, { state: 'nope', label: 'x' }), 422, 'invalid_transition', {
      pointer: '/task/state',
    });
  });
});
