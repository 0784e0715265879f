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
 *
 * Written as one text and read as JSON once: the task list, which a project of thousands of
 * tasks makes hundreds of KB long, is joined as text (`array_to_string`), never held as a JSON
 * value inside another. Each `json_build_object` around a JSON value copies it again: nested
 * three deep, the document of a project of 5,000 tasks took 11 ms to write, against 6.4 this
 * way (pgbench, alternating, 2026-12-01).
 */
export function projectDocumentSql(p: string, taskIds: string): string {
  const attributes = `json_build_object(
      'name', ${p}.name,
      'slug', ${p}.slug,
      'description', ${p}.description,
      'state', ${p}.state,
      'startedAt', ${secondsOf(`${p}.started_at`)}::bigint,
      'dueAt', ${secondsOf(`${p}.due_at`)}::bigint,
      'pausedAt', ${secondsOf(`${p}.paused_at`)}::bigint,
      'finishedAt', ${secondsOf(`${p}.finished_at`)}::bigint,
      'isInProgress', ${p}.state in (${IN_PROGRESS}))`;
  const tasks = `(select case when cardinality(listed.ids) = 0 then ''
                   else '{"type":"task","id":' || array_to_string(listed.ids, '},{"type":"task","id":') || '}' end
              from (select ${taskIds} as ids) as listed)`;
  return `('{"type":"project","id":' || ${p}.id || ',"attributes":' || ${attributes}::text
    || ',"relationships":{"user":{"data":{"type":"user","id":' || ${p}.user_id || '}},"tasks":{"data":[' || ${tasks} || ']}}}')::json`;
}
