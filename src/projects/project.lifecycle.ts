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
  apply(project: ProjectDates, input: ProjectActionInput): void;
}

export const PROJECT_TRANSITIONS: readonly ProjectTransition[] = [
  {
    action: 'start', from: 'newed', to: 'started', dueAt: 'required', finishedAt: 'forbidden',
    countsAsStarted: true, tasks: { action: 'start', states: ['newed'] },
    apply(project, { now, dueAt }) {
      project.startedAt = now;
      project.dueAt = dueAt ?? null;
    },
  },
  {
    action: 'pause', from: 'started', to: 'paused', dueAt: 'forbidden', finishedAt: 'forbidden',
    countsAsStarted: false, tasks: { action: 'cancel', states: ['started'] },
    apply(project, { now }) {
      project.pausedAt = now;
    },
  },
  {
    action: 'restart', from: 'paused', to: 'started', dueAt: 'optional', finishedAt: 'forbidden',
    countsAsStarted: true, tasks: { action: 'start', states: ['newed'] },
    apply(project, { dueAt }) {
      project.pausedAt = null;
      if (dueAt) project.dueAt = dueAt;
    },
  },
  {
    action: 'finish', from: 'started', to: 'finished', dueAt: 'forbidden', finishedAt: 'optional',
    countsAsStarted: false, tasks: null,
    apply(project, { now, finishedAt }) {
      project.finishedAt = finishedAt ?? now;
    },
  },
];

export function findProjectTransition(from: ProjectState, to: string): ProjectTransition | undefined {
  return PROJECT_TRANSITIONS.find((t) => t.from === from && t.to === to);
}

/**
 * What a transition's `apply` does to the project's own dates, found by running it: on a
 * blank project with distinct instants for now and the given dates, once with the optional
 * dates given and once without. So the description is read from the table itself and cannot
 * drift from it.
 */
function describeProjectEffects(transition: ProjectTransition): string[] {
  const now = new Date(1_000);
  const given = { dueAt: new Date(2_000), finishedAt: new Date(3_000) };
  const names = new Map<number | undefined, string>([[now.getTime(), 'now'], [given.dueAt.getTime(), '`due_at`'], [given.finishedAt.getTime(), '`finished_at`']]);
  const withDates: ProjectDates = {};
  const withoutDates: ProjectDates = {};
  transition.apply(withDates, { now, ...given });
  transition.apply(withoutDates, { now, dueAt: undefined, finishedAt: undefined });
  const dates = ['startedAt', 'dueAt', 'pausedAt', 'finishedAt'] as const;
  return dates.flatMap((date) => {
    const set = withDates[date];
    const fallback = withoutDates[date];
    if (set === undefined && fallback === undefined) return [];
    if (set === null) return [`${date} unset`];
    const value = names.get(set?.getTime());
    if (fallback === undefined) return [`${date} = ${value} when given`];
    const otherwise = names.get(fallback?.getTime() ?? undefined);
    // A required date is always given: what the transition does without it never happens.
    const required = (date === 'dueAt' || date === 'finishedAt') && transition[date] === 'required';
    return [value === otherwise || required ? `${date} = ${value}` : `${date} = ${value}, else ${otherwise ?? 'unset'}`];
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
