/**
 * The project state machine of SPEC.md 3.1 and API-CONTRACT.md §4, as a table. Touch this
 * file to change a project rule. It holds:
 * - the states, and which of them a client may request;
 * - MAX_STARTED_PROJECTS (SPEC.md 3.1 rule 3), the one place that says 3; the count itself is
 *   read under the owner's lock taken first by every write (src/writes/user-write.ts);
 * - one row per action: where it starts and ends, which dates it requires, allows or forbids
 *   (SPEC.md 3.1 rules 1–2), whether it counts against the limit, its effect on the project's
 *   own dates, and its effect on the project's tasks (an action of task.lifecycle.ts).
 * The order in which the rules are checked is in Project.changeState (project.entity.ts).
 */
import { taskAction, type ProjectTaskEffect } from '../tasks/task.lifecycle.js';

export const PROJECT_STATES = ['newed', 'started', 'paused', 'finished'] as const;
export type ProjectState = (typeof PROJECT_STATES)[number];

/** States a client may request. */
export const REQUESTABLE_PROJECT_STATES = ['started', 'paused', 'finished'] as const;

/** SPEC.md 2.1: a project is in progress while it is started. */
export function isInProgress(state: ProjectState): boolean {
  return state === 'started';
}

/** At most this many projects of one user are `started` at once. */
export const MAX_STARTED_PROJECTS = 3;

/**
 * API-CONTRACT.md §4, "Project edits": `due_at` may change only in these states, and not to
 * before the project started; its current value is no change, accepted in any state.
 */
export const DUE_AT_EDITABLE_IN: readonly ProjectState[] = ['started'];

type DateRule = 'required' | 'optional' | 'forbidden';

/** The dated attributes an action writes. */
export interface ProjectDates {
  startedAt?: Date | null;
  dueAt?: Date | null;
  pausedAt?: Date | null;
  finishedAt?: Date | null;
}

export interface ProjectActionInput {
  now: Date;
  dueAt: Date | undefined;
  finishedAt: Date | undefined;
}

/**
 * What a transition does to one of the project's dates: `now`; `unset`; `given`, the request's
 * date; `givenOrKeep`, the request's date when given, else as it was; `givenOrNow`, the
 * request's date when given, else now.
 */
export type ProjectDateEffect = 'now' | 'unset' | 'given' | 'givenOrKeep' | 'givenOrNow';

/** Which request date a `given…` effect of each project date reads. */
const GIVEN_BY: Record<keyof ProjectDates, 'dueAt' | 'finishedAt' | null> = { startedAt: null, dueAt: 'dueAt', pausedAt: null, finishedAt: 'finishedAt' };

export interface ProjectTransition {
  action: 'start' | 'pause' | 'restart' | 'finish';
  from: ProjectState;
  to: ProjectState;
  dueAt: DateRule;
  finishedAt: DateRule;
  /** The move makes the project `started`, so the limit applies. */
  countsAsStarted: boolean;
  /**
   * What the move does to the project's tasks (API-CONTRACT.md §4): start and restart start
   * its newed tasks; pause cancels its started tasks back to newed (not its planned ones).
   */
  tasks: ProjectTaskEffect | null;
  /** The side effects of SPEC.md 3.1 on the project's own dates. */
  dates: { readonly [D in keyof ProjectDates]?: ProjectDateEffect };
}

export const PROJECT_TRANSITIONS: readonly ProjectTransition[] = [
  {
    action: 'start', from: 'newed', to: 'started', dueAt: 'required', finishedAt: 'forbidden',
    countsAsStarted: true, tasks: { action: 'start', states: ['newed'] }, dates: { startedAt: 'now', dueAt: 'given' },
  },
  {
    action: 'pause', from: 'started', to: 'paused', dueAt: 'forbidden', finishedAt: 'forbidden',
    countsAsStarted: false, tasks: { action: 'cancel', states: ['started'] }, dates: { pausedAt: 'now' },
  },
  {
    action: 'restart', from: 'paused', to: 'started', dueAt: 'optional', finishedAt: 'forbidden',
    countsAsStarted: true, tasks: { action: 'start', states: ['newed'] }, dates: { dueAt: 'givenOrKeep', pausedAt: 'unset' },
  },
  {
    action: 'finish', from: 'started', to: 'finished', dueAt: 'forbidden', finishedAt: 'optional',
    countsAsStarted: false, tasks: null, dates: { finishedAt: 'givenOrNow' },
  },
];

export function findProjectTransition(from: ProjectState, to: string): ProjectTransition | undefined {
  return PROJECT_TRANSITIONS.find((t) => t.from === from && t.to === to);
}

/** Applies a transition's date effects to a project (the entity). */
export function applyProjectTransition(project: ProjectDates, transition: ProjectTransition, input: ProjectActionInput): void {
  for (const [date, effect] of Object.entries(transition.dates) as Array<[keyof ProjectDates, ProjectDateEffect]>) {
    const given = GIVEN_BY[date] ? input[GIVEN_BY[date]!] : undefined;
    if (effect === 'now') project[date] = input.now;
    else if (effect === 'unset') project[date] = null;
    else if (effect === 'given') project[date] = given ?? null;
    else if (effect === 'givenOrNow') project[date] = given ?? input.now;
    else if (given) project[date] = given;
  }
}

/** The same effects in SQL, for the column of `date`: `given` the request's date (null when not given), `now`, `current` the column. */
export function projectDateEffectSql(effect: ProjectDateEffect, { given, now, current }: { given: string; now: string; current: string }): string {
  return { now, unset: 'null', given, givenOrKeep: `coalesce(${given}, ${current})`, givenOrNow: `coalesce(${given}, ${now})` }[effect];
}

const EFFECT_TEXT: Record<ProjectDateEffect, (given: string) => string> = {
  now: () => 'now',
  unset: () => 'unset',
  given: (given) => given,
  givenOrKeep: (given) => `${given} when given`,
  givenOrNow: (given) => `${given}, else now`,
};

/** What a transition does to the project's own dates, read from its row of the table. */
function describeProjectEffects(transition: ProjectTransition): string[] {
  return (Object.entries(transition.dates) as Array<[keyof ProjectDates, ProjectDateEffect]>).map(([date, effect]) => {
    const given = GIVEN_BY[date] === 'dueAt' ? '`due_at`' : '`finished_at`';
    return effect === 'unset' ? `${date} unset` : `${date} = ${EFFECT_TEXT[effect](given)}`;
  });
}

const DATE_RULE_TEXT: Record<'dueAt' | 'finishedAt', Record<Exclude<DateRule, 'forbidden'>, string>> = {
  dueAt: { required: '`due_at` required, after today', optional: '`due_at` optional, after today' },
  finishedAt: { required: '`finished_at` required, between startedAt and today', optional: '`finished_at` optional, between startedAt and today' },
};

/** PROJECT_TRANSITIONS as the lines of the project state change's description in openapi.json. */
export function describeProjectTransitions(): string[] {
  return PROJECT_TRANSITIONS.map((t) => {
    const conditions = [
      ...(['dueAt', 'finishedAt'] as const).flatMap((date) => (t[date] === 'forbidden' ? [] : [DATE_RULE_TEXT[date][t[date]]])),
      ...(t.countsAsStarted ? [`fewer than ${MAX_STARTED_PROJECTS} started projects`] : []),
    ];
    const effects = describeProjectEffects(t);
    if (t.tasks) effects.push(`its ${t.tasks.states.join('/')} tasks become ${taskAction(t.tasks.action).to} (${t.tasks.action})`);
    return `- ${t.action}: ${t.from} → ${t.to}${conditions.length ? `; ${conditions.join('; ')}` : ''}. ${effects.join(', ')}.`;
  });
}
