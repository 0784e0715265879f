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
import type { ProjectTaskEffect } from '../tasks/task.lifecycle.js';

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
