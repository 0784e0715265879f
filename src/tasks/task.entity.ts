/**
 * A task of one user: its state (whose rules are all in task.lifecycle.ts), its place among
 * the user's tasks (assigned by create-task.ts, shifted by reorder-task.ts) and its project.
 */
import { defineEntity, p } from '@mikro-orm/postgresql';
import { DomainError, pointerOf } from '../core/errors.js';
import { TASK_STATES, applyTaskAction, findTaskAction, projectSyncAction, type TaskAction } from './task.lifecycle.js';

export const TaskSchema = defineEntity({
  name: 'Task',
  tableName: 'tasks',
  // The table's key is (user_id, id), as the projects' (see project.entity.ts).
  properties: {
    id: p.integer().primary().autoincrement(),
    userId: p.integer().primary(),
    projectId: p.integer().nullable(),
    label: p.text(),
    order: p.integer(),
    plannedCount: p.integer().default(0),
    state: p.enum(TASK_STATES),
    startedAt: p.datetime().columnType('timestamptz').nullable(),
    plannedAt: p.datetime().columnType('timestamptz').nullable(),
    finishedAt: p.datetime().columnType('timestamptz').nullable(),
    abandonedAt: p.datetime().columnType('timestamptz').nullable(),
    createdAt: p.datetime().columnType('timestamptz'),
    /** Grows with every change of the row (ETag, If-Match); see the versions migration. */
    version: p.integer().version(),
  },
});

export class Task extends TaskSchema.class {
  /** Applies a state-change request (SPEC.md 3.2): `invalid_transition` first, then `cannot_be_set` for any other member. */
  changeState(request: { state: string; [other: string]: unknown }, now: Date): TaskAction {
    const action = findTaskAction(this.state, request.state);
    if (!action) throw DomainError.validation('invalid_transition', '/task/state', `${this.state === 'abandoned' ? 'An' : 'A'} ${this.state} task cannot become ${request.state}.`);
    const member = Object.keys(request).find((m) => m !== 'state');
    if (member !== undefined) {
      throw DomainError.validation('cannot_be_set', pointerOf(['task', member]), `${member} cannot be set when changing the state.`);
    }
    applyTaskAction(this, action, now);
    return action;
  }

  /** Links the task to another project (or none); its state follows (`projectSyncAction`). */
  moveToProject(project: { id: number; started: boolean } | null, now: Date): void {
    this.projectId = project?.id ?? null;
    const action = projectSyncAction(this.state, project);
    if (action) applyTaskAction(this, action, now);
  }
}
TaskSchema.setClass(Task);
