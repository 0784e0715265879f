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

export function presentTask(task: Task): TaskResource {
  return presentTaskFields({
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
  });
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
