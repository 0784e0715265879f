/**
 * The two state machines (SPEC.md §3, API-CONTRACT.md §2 and §4) at entity level: no HTTP,
 * no database. Entities are built by hand, moved with a fixed `now`, and every field they
 * own is compared before and after.
 */
import { describe, expect, it, vi } from 'vitest';
import { DomainError, fromZodError } from '../src/core/errors.js';
import { Project, type ProjectStateRequest } from '../src/projects/project.entity.js';
import { PROJECT_STATES, PROJECT_TRANSITIONS } from '../src/projects/project.lifecycle.js';
import { ChangeProjectStateInput } from '../src/projects/project.schema.js';
import { Task } from '../src/tasks/task.entity.js';
import { TASK_STATES, newTaskFields, type TaskState } from '../src/tasks/task.lifecycle.js';
import { ChangeTaskStateInput } from '../src/tasks/task.schema.js';

const HOUR = 3_600;
const DAY = 86_400;
/** 2026-06-15T12:00:00Z. */
const NOW_S = Date.UTC(2026, 5, 15, 12, 0, 0) / 1000;
const now = new Date(NOW_S * 1000);
/** 2026-06-16T00:00:00Z, the first second that is "after today". */
const NEXT_MIDNIGHT_S = Date.UTC(2026, 5, 16) / 1000;
/** 2026-06-15T23:59:59Z, the last second of today. */
const END_OF_TODAY_S = NEXT_MIDNIGHT_S - 1;
const at = (s: number) => new Date(s * 1000);

// Dates of the fixtures.
const STARTED_S = NOW_S - 3 * DAY;
const DUE_S = NOW_S + 10 * DAY;
const PAUSED_S = NOW_S - DAY;
const FINISHED_S = NOW_S - 2 * HOUR;

type PState = (typeof PROJECT_STATES)[number];

/** A project in `state` with the dates a project in that state would have. */
function makeProject(state: PState, overrides: Partial<Project> = {}): Project {
  const p = new Project();
  Object.assign(p, {
    id: 1,
    userId: 1,
    name: 'x',
    slug: 'x',
    description: '',
    state,
    startedAt: state === 'newed' ? null : at(STARTED_S),
    dueAt: state === 'newed' ? null : at(DUE_S),
    pausedAt: state === 'paused' ? at(PAUSED_S) : null,
    finishedAt: state === 'finished' ? at(FINISHED_S) : null,
    createdAt: at(STARTED_S - DAY),
    ...overrides,
  });
  return p;
}

const ms = (d: Date | null | undefined) => (d ? d.getTime() : null);
function projectSnapshot(p: Project) {
  return {
    id: p.id,
    userId: p.userId,
    name: p.name,
    slug: p.slug,
    description: p.description,
    state: p.state,
    startedAt: ms(p.startedAt),
    dueAt: ms(p.dueAt),
    pausedAt: ms(p.pausedAt),
    finishedAt: ms(p.finishedAt),
    createdAt: ms(p.createdAt),
  };
}

function counter(started: number) {
  return vi.fn(async () => started);
}

/** Runs a project state change that must be refused with exactly one error. */
async function expectProjectRefusal(p: Project, request: ProjectStateRequest, code: string, pointer: string, startedProjects = counter(0)) {
  const before = projectSnapshot(p);
  const error = await p.changeState(request, { now, startedProjects }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, `expected ${code} for ${JSON.stringify(request)} from ${before.state}`).toBeInstanceOf(DomainError);
  const domain = error as DomainError;
  expect(domain.status).toBe(422);
  expect(domain.errors).toEqual([{ status: '422', code, title: expect.any(String), detail: expect.any(String), source: { pointer } }]);
  // A refused move changes nothing.
  expect(projectSnapshot(p)).toEqual(before);
  return startedProjects;
}

describe('project state machine: every (from, requested) pair', () => {
  const REQUESTED = [...PROJECT_STATES, 'bogus'] as const;
  const START_DUE_S = NEXT_MIDNIGHT_S + 5 * DAY;

  /** The four moves of SPEC.md 3.1, with the request that makes each one succeed. */
  const ALLOWED: Record<string, {
    action: string;
    request: ProjectStateRequest;
    after: (before: ReturnType<typeof projectSnapshot>) => ReturnType<typeof projectSnapshot>;
    tasks: unknown;
    countsAgainstLimit: boolean;
  }> = {
    'newed>started': {
      action: 'start',
      request: { state: 'started', due_at: START_DUE_S },
      after: (b) => ({ ...b, state: 'started', startedAt: now.getTime(), dueAt: START_DUE_S * 1000 }),
      tasks: { action: 'start', states: ['newed'] },
      countsAgainstLimit: true,
    },
    'started>paused': {
      action: 'pause',
      request: { state: 'paused' },
      after: (b) => ({ ...b, state: 'paused', pausedAt: now.getTime() }),
      tasks: { action: 'cancel', states: ['started'] },
      countsAgainstLimit: false,
    },
    'paused>started': {
      action: 'restart',
      request: { state: 'started' },
      // startedAt and dueAt stay; pausedAt is unset.
      after: (b) => ({ ...b, state: 'started', pausedAt: null }),
      tasks: { action: 'start', states: ['newed'] },
      countsAgainstLimit: true,
    },
    'started>finished': {
      action: 'finish',
      request: { state: 'finished' },
      after: (b) => ({ ...b, state: 'finished', finishedAt: now.getTime() }),
      tasks: null,
      countsAgainstLimit: false,
    },
  };

  const pairs = PROJECT_STATES.flatMap((from) => REQUESTED.map((to) => [from, to] as const));
  it('has 20 pairs, 4 of them allowed', () => {
    expect(pairs).toHaveLength(20);
    expect(pairs.filter(([f, t]) => ALLOWED[`${f}>${t}`])).toHaveLength(4);
  });

  it.each(pairs)('%s -> %s', async (from, to) => {
    const allowed = ALLOWED[`${from}>${to}`];
    if (allowed) {
      const p = makeProject(from);
      const before = projectSnapshot(p);
      const startedProjects = counter(0);
      const transition = await p.changeState({ ...allowed.request }, { now, startedProjects });
      expect(transition.action).toBe(allowed.action);
      expect(transition.from).toBe(from);
      expect(transition.to).toBe(to);
      expect(transition.tasks).toEqual(allowed.tasks);
      expect(projectSnapshot(p)).toEqual(allowed.after(before));
      expect(p.isInProgress()).toBe(to === 'started');
      expect(startedProjects).toHaveBeenCalledTimes(allowed.countsAgainstLimit ? 1 : 0);
    } else {
      // The bare request, and one that would also break every later rule: invalid_transition wins.
      const bare = await expectProjectRefusal(makeProject(from), { state: to }, 'invalid_transition', '/project/state');
      expect(bare).not.toHaveBeenCalled();
      const loaded = await expectProjectRefusal(
        makeProject(from),
        { state: to, due_at: 0, finished_at: NEXT_MIDNIGHT_S + DAY, name: 'other' },
        'invalid_transition',
        '/project/state',
        counter(3),
      );
      expect(loaded).not.toHaveBeenCalled();
    }
  });

  it('refuses a missing state (entity level) as invalid_transition, unchanged', async () => {
    await expectProjectRefusal(makeProject('newed'), { state: undefined as unknown as string }, 'invalid_transition', '/project/state');
  });

  it('publishes exactly the four moves of SPEC.md 3.1 in its table', () => {
    expect(PROJECT_TRANSITIONS.map((t) => [t.action, t.from, t.to, t.tasks])).toEqual([
      ['start', 'newed', 'started', { action: 'start', states: ['newed'] }],
      ['pause', 'started', 'paused', { action: 'cancel', states: ['started'] }],
      ['restart', 'paused', 'started', { action: 'start', states: ['newed'] }],
      ['finish', 'started', 'finished', null],
    ]);
  });
});

describe('project side effects in detail', () => {
  it('start sets startedAt = now and dueAt = due_at, and leaves the other dates unset', async () => {
    const p = makeProject('newed');
    await p.changeState({ state: 'started', due_at: NEXT_MIDNIGHT_S }, { now, startedProjects: counter(0) });
    expect(p.state).toBe('started');
    expect(ms(p.startedAt)).toBe(NOW_S * 1000);
    expect(ms(p.dueAt)).toBe(NEXT_MIDNIGHT_S * 1000);
    expect(p.pausedAt).toBeNull();
    expect(p.finishedAt).toBeNull();
  });

  it('restart with due_at updates dueAt, keeps startedAt, unsets pausedAt', async () => {
    const p = makeProject('paused');
    const due = NEXT_MIDNIGHT_S + 30 * DAY;
    const t = await p.changeState({ state: 'started', due_at: due }, { now, startedProjects: counter(2) });
    expect(t.action).toBe('restart');
    expect(projectSnapshot(p)).toMatchObject({ state: 'started', startedAt: STARTED_S * 1000, dueAt: due * 1000, pausedAt: null, finishedAt: null });
  });

  it('restart without due_at keeps the old dueAt', async () => {
    const p = makeProject('paused');
    await p.changeState({ state: 'started' }, { now, startedProjects: counter(0) });
    expect(ms(p.dueAt)).toBe(DUE_S * 1000);
    expect(p.pausedAt).toBeNull();
  });

  it('pause then restart then pause again stamps pausedAt with each now', async () => {
    const p = makeProject('started');
    await p.changeState({ state: 'paused' }, { now, startedProjects: counter(0) });
    expect(ms(p.pausedAt)).toBe(NOW_S * 1000);
    await p.changeState({ state: 'started' }, { now: at(NOW_S + 60), startedProjects: counter(0) });
    expect(p.pausedAt).toBeNull();
    await p.changeState({ state: 'paused' }, { now: at(NOW_S + 120), startedProjects: counter(0) });
    expect(ms(p.pausedAt)).toBe((NOW_S + 120) * 1000);
    expect(ms(p.startedAt)).toBe(STARTED_S * 1000);
  });

  it('finish with finished_at stores it; without, stores now', async () => {
    const given = makeProject('started');
    await given.changeState({ state: 'finished', finished_at: STARTED_S + DAY }, { now, startedProjects: counter(0) });
    expect(ms(given.finishedAt)).toBe((STARTED_S + DAY) * 1000);
    expect(projectSnapshot(given)).toMatchObject({ state: 'finished', startedAt: STARTED_S * 1000, dueAt: DUE_S * 1000, pausedAt: null });
    const defaulted = makeProject('started');
    await defaulted.changeState({ state: 'finished' }, { now, startedProjects: counter(0) });
    expect(ms(defaulted.finishedAt)).toBe(NOW_S * 1000);
  });
});

describe('project date rules (now = 2026-06-15T12:00:00Z)', () => {
  describe.each([
    ['start', 'newed'],
    ['restart', 'paused'],
  ] as const)('due_at on %s', (_action, from) => {
    it.each([
      ['the next UTC midnight', NEXT_MIDNIGHT_S],
      ['far in the future', NEXT_MIDNIGHT_S + 365 * DAY],
    ])('accepts %s', async (_what, due) => {
      const p = makeProject(from);
      await p.changeState({ state: 'started', due_at: due }, { now, startedProjects: counter(0) });
      expect(p.state).toBe('started');
      expect(ms(p.dueAt)).toBe(due * 1000);
    });

    it.each([
      ['one second before the next midnight', END_OF_TODAY_S],
      ['now', NOW_S],
      ['earlier today', NOW_S - HOUR],
      ['yesterday', NOW_S - DAY],
      ['0', 0],
    ])('refuses %s as cannot_be_before_started_at', async (_what, due) => {
      await expectProjectRefusal(makeProject(from), { state: 'started', due_at: due }, 'cannot_be_before_started_at', '/project/due_at');
    });
  });

  it.each([
    ['startedAt itself', STARTED_S],
    ['between startedAt and now', STARTED_S + DAY],
    ['now', NOW_S],
    ['the last second of today', END_OF_TODAY_S],
  ])('finish accepts finished_at = %s', async (_what, value) => {
    const p = makeProject('started');
    await p.changeState({ state: 'finished', finished_at: value }, { now, startedProjects: counter(0) });
    expect(p.state).toBe('finished');
    expect(ms(p.finishedAt)).toBe(value * 1000);
  });

  it.each([
    ['one second before startedAt', STARTED_S - 1, 'cannot_be_before_started_at'],
    ['0', 0, 'cannot_be_before_started_at'],
    ['the next UTC midnight', NEXT_MIDNIGHT_S, 'cannot_be_after_today'],
    ['next week', NOW_S + 7 * DAY, 'cannot_be_after_today'],
  ])('finish refuses finished_at = %s as %s', async (_what, value, code) => {
    await expectProjectRefusal(makeProject('started'), { state: 'finished', finished_at: value }, code, '/project/finished_at');
  });

  it('finish accepts a finished_at at startedAt when the project started today', async () => {
    const p = makeProject('started', { startedAt: at(NOW_S - HOUR) });
    await p.changeState({ state: 'finished', finished_at: NOW_S - HOUR }, { now, startedProjects: counter(0) });
    expect(ms(p.finishedAt)).toBe((NOW_S - HOUR) * 1000);
    await expectProjectRefusal(
      makeProject('started', { startedAt: at(NOW_S - HOUR) }),
      { state: 'finished', finished_at: NOW_S - HOUR - 1 },
      'cannot_be_before_started_at',
      '/project/finished_at',
    );
  });
});

describe('project must_be_set / cannot_be_set', () => {
  const FUTURE = NEXT_MIDNIGHT_S + DAY;
  it.each([
    ['start without due_at', 'newed', { state: 'started' }, 'must_be_set', '/project/due_at'],
    ['start with finished_at', 'newed', { state: 'started', due_at: FUTURE, finished_at: NOW_S }, 'cannot_be_set', '/project/finished_at'],
    ['pause with due_at', 'started', { state: 'paused', due_at: FUTURE }, 'cannot_be_set', '/project/due_at'],
    ['pause with finished_at', 'started', { state: 'paused', finished_at: NOW_S }, 'cannot_be_set', '/project/finished_at'],
    ['restart with finished_at', 'paused', { state: 'started', finished_at: NOW_S }, 'cannot_be_set', '/project/finished_at'],
    ['finish with due_at', 'started', { state: 'finished', due_at: FUTURE }, 'cannot_be_set', '/project/due_at'],
    ['start with an extra member', 'newed', { state: 'started', due_at: FUTURE, name: 'renamed' }, 'cannot_be_set', '/project/name'],
    ['pause with an extra member', 'started', { state: 'paused', description: 'd' }, 'cannot_be_set', '/project/description'],
    ['finish with an extra member', 'started', { state: 'finished', started_at: NOW_S }, 'cannot_be_set', '/project/started_at'],
  ] as const)('%s -> %s %s', async (_what, from, request, code, pointer) => {
    await expectProjectRefusal(makeProject(from), { ...request }, code, pointer, counter(0));
  });

  it('a due_at of 0 is still "given" (cannot_be_set on pause, not ignored)', async () => {
    await expectProjectRefusal(makeProject('started'), { state: 'paused', due_at: 0 }, 'cannot_be_set', '/project/due_at');
  });
});

describe('project check order (API-CONTRACT §2)', () => {
  it('step 1: a missing state is must_be_set /project/state, before anything else', () => {
    const raw = { id: 1, project: { due_at: 0, finished_at: NEXT_MIDNIGHT_S * 10, name: 'x' } };
    const parsed = ChangeProjectStateInput.safeParse(raw);
    expect(parsed.success).toBe(false);
    const error = fromZodError(parsed.error!, { rawInput: raw, resource: 'project' });
    expect(error.errors.map((e) => [e.code, e.source?.pointer])).toEqual([['must_be_set', '/project/state']]);
  });

  it('a state that is not a string is invalid /project/state (type error first)', () => {
    const raw = { id: 1, project: { state: 3 } };
    const parsed = ChangeProjectStateInput.safeParse(raw);
    expect(parsed.success).toBe(false);
    const error = fromZodError(parsed.error!, { rawInput: raw, resource: 'project' });
    expect(error.errors.map((e) => [e.code, e.source?.pointer])).toEqual([['invalid', '/project/state']]);
  });

  it('the schema lets unknown states and extra members through to the entity', () => {
    const parsed = ChangeProjectStateInput.safeParse({ id: 1, project: { state: 'bogus', name: 'x' } });
    expect(parsed.success).toBe(true);
    expect(parsed.data!.project).toEqual({ state: 'bogus', name: 'x' });
  });

  it('step 2: invalid_transition before must_be_set (finished -> started without due_at)', async () => {
    await expectProjectRefusal(makeProject('finished'), { state: 'started' }, 'invalid_transition', '/project/state', counter(3));
  });

  it('step 3 before step 4: cannot_be_set before a date rule', async () => {
    // pause with a due_at in the past: cannot_be_set, not a date error
    await expectProjectRefusal(makeProject('started'), { state: 'paused', due_at: NOW_S - DAY }, 'cannot_be_set', '/project/due_at');
    // finish with due_at and a finished_at after today
    await expectProjectRefusal(
      makeProject('started'),
      { state: 'finished', due_at: NEXT_MIDNIGHT_S, finished_at: NEXT_MIDNIGHT_S + DAY },
      'cannot_be_set',
      '/project/due_at',
    );
    // start with a valid due_at and a finished_at after today
    await expectProjectRefusal(
      makeProject('newed'),
      { state: 'started', due_at: NEXT_MIDNIGHT_S, finished_at: NEXT_MIDNIGHT_S + DAY },
      'cannot_be_set',
      '/project/finished_at',
    );
    // an extra member and a due_at in the past
    await expectProjectRefusal(makeProject('newed'), { state: 'started', due_at: 0, label: 'x' }, 'cannot_be_set', '/project/label');
  });

  it('step 3 before step 5: must_be_set / cannot_be_set before reached_max_started', async () => {
    await expectProjectRefusal(makeProject('newed'), { state: 'started' }, 'must_be_set', '/project/due_at', counter(3));
    await expectProjectRefusal(makeProject('paused'), { state: 'started', finished_at: NOW_S }, 'cannot_be_set', '/project/finished_at', counter(3));
  });

  it('step 4 before step 5: date rules before reached_max_started', async () => {
    await expectProjectRefusal(makeProject('newed'), { state: 'started', due_at: NOW_S }, 'cannot_be_before_started_at', '/project/due_at', counter(3));
    await expectProjectRefusal(makeProject('paused'), { state: 'started', due_at: END_OF_TODAY_S }, 'cannot_be_before_started_at', '/project/due_at', counter(3));
  });
});

describe('the limit of 3 started projects', () => {
  const FUTURE = NEXT_MIDNIGHT_S + DAY;
  it.each([
    ['start', 'newed', { state: 'started', due_at: FUTURE }],
    ['restart', 'paused', { state: 'started' }],
    ['restart with due_at', 'paused', { state: 'started', due_at: FUTURE }],
  ] as const)('%s: allowed with 2 started, refused with 3 and 4', async (_what, from, request) => {
    for (const n of [0, 2]) {
      const p = makeProject(from);
      const cb = counter(n);
      await p.changeState({ ...request }, { now, startedProjects: cb });
      expect(p.state).toBe('started');
      expect(cb).toHaveBeenCalledTimes(1);
    }
    for (const n of [3, 4]) {
      const cb = await expectProjectRefusal(makeProject(from), { ...request }, 'reached_max_started', '/project/state', counter(n));
      expect(cb).toHaveBeenCalledTimes(1);
    }
  });

  it.each([
    ['pause', 'started', { state: 'paused' }, 'paused'],
    ['finish', 'started', { state: 'finished' }, 'finished'],
    ['finish with finished_at', 'started', { state: 'finished', finished_at: NOW_S }, 'finished'],
  ] as const)('%s does not consult the started count', async (_what, from, request, to) => {
    const p = makeProject(from);
    const cb = vi.fn(async () => {
      throw new Error('must not be consulted');
    });
    await p.changeState({ ...request }, { now, startedProjects: cb });
    expect(p.state).toBe(to);
    expect(cb).not.toHaveBeenCalled();
  });
});

// ---------------------------------------------------------------------------------------
// Tasks

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
