/**
 * Presents projects as SPEC.md 2.1 resources, from fields in TypeScript and from a row in SQL (the
 * events of writes): the same shape, member for member; change them together (test/rules/projects-document.test.ts).
 */
import { secondsOf } from '../db/sql-fragments.js';
import { PROJECT_STATES, isInProgress } from './project.lifecycle.js';
import type { ProjectResource } from './project.schema.js';

type Attributes = Omit<ProjectResource['attributes'], 'isInProgress'>;
/** What a project resource shows (timestamps in seconds, 0 when unset); `taskIds`: its tasks not abandoned, by order. */
export type ProjectFields = Attributes & { id: number; userId: number; taskIds: readonly number[] };

export function presentProjectFields(project: ProjectFields): ProjectResource {
  const { name, slug, description, state, startedAt, dueAt, pausedAt, finishedAt } = project;
  return {
    type: 'project',
    id: project.id,
    attributes: { name, slug, description, state, startedAt, dueAt, pausedAt, finishedAt, isInProgress: isInProgress(state) },
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
 * the tasks of `taskIds` (an int[] expression). Written as one text and read as JSON once: each
 * `json_build_object` around a JSON value copies it again, and a task list can be hundreds of KB.
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
