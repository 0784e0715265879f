/**
 * Presents tasks as SPEC.md 2.2 resources, in TypeScript (`presentTaskFields`) and in SQL (`taskDocumentSql`,
 * for events and write answers): the same shape, member for member and in the same order; change them
 * together (test/rules/tasks-document.test.ts compares them on every state).
 */
import { secondsOf } from '../db/sql-fragments.js';
import type { TaskResource } from './task.schema.js';

/** What a task resource shows (its attributes, timestamps in whole seconds, 0 when unset), flat. */
export type TaskFields = { id: number; userId: number; projectId: number | null } & TaskResource['attributes'];

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
