/**
 * The project state machine of SPEC.md 3.1 and API-CONTRACT.md §4, as a table: touch this file to change
 * a project rule (docs/design/writes.md, "Where each rule lives"). The order of the checks is Project.changeState's.
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

/** At most this many projects of one user are `started` at once: the one place that says 3. */
export const MAX_STARTED_PROJECTS = 3;

/** API-CONTRACT.md §4, "Project edits": `due_at` may change only in these states, and not to before the start. */
export const DUE_AT_EDITABLE_IN: readonly ProjectState[] = ['started'];

type DateRule = 'required' | 'optional' | 'forbidden';

/** The dated attributes an action writes. */
export type ProjectDates = { [D in 'startedAt' | 'dueAt' | 'pausedAt' | 'finishedAt']?: Date | null };

/** What a transition does to one of the project's dates; `given…`: the request's date (when given, else kept / now). */
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
  /** What the move does to the project's tasks (API-CONTRACT.md §4). */
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

/** Applies a transition's date effects to a project (the entity). */
export function applyProjectTransition(
  project: ProjectDates, transition: ProjectTransition, input: { now: Date; dueAt: Date | undefined; finishedAt: Date | undefined },
): void {
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
  now: () => ' = now',
  unset: () => ' unset',
  given: (given) => ` = ${given}`,
  givenOrKeep: (given) => ` = ${given} when given`,
  givenOrNow: (given) => ` = ${given}, else now`,
};

/** A request's dates as the description names them, and their bounds. */
const REQUEST_DATES = {
  dueAt: { member: '`due_at`', bounds: 'after today' },
  finishedAt: { member: '`finished_at`', bounds: 'between startedAt and today' },
};

/** PROJECT_TRANSITIONS as the lines of the project state change's description in openapi.json. */
export function describeProjectTransitions(): string[] {
  return PROJECT_TRANSITIONS.map((t) => {
    const conditions = [
      ...(['dueAt', 'finishedAt'] as const).filter((date) => t[date] !== 'forbidden')
        .map((date) => `${REQUEST_DATES[date].member} ${t[date]}, ${REQUEST_DATES[date].bounds}`),
      ...(t.countsAsStarted ? [`fewer than ${MAX_STARTED_PROJECTS} started projects`] : []),
    ];
    const effects = (Object.entries(t.dates) as Array<[keyof ProjectDates, ProjectDateEffect]>).map(([date, effect]) => {
      const given = GIVEN_BY[date];
      return date + EFFECT_TEXT[effect](given ? REQUEST_DATES[given].member : '');
    });
    if (t.tasks) effects.push(`its ${t.tasks.states.join('/')} tasks become ${taskAction(t.tasks.action).to} (${t.tasks.action})`);
    return `- ${t.action}: ${t.from} → ${t.to}${conditions.length ? `; ${conditions.join('; ')}` : ''}. ${effects.join(', ')}.`;
  });
}
