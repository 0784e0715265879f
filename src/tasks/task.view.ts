/**
 * Presents tasks as SPEC.md 2.2 resources: from fields in TypeScript (`presentTaskFields`), and
 * from a row in SQL (`taskDocumentSql`: the change log's event and the answer of a write made
 * in one statement). The two are the same shape, member for member and in the same order;
 * change them together (test/rules/tasks-document.test.ts compares them on every state).
 */
import { toSeconds } from '../core/clock.js';
import { secondsOf } from '../db/sql-fragments.js';
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

/** `presentTaskFields` in SQL: the JSON document of the `tasks` row aliased `t`. */
export function taskDocumentSql(t: string): string {
  return `json_build_object(
    'type', 'task',
    'id', ${t}.id,
    'attributes', json_build_object(
      'label', ${t}.label,
      'order', ${t}."order",
      'plannedCount', ${t}.planned_count,
      'state', ${t}.state,
      'startedAt', ${secondsOf(`${t}.started_at`)}::bigint,
      'plannedAt', ${secondsOf(`${t}.planned_at`)}::bigint,
      'finishedAt', ${secondsOf(`${t}.finished_at`)}::bigint,
      'abandonedAt', ${secondsOf(`${t}.abandoned_at`)}::bigint),
    'relationships', json_build_object(
      'user', json_build_object('data', json_build_object('type', 'user', 'id', ${t}.user_id)),
      'project', json_build_object('data', case when ${t}.project_id is null then null
                                                else json_build_object('type', 'project', 'id', ${t}.project_id) end)))`;
}
