/**
 * Projects read as plain rows, each with the ids of its listed tasks (not abandoned, by
 * order): a page of the list with its total, or projects by id, each in one statement.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { idArray, pageLimit, secondsOf } from '../db/sql-fragments.js';
import { execute } from '../db/prepared.js';
import { listedTaskIdsOf } from '../tasks/task.sql.js';
import { projectEtag } from '../core/conditional.js';
import type { ResourceReader } from '../core/resource.js';
import { presentProjectFields, type ProjectFields } from './project.view.js';

interface ProjectRow {
  total?: number;
  id: number;
  user_id: number;
  name: string;
  slug: string;
  description: string;
  state: ProjectFields['state'];
  started_at: number;
  due_at: number;
  paused_at: number;
  finished_at: number;
  version: number;
  task_ids: number[];
}

const PROJECT_COLUMNS = (p: string) =>
  `${p}.id, ${p}.user_id, ${p}.name, ${p}.slug, ${p}.description, ${p}.state, ${p}.version,
   ${secondsOf(`${p}.started_at`)} as started_at, ${secondsOf(`${p}.due_at`)} as due_at,
   ${secondsOf(`${p}.paused_at`)} as paused_at, ${secondsOf(`${p}.finished_at`)} as finished_at,
   ${listedTaskIdsOf(p)} as task_ids`;

function fieldsOf(row: ProjectRow): ProjectFields & { version: number } {
  return {
    id: row.id,
    userId: row.user_id,
    name: row.name,
    slug: row.slug,
    description: row.description,
    state: row.state,
    startedAt: row.started_at,
    dueAt: row.due_at,
    pausedAt: row.paused_at,
    finishedAt: row.finished_at,
    taskIds: row.task_ids,
    version: row.version,
  };
}

/** One page of the user's projects by id, and how many there are in all. */
export async function listProjects(
  em: SqlEntityManager,
  userId: number,
  limit: number,
  offset: number,
): Promise<{ projects: Array<ProjectFields & { version: number }>; total: number }> {
  const rows = await execute<ProjectRow>(
    em,
    `select c.total, ${PROJECT_COLUMNS('p')}
       from (select count(*)::int as total from projects where user_id = ?) as c
       left join lateral (select * from projects where user_id = ? order by id limit ${pageLimit(limit)} offset ?) as p on true
      order by p.id`,
    [userId, userId, offset],
  );
  // An empty page is one row carrying the total, with no project.
  return { projects: rows.filter((row) => row.id !== null).map(fieldsOf), total: Number(rows[0]?.total ?? 0) };
}

/** The user's projects with these ids. */
export async function projectsByIds(
  em: SqlEntityManager,
  userId: number,
  ids: readonly number[],
): Promise<Array<ProjectFields & { version: number }>> {
  if (ids.length === 0) return [];
  const rows = await execute<ProjectRow>(
    em,
    `select ${PROJECT_COLUMNS('p')} from projects p where p.user_id = ? and p.id = any(?::int[])`,
    [userId, idArray(ids)],
  );
  return rows.map(fieldsOf);
}

/** How the write path reads a project back (src/core/resource.ts): its document, its ETag. */
export const projectReader: ResourceReader = {
  async documents(em, userId, ids) {
    return new Map((await projectsByIds(em, userId, ids)).map((project) => [project.id, presentProjectFields(project)]));
  },
  async currentEtag(em, userId, id) {
    const [project] = await projectsByIds(em, userId, [id]);
    return project ? projectEtag(id, project.version, project.taskIds) : null;
  },
};
