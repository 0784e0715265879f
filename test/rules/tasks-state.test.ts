/**
 * The task state machine (SPEC.md 3.2, API-CONTRACT.md §2 and §5) at entity level: no HTTP,
 * no database. Tasks are built by hand, moved with a fixed `now`, and every field they own is
 * compared before and after. The same rules through the procedures, on the database, are in
 * test/procedures/tasks-state.test.ts; what HTTP adds, in test/http/tasks-state.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { DomainError, fromZodError } from '../../src/core/errors.js';
import { Task } from '../../src/tasks/task.entity.js';
import { PROJECT_TRANSITIONS } from '../../src/projects/project.lifecycle.js';
import { CLOSED_TASK_STATES, PROJECT_SYNC_RULES, TASK_STATES, newTaskFields, taskAction, type TaskState } from '../../src/tasks/task.lifecycle.js';
import { ChangeTaskStateInput } from '../../src/tasks/task.schema.js';
import { DAY, HOUR, T0S } from '../helpers/times.js';

/** 2026-06-15T12:00:00Z. */
const NOW_S = T0S;
const now = new Date(NOW_S * 1000);
const at = (s: number) => new Date(s * 1000);
const ms = (d: Date | null | undefined) => (d ? d.getTime() : null);

type TaskFixture = Partial<Pick<Task, 'startedAt' | 'plannedAt' | 'finishedAt' | 'abandonedAt' | 'plannedCount' | 'projectId'>>;

const T_STARTED_S = NOW_S - 5 * DAY;
const T_PLANNED_S = NOW_S - 2 * DAY;
const T_FINISHED_S = NOW_S - DAY;
const T_ABANDONED_S = NOW_S - HOUR;

/** A task in `state` with the dates such a task would have (plannedCount 2 once planned). */
function makeTask(state: TaskState, overrides: TaskFixture = {}): Task {
  const t = new Task();
  const planned = state === 'planned' || state === 'finished';
  Object.assign(t, {
    id: 7,
    userId: 1,
    projectId: 3,
    label: 'a task',
    order: 4,
    plannedCount: planned ? 2 : 0,
    state,
    startedAt: state === 'newed' ? null : at(T_STARTED_S),
    plannedAt: planned ? at(T_PLANNED_S) : null,
    finishedAt: state === 'finished' ? at(T_FINISHED_S) : null,
    abandonedAt: state === 'abandoned' ? at(T_ABANDONED_S) : null,
    createdAt: at(T_STARTED_S - DAY),
    ...overrides,
  });
  return t;
}

function taskSnapshot(t: Task) {
  return {
    id: t.id,
    userId: t.userId,
    projectId: t.projectId,
    label: t.label,
    order: t.order,
    plannedCount: t.plannedCount,
    state: t.state,
    startedAt: ms(t.startedAt),
    plannedAt: ms(t.plannedAt),
    finishedAt: ms(t.finishedAt),
    abandonedAt: ms(t.abandonedAt),
    createdAt: ms(t.createdAt),
  };
}

function expectTaskRefusal(t: Task, request: { state: string; [k: string]: unknown }, code: string, pointer: string) {
  const before = taskSnapshot(t);
  let error: unknown;
  try {
    t.changeState(request, now);
  } catch (e) {
    error = e;
  }
  expect(error, `expected ${code} for ${JSON.stringify(request)} from ${before.state}`).toBeInstanceOf(DomainError);
  const domain = error as DomainError;
  expect(domain.status).toBe(422);
  expect(domain.errors).toEqual([{ status: '422', code, title: expect.any(String), detail: expect.any(String), source: { pointer } }]);
  expect(taskSnapshot(t)).toEqual(before);
}

describe('task state machine: every (from, requested) pair', () => {
  const N = now.getTime();
  type Snap = ReturnType<typeof taskSnapshot>;
  const ALLOWED: Record<string, { action: string; after: (b: Snap) => Snap }> = {
    'newed>started': { action: 'start', after: (b) => ({ ...b, state: 'started', startedAt: N }) },
    'newed>planned': { action: 'plan', after: (b) => ({ ...b, state: 'planned', startedAt: N, plannedAt: N, plannedCount: b.plannedCount + 1 }) },
    'newed>abandoned': { action: 'abandon', after: (b) => ({ ...b, state: 'abandoned', abandonedAt: N }) },
    'started>planned': { action: 'plan', after: (b) => ({ ...b, state: 'planned', plannedAt: N, plannedCount: b.plannedCount + 1 }) },
    'started>newed': { action: 'cancel', after: (b) => ({ ...b, state: 'newed', startedAt: null, plannedAt: null }) },
    'started>abandoned': { action: 'abandon', after: (b) => ({ ...b, state: 'abandoned', abandonedAt: N }) },
    'planned>planned': { action: 'replan', after: (b) => ({ ...b, state: 'planned', plannedAt: N, plannedCount: b.plannedCount + 1, finishedAt: null }) },
    'planned>finished': { action: 'finish', after: (b) => ({ ...b, state: 'finished', finishedAt: N }) },
    'planned>newed': { action: 'cancel', after: (b) => ({ ...b, state: 'newed', startedAt: null, plannedAt: null }) },
    'planned>abandoned': { action: 'abandon', after: (b) => ({ ...b, state: 'abandoned', abandonedAt: N }) },
    'finished>planned': { action: 'replan', after: (b) => ({ ...b, state: 'planned', plannedAt: N, plannedCount: b.plannedCount + 1, finishedAt: null }) },
  };

  const REQUESTED = [...TASK_STATES, 'bogus'] as const;
  const pairs = TASK_STATES.flatMap((from) => REQUESTED.map((to) => [from, to] as const));
  it('has 30 pairs, 11 of them allowed', () => {
    expect(pairs).toHaveLength(30);
    expect(pairs.filter(([f, t]) => ALLOWED[`${f}>${t}`])).toHaveLength(11);
  });

  it.each(pairs)('%s -> %s', (from, to) => {
    const allowed = ALLOWED[`${from}>${to}`];
    if (allowed) {
      const t = makeTask(from);
      const before = taskSnapshot(t);
      const action = t.changeState({ state: to }, now);
      expect(action.action).toBe(allowed.action);
      expect(action.to).toBe(to);
      expect(taskSnapshot(t)).toEqual(allowed.after(before));
    } else {
      expectTaskRefusal(makeTask(from), { state: to }, 'invalid_transition', '/task/state');
      // invalid_transition comes before cannot_be_set for extra members
      expectTaskRefusal(makeTask(from), { state: to, planned_at: NOW_S, label: 'x' }, 'invalid_transition', '/task/state');
    }
  });
});

describe('task side effects in detail', () => {
  it('start keeps an existing startedAt ("now if not already set")', () => {
    const t = makeTask('newed', { startedAt: at(T_STARTED_S) });
    t.changeState({ state: 'started' }, now);
    expect(ms(t.startedAt)).toBe(T_STARTED_S * 1000);
  });

  it('plan from newed keeps an existing startedAt', () => {
    const t = makeTask('newed', { startedAt: at(T_STARTED_S) });
    t.changeState({ state: 'planned' }, now);
    expect(ms(t.startedAt)).toBe(T_STARTED_S * 1000);
    expect(ms(t.plannedAt)).toBe(NOW_S * 1000);
    expect(t.plannedCount).toBe(1);
  });

  it('plan from started does not touch startedAt', () => {
    const t = makeTask('started');
    t.changeState({ state: 'planned' }, now);
    expect(ms(t.startedAt)).toBe(T_STARTED_S * 1000);
  });

  it('plannedCount counts every plan and replan; cancel keeps it', () => {
    const t = makeTask('newed');
    const steps: Array<[string, number, TaskState]> = [
      ['planned', 1, 'planned'],
      ['planned', 2, 'planned'],
      ['finished', 2, 'finished'],
      ['planned', 3, 'planned'],
      ['newed', 3, 'newed'],
      ['started', 3, 'started'],
      ['planned', 4, 'planned'],
    ];
    let clock = NOW_S;
    for (const [to, count, state] of steps) {
      clock += 60;
      t.changeState({ state: to }, at(clock));
      expect([t.state, t.plannedCount]).toEqual([state, count]);
    }
    expect(ms(t.plannedAt)).toBe(clock * 1000);
    expect(ms(t.startedAt)).toBe((NOW_S + 6 * 60) * 1000);
    expect(t.finishedAt).toBeNull();
  });

  it('replan of a finished task unsets finishedAt and stamps plannedAt', () => {
    const t = makeTask('finished');
    t.changeState({ state: 'planned' }, now);
    expect(t.finishedAt).toBeNull();
    expect(ms(t.plannedAt)).toBe(NOW_S * 1000);
    expect(t.plannedCount).toBe(3);
    expect(ms(t.startedAt)).toBe(T_STARTED_S * 1000);
  });

  it('cancel of a planned task unsets startedAt and plannedAt, keeps plannedCount', () => {
    const t = makeTask('planned');
    t.changeState({ state: 'newed' }, now);
    expect(t.startedAt).toBeNull();
    expect(t.plannedAt).toBeNull();
    expect(t.plannedCount).toBe(2);
  });

  it('abandon keeps the other dates', () => {
    const t = makeTask('planned');
    t.changeState({ state: 'abandoned' }, now);
    expect(taskSnapshot(t)).toMatchObject({
      state: 'abandoned',
      abandonedAt: NOW_S * 1000,
      startedAt: T_STARTED_S * 1000,
      plannedAt: T_PLANNED_S * 1000,
      plannedCount: 2,
    });
  });
});

describe('task extra members and check order', () => {
  it.each([
    ['newed', { state: 'planned', planned_at: NOW_S }, '/task/planned_at'],
    ['newed', { state: 'started', label: 'renamed' }, '/task/label'],
    ['planned', { state: 'finished', finished_at: NOW_S }, '/task/finished_at'],
    ['started', { state: 'newed', project_id: 1 }, '/task/project_id'],
  ] as const)('from %s, %j is cannot_be_set on %s', (from, request, pointer) => {
    expectTaskRefusal(makeTask(from), { ...request }, 'cannot_be_set', pointer);
  });

  it('a missing state is must_be_set /task/state in the schema, before extra members', () => {
    const raw = { id: 1, task: { planned_at: NOW_S } };
    const parsed = ChangeTaskStateInput.safeParse(raw);
    expect(parsed.success).toBe(false);
    const error = fromZodError(parsed.error!, { rawInput: raw, resource: 'task' });
    expect(error.errors.map((e) => [e.code, e.source?.pointer])).toEqual([['must_be_set', '/task/state']]);
  });

  it('a state that is not a string is invalid /task/state', () => {
    const raw = { id: 1, task: { state: null } };
    const parsed = ChangeTaskStateInput.safeParse(raw);
    expect(parsed.success).toBe(false);
    const error = fromZodError(parsed.error!, { rawInput: raw, resource: 'task' });
    expect(error.errors.map((e) => [e.code, e.source?.pointer])).toEqual([['invalid', '/task/state']]);
  });

  it('a missing state is invalid_transition at entity level', () => {
    expectTaskRefusal(makeTask('newed'), { state: undefined as unknown as string }, 'invalid_transition', '/task/state');
  });
});

describe('Task.moveToProject re-syncs the state', () => {
  const NEW_AT = NOW_S * 1000;
  it.each([
    // from, target project, expected state, expected startedAt (ms or null)
    ['newed', null, 'started', NEW_AT],
    ['newed', { id: 9, started: true }, 'started', NEW_AT],
    ['newed', { id: 9, started: false }, 'newed', null],
    ['started', { id: 9, started: false }, 'newed', null],
    ['started', { id: 9, started: true }, 'started', T_STARTED_S * 1000],
    ['started', null, 'started', T_STARTED_S * 1000],
  ] as const)('%s task to %j -> %s', (from, project, state, startedAt) => {
    const t = makeTask(from);
    const before = taskSnapshot(t);
    t.moveToProject(project ? { ...project } : null, now);
    expect(taskSnapshot(t)).toEqual({ ...before, projectId: project ? project.id : null, state, startedAt });
  });

  it('a newed task with a startedAt keeps it when it starts', () => {
    const t = makeTask('newed', { startedAt: at(T_STARTED_S) });
    t.moveToProject(null, now);
    expect(t.state).toBe('started');
    expect(ms(t.startedAt)).toBe(T_STARTED_S * 1000);
  });

  it.each(['planned', 'finished', 'abandoned'] as const)('a %s task keeps its state and dates', (from) => {
    for (const project of [null, { id: 9, started: true }, { id: 9, started: false }]) {
      const t = makeTask(from);
      const before = taskSnapshot(t);
      t.moveToProject(project, now);
      expect(taskSnapshot(t)).toEqual({ ...before, projectId: project ? project.id : null });
    }
  });
});

describe('newTaskFields (SPEC.md 4.5, API-CONTRACT.md §5)', () => {
  it.each([
    [true, null, 'planned'],
    [true, { started: false }, 'planned'],
    [true, { started: true }, 'planned'],
    [false, { started: false }, 'newed'],
    [false, { started: true }, 'started'],
    [false, null, 'started'],
  ] as const)('plannedAt %s, project %j -> %s', (plannedAt, project, expected) => {
    const plannedAtDate = plannedAt ? at(NOW_S + 3 * DAY) : null;
    const fields = newTaskFields({ plannedAt: plannedAtDate, project: project ? { ...project } : null }, now);
    expect(fields.state).toBe(expected);
    expect(fields).toEqual({
      state: expected,
      plannedCount: expected === 'planned' ? 1 : 0,
      startedAt: expected === 'newed' ? null : now,
      plannedAt: plannedAtDate,
      finishedAt: null,
      abandonedAt: null,
    });
  });
});

describe("the user's open tasks (users.open_tasks)", () => {
  // Only a requested change, a creation and a project's deletion move the counter
  // (src/tasks/change-task-state.ts, create-task.ts, src/projects/delete-project.ts); the
  // actions a project applies to its tasks on its own changes, and the re-sync of a task that
  // joins or leaves a project, must keep a task open or closed, or the counter would drift.
  it('is not moved by the actions a project applies to its tasks, nor by the re-sync of a moved task', () => {
    const closed = (state: TaskState) => CLOSED_TASK_STATES.includes(state);
    const applied = [
      ...PROJECT_TRANSITIONS.flatMap((t) => (t.tasks ? [t.tasks] : [])),
      ...PROJECT_SYNC_RULES.map((r) => ({ action: r.action, states: [r.from] })),
    ];
    expect(applied.length).toBeGreaterThan(0);
    for (const { action, states } of applied) {
      for (const from of states) expect(closed(taskAction(action).to), `${action} from ${from}`).toBe(closed(from));
    }
  });

  it('counts every state but finished and abandoned as open', () => {
    expect(TASK_STATES.filter((s) => !CLOSED_TASK_STATES.includes(s))).toEqual(['newed', 'started', 'planned']);
  });
});
