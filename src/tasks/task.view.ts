/** Presents tasks as SPEC.md 2.2 resources. */
import { toSeconds } from '../core/clock.js';
import type { Task } from './task.entity.js';
import type { TaskResource } from './task.schema.js';

export function presentTask(task: Task): TaskResource {
  return {
    type: 'task',
    id: task.id,
    attributes: {
      label: task.label,
      order: task.order,
      plannedCount: task.plannedCount,
      state: task.state,
      startedAt: toSeconds(task.startedAt),
      plannedAt: toSeconds(task.plannedAt),
      finishedAt: toSeconds(task.finishedAt),
      abandonedAt: toSeconds(task.abandonedAt),
    },
    relationships: {
      user: { data: { type: 'user', id: task.userId } },
      project: { data: task.projectId === null || task.projectId === undefined ? null : { type: 'project', id: task.projectId } },
    },
  };
}
