/**
 * Presents projects as SPEC.md 2.1 resources: from fields in TypeScript (`presentProjectFields`),
 * and from a row in SQL (`projectDocumentSql`: the change log's event of a write made in one
 * statement). The two are the same shape, member for member and in the same order; change them
 * together (test/rules/projects-document.test.ts compares them on every state).
 */
import { secondsOf } from '../db/sql-fragments.js';
import { PROJECT_STATES, isInProgress, type ProjectState } from './project.lifecycle.js';
import type { ProjectResource } from './project.schema.js';

/** What a project resource shows, timestamps in whole seconds (0 when unset). */
export interface ProjectFields {
  id: number;
  userId: number;
  name: string;
  slug: string;
  description: string;
  state: ProjectState;
  startedAt: number;
  dueAt: number;
  pausedAt: number;
  finishedAt: number;
  /** Its tasks that are not abandoned, by order. */
  taskIds: readonly number[];
}

export function presentProjectFields(project: ProjectFields): ProjectResource {
  return {
    type: 'project',
    id: project.id,
    attributes: {
      name: project.name,
      slug: project.slug,
      description: project.description,
      state: project.state,
      startedAt: project.startedAt,
      dueAt: project.dueAt,
      pausedAt: project.pausedAt,
      finishedAt: project.finishedAt,
      isInProgress: isInProgress(project.state),
    },
    relationships: {
      user: { data: { type: 'user', id: project.userId } },
      tasks: { data: project.taskIds.map((id) => ({ type: 'task' as const, id })) },
    },
  };
}

/** The states `isInProgress` holds for, as a SQL list. */
const IN_PROGRESS = PROJECT_STATES.filter(isInProgress).map((state) => `'${state}'`).join(', ');

/**
 * `presentProjectFields` in SQL: the JSON document of the `projects` row aliased `p`, listing
 * the tasks of `taskIds` (an int[] expression: its listed tasks, by order).
 */
export function projectDocumentSql(p: string, taskIds: string): string {
  return `json_build_object(
    'type', 'project',
    'id', ${p}.id,
    'attributes', json_build_object(
      'name', ${p}.name,
      'slug', ${p}.slug,
      'description', ${p}.description,
      'state', ${p}.state,
      'startedAt', ${secondsOf(`${p}.started_at`)}::bigint,
      'dueAt', ${secondsOf(`${p}.due_at`)}::bigint,
      'pausedAt', ${secondsOf(`${p}.paused_at`)}::bigint,
      'finishedAt', ${secondsOf(`${p}.finished_at`)}::bigint,
      'isInProgress', ${p}.state in (${IN_PROGRESS})),
    'relationships', json_build_object(
      'user', json_build_object('data', json_build_object('type', 'user', 'id', ${p}.user_id)),
      'tasks', json_build_object('data', (select ('[' || coalesce(string_agg('{"type":"task","id":' || task_id || '}', ',' order by ordinality), '') || ']')::json
                                           from unnest(${taskIds}) with ordinality as listed(task_id, ordinality)))))`;
}
