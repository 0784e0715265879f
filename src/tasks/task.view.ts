/** Presents tasks as SPEC.md 2.2 resources. */
import { toSeconds } from '../core/clock.js';
import type { Task } from './task.entity.js';
import type { TaskState } from './task.lifecycle.js';
import type { TaskResource } from './task.schema.js';

/** What a task resource shows, timestamps in whole seconds (0 when unset). */
export interface TaskFields {
  id: number;
  userId: number;
  projectId: number | null;
  label: string;
  order: number;
  plannedCount: number;
  state: TaskState;
  startedAt: number;
  plannedAt: number;
  finishedAt: number;
  abandonedAt: number;
}

/** A task's columns with its dates as Dates: the entity, or a row just inserted. */
export type TaskRecord = Pick<Task, 'id' | 'userId' | 'label' | 'order' | 'plannedCount' | 'state'> & {
  projectId?: number | null;
  startedAt?: Date | null;
  plannedAt?: Date | null;
  finishedAt?: Date | null;
  abandonedAt?: Date | null;
};

export function fieldsOf(task: TaskRecord): TaskFields {
  return {
    id: task.id,
    userId: task.userId,
    projectId: task.projectId ?? null,
    label: task.label,
    order: task.order,
    plannedCount: task.plannedCount,
    state: task.state,
    startedAt: toSeconds(task.startedAt),
    plannedAt: toSeconds(task.plannedAt),
    finishedAt: toSeconds(task.finishedAt),
    abandonedAt: toSeconds(task.abandonedAt),
  };
}

export function presentTask(task: Task): TaskResource {
  return presentTaskFields(fieldsOf(task));
}

export function presentTaskFields(task: TaskFields): TaskResource {
  return {
    type: 'task',
    id: task.id,
    attributes: {
      label: task.label,
      order: task.order,
      plannedCount: task.plannedCount,
      state: task.state,
      startedAt: task.startedAt,
      plannedAt: task.plannedAt,
      finishedAt: task.finishedAt,
      abandonedAt: task.abandonedAt,
    },
    relationships: {
      user: { data: { type: 'user', id: task.userId } },
      project: { data: task.projectId === null ? null : { type: 'project', id: task.projectId } },
    },
  };
}
