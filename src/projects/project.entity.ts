/**
 * A project of one user. Holds the rules of its lifecycle (project.lifecycle.ts) and of
 * its editable attributes; callers load it, call a method, and flush.
 */
import { defineEntity, p } from '@mikro-orm/postgresql';
import { fromSeconds, toSeconds } from '../core/clock.js';
import { endOfDay, userDay } from '../core/user-day.js';
import { DomainError, pointerOf } from '../core/errors.js';
import {
  DUE_AT_EDITABLE_IN, MAX_STARTED_PROJECTS, PROJECT_STATES, PROJECT_TRANSITIONS, applyProjectTransition, isInProgress, type ProjectTransition,
} from './project.lifecycle.js';

export const ProjectSchema = defineEntity({
  name: 'Project',
  tableName: 'projects',
  // Key (user_id, id) (src/db/data-layout.ts); `id` first: MikroORM takes the first key for the value an insert returns.
  properties: {
    id: p.integer().primary().autoincrement(),
    userId: p.integer().primary(),
    name: p.text(),
    slug: p.text(),
    description: p.text().default(''),
    state: p.enum(PROJECT_STATES).default('newed'),
    startedAt: p.datetime().columnType('timestamptz').nullable(),
    dueAt: p.datetime().columnType('timestamptz').nullable(),
    pausedAt: p.datetime().columnType('timestamptz').nullable(),
    finishedAt: p.datetime().columnType('timestamptz').nullable(),
    createdAt: p.datetime().columnType('timestamptz'),
    /** Grows with every change of the row (ETag, If-Match); see the versions migration. */
    version: p.integer().version(),
  },
});

/** Members of `project` in a state-change request; anything else is `cannot_be_set`. */
export interface ProjectStateRequest {
  state: string;
  due_at?: number;
  finished_at?: number;
  [other: string]: unknown;
}

/** `timeZone`: "today" is the owner's day in it; `startedProjects`: read under the owner's lock. */
export interface ProjectStateContext {
  now: Date;
  timeZone: string;
  startedProjects: () => Promise<number>;
}

const STATE_REQUEST_MEMBERS = new Set(['state', 'due_at', 'finished_at']);

export class Project extends ProjectSchema.class {
  isInProgress(): boolean {
    return isInProgress(this.state);
  }

  /** API-CONTRACT.md §4, "Project edits" (DUE_AT_EDITABLE_IN); the current value is no change: edit forms send every field. */
  changeDueAt(dueAt: number): void {
    if (dueAt === toSeconds(this.dueAt)) return;
    if (!DUE_AT_EDITABLE_IN.includes(this.state) || !this.startedAt) {
      throw DomainError.validation('cannot_be_set', '/project/due_at', 'due_at can only be changed while the project is started.');
    }
    const at = fromSeconds(dueAt);
    if (at < this.startedAt) {
      throw DomainError.validation('cannot_be_before_started_at', '/project/due_at', 'due_at cannot be before the project started.');
    }
    this.dueAt = at;
  }

  /**
   * Moves the project along SPEC.md 3.1, checking in the order of API-CONTRACT.md §2: invalid_transition,
   * must/cannot_be_set, dates, the started limit. Returns the transition, whose effect on tasks is the caller's.
   */
  async changeState(request: ProjectStateRequest, ctx: ProjectStateContext): Promise<ProjectTransition> {
    const transition = PROJECT_TRANSITIONS.find((t) => t.from === this.state && t.to === request.state);
    if (!transition) {
      throw DomainError.validation('invalid_transition', '/project/state', `A ${this.state} project cannot become ${request.state}.`);
    }
    for (const member of Object.keys(request)) {
      if (!STATE_REQUEST_MEMBERS.has(member)) {
        throw DomainError.validation('cannot_be_set', pointerOf(['project', member]), `${member} cannot be set when changing the state.`);
      }
    }
    const dueAt = request.due_at === undefined ? undefined : fromSeconds(request.due_at);
    const finishedAt = request.finished_at === undefined ? undefined : fromSeconds(request.finished_at);
    if (dueAt && transition.dueAt === 'forbidden') {
      throw DomainError.validation('cannot_be_set', '/project/due_at', `due_at cannot be set on ${transition.action}.`);
    }
    if (finishedAt && transition.finishedAt === 'forbidden') {
      throw DomainError.validation('cannot_be_set', '/project/finished_at', `finished_at cannot be set on ${transition.action}.`);
    }
    if (!dueAt && transition.dueAt === 'required') {
      throw DomainError.validation('must_be_set', '/project/due_at', `due_at must be set on ${transition.action}.`);
    }
    const today = userDay(ctx.now, ctx.timeZone);
    // After today: at or after the first instant of the owner's tomorrow.
    if (dueAt && dueAt < today.next) {
      throw DomainError.validation('cannot_be_before_started_at', '/project/due_at', 'due_at must be after today.');
    }
    if (finishedAt && this.startedAt && finishedAt < this.startedAt) {
      throw DomainError.validation('cannot_be_before_started_at', '/project/finished_at', 'finished_at cannot be before the project started.');
    }
    if (finishedAt && finishedAt > endOfDay(today)) {
      throw DomainError.validation('cannot_be_after_today', '/project/finished_at', 'finished_at cannot be after today.');
    }
    if (transition.countsAsStarted && (await ctx.startedProjects()) >= MAX_STARTED_PROJECTS) {
      throw DomainError.validation('reached_max_started', '/project/state', `At most ${MAX_STARTED_PROJECTS} projects can be started at the same time.`);
    }

    applyProjectTransition(this, transition, { now: ctx.now, dueAt, finishedAt });
    this.state = transition.to;
    return transition;
  }
}
ProjectSchema.setClass(Project);
