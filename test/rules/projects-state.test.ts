/**
 * The project state machine (SPEC.md 3.1, API-CONTRACT.md §2 and §4) at entity level: no
 * HTTP, no database. Projects are built by hand, moved with a fixed `now`, and every field
 * they own is compared before and after. The task state machine is in tasks-state.test.ts.
 */
import { describe, expect, it, vi } from 'vitest';
import { DomainError, fromZodError } from '../../src/core/errors.js';
import { Project, type ProjectStateRequest } from '../../src/projects/project.entity.js';
import { PROJECT_STATES, PROJECT_TRANSITIONS } from '../../src/projects/project.lifecycle.js';
import { ChangeProjectStateInput } from '../../src/projects/project.schema.js';
import { DAY, END_OF_TODAY, HOUR, NEXT_MIDNIGHT, T0S } from '../helpers/times.js';

/** 2026-06-15T12:00:00Z. */
const NOW_S = T0S;
const now = new Date(NOW_S * 1000);
const at = (s: number) => new Date(s * 1000);
/** 2026-06-16T00:00:00Z, the first second that is "after today". */
const NEXT_MIDNIGHT_S = NEXT_MIDNIGHT;
/** 2026-06-15T23:59:59Z, the last second of today. */
const END_OF_TODAY_S = END_OF_TODAY;

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
  const error = await p.changeState(request, { now, timeZone: 'UTC', startedProjects }).then(
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
      const transition = await p.changeState({ ...allowed.request }, { now, timeZone: 'UTC', startedProjects });
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
    await p.changeState({ state: 'started', due_at: NEXT_MIDNIGHT_S }, { now, timeZone: 'UTC', startedProjects: counter(0) });
    expect(p.state).toBe('started');
    expect(ms(p.startedAt)).toBe(NOW_S * 1000);
    expect(ms(p.dueAt)).toBe(NEXT_MIDNIGHT_S * 1000);
    expect(p.pausedAt).toBeNull();
    expect(p.finishedAt).toBeNull();
  });

  it('restart with due_at updates dueAt, keeps startedAt, unsets pausedAt', async () => {
    const p = makeProject('paused');
    const due = NEXT_MIDNIGHT_S + 30 * DAY;
    const t = await p.changeState({ state: 'started', due_at: due }, { now, timeZone: 'UTC', startedProjects: counter(2) });
    expect(t.action).toBe('restart');
    expect(projectSnapshot(p)).toMatchObject({ state: 'started', startedAt: STARTED_S * 1000, dueAt: due * 1000, pausedAt: null, finishedAt: null });
  });

  it('restart without due_at keeps the old dueAt', async () => {
    const p = makeProject('paused');
    await p.changeState({ state: 'started' }, { now, timeZone: 'UTC', startedProjects: counter(0) });
    expect(ms(p.dueAt)).toBe(DUE_S * 1000);
    expect(p.pausedAt).toBeNull();
  });

  it('pause then restart then pause again stamps pausedAt with each now', async () => {
    const p = makeProject('started');
    await p.changeState({ state: 'paused' }, { now, timeZone: 'UTC', startedProjects: counter(0) });
    expect(ms(p.pausedAt)).toBe(NOW_S * 1000);
    await p.changeState({ state: 'started' }, { now: at(NOW_S + 60), timeZone: 'UTC', startedProjects: counter(0) });
    expect(p.pausedAt).toBeNull();
    await p.changeState({ state: 'paused' }, { now: at(NOW_S + 120), timeZone: 'UTC', startedProjects: counter(0) });
    expect(ms(p.pausedAt)).toBe((NOW_S + 120) * 1000);
    expect(ms(p.startedAt)).toBe(STARTED_S * 1000);
  });

  it('finish with finished_at stores it; without, stores now', async () => {
    const given = makeProject('started');
    await given.changeState({ state: 'finished', finished_at: STARTED_S + DAY }, { now, timeZone: 'UTC', startedProjects: counter(0) });
    expect(ms(given.finishedAt)).toBe((STARTED_S + DAY) * 1000);
    expect(projectSnapshot(given)).toMatchObject({ state: 'finished', startedAt: STARTED_S * 1000, dueAt: DUE_S * 1000, pausedAt: null });
    const defaulted = makeProject('started');
    await defaulted.changeState({ state: 'finished' }, { now, timeZone: 'UTC', startedProjects: counter(0) });
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
      await p.changeState({ state: 'started', due_at: due }, { now, timeZone: 'UTC', startedProjects: counter(0) });
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
    await p.changeState({ state: 'finished', finished_at: value }, { now, timeZone: 'UTC', startedProjects: counter(0) });
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
    await p.changeState({ state: 'finished', finished_at: NOW_S - HOUR }, { now, timeZone: 'UTC', startedProjects: counter(0) });
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
      await p.changeState({ ...request }, { now, timeZone: 'UTC', startedProjects: cb });
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
    await p.changeState({ ...request }, { now, timeZone: 'UTC', startedProjects: cb });
    expect(p.state).toBe(to);
    expect(cb).not.toHaveBeenCalled();
  });
});
