/**
 * Projects read as plain rows, each with the ids of its listed tasks (not abandoned, by
 * order): a page of the list with its total, or projects by id, each in one statement.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { Conditions, containsPattern, foldedText, idArray, pageLimit, secondsOf, textArray } from '../db/sql-fragments.js';
import type { Sort } from '../core/list-query.js';
import { execute } from '../db/prepared.js';
import { listedTaskIdsOf } from '../tasks/task.sql.js';
import type { ProjectFields } from './project.view.js';

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

/** A project's columns as presented, its listed tasks' ids last: their user is the statement's first value (`?`). */
const PROJECT_COLUMNS = (p: string) =>
  `${p}.id, ${p}.user_id, ${p}.name, ${p}.slug, ${p}.description, ${p}.state, ${p}.version,
   ${secondsOf(`${p}.started_at`)} as started_at, ${secondsOf(`${p}.due_at`)} as due_at,
   ${secondsOf(`${p}.paused_at`)} as paused_at, ${secondsOf(`${p}.finished_at`)} as finished_at,
   ${listedTaskIdsOf(p, '?')} as task_ids`;

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

/** What a project list keeps (API-CONTRACT.md §12); absent members keep everything. */
export interface ProjectSelection {
  states?: readonly string[];
  /** A substring of the name, compared in Unicode lower case. */
  q?: string;
  /** dueAt >= dueFrom and < dueUntil. */
  dueFrom?: Date;
  dueUntil?: Date;
}

export type ProjectSortAttribute = 'id' | 'name' | 'dueAt' | 'startedAt';

/** Each sort as an expression over a `projects` row: unset dates are 0 as presented, names in code point order. */
const PROJECT_SORT_KEYS: Record<ProjectSortAttribute, (p: string) => string> = {
  id: (p) => `${p}.id`,
  name: (p) => `${p}.name collate "C"`,
  dueAt: (p) => `coalesce(${p}.due_at, 'epoch'::timestamptz)`,
  startedAt: (p) => `coalesce(${p}.started_at, 'epoch'::timestamptz)`,
};

function projectOrderBy(sort: Sort<ProjectSortAttribute>, p: string): string {
  const direction = sort.descending ? ' desc' : '';
  return sort.attribute === 'id' ? `${p}.id${direction}` : `${PROJECT_SORT_KEYS[sort.attribute](p)}${direction}, ${p}.id`;
}

const BY_ID: Sort<ProjectSortAttribute> = { attribute: 'id', descending: false };

/**
 * One page of the user's projects, as the selection keeps and sorts them (by id by default),
 * and how many it keeps in all, in one statement. A user's projects are few (hundreds, where
 * tasks are thousands): the primary key (user_id, id) finds them all, and a filter or another
 * sort reads them all. The list without a query is prepared; one with a query is planned for
 * its values.
 */
export async function listProjects(
  em: SqlEntityManager,
  userId: number,
  limit: number,
  offset: number,
  selection: ProjectSelection = {},
  sort: Sort<ProjectSortAttribute> = BY_ID,
): Promise<{ projects: Array<ProjectFields & { version: number }>; total: number }> {
  const where = new Conditions().add('projects.user_id = ?', userId);
  if (selection.states) where.add('projects.state = any(?::text[])', textArray(selection.states));
  if (selection.q !== undefined) where.add(`${foldedText('projects.name')} like ${foldedText('?::text')}`, containsPattern(selection.q));
  // A dueAt of 0 reads as unset: it never matches, as an unset one does not.
  if (selection.dueFrom || selection.dueUntil) where.add("projects.due_at > 'epoch'::timestamptz");
  if (selection.dueFrom) where.add('projects.due_at >= ?', selection.dueFrom);
  if (selection.dueUntil) where.add('projects.due_at < ?', selection.dueUntil);
  const sql = `select c.total, ${PROJECT_COLUMNS('p')}
       from (select count(*)::int as total from projects where ${where.sql}) as c
       left join lateral (
         select * from projects where ${where.sql} order by ${projectOrderBy(sort, 'projects')} limit ${pageLimit(limit)} offset ?
       ) as p on true
      order by ${projectOrderBy(sort, 'p')}`;
  const params = [userId, ...where.params, ...where.params, offset];
  const plain = where.parts.length === 1 && sort.attribute === 'id' && !sort.descending;
  const rows = plain ? await execute<ProjectRow>(em, sql, params) : await em.execute<ProjectRow[]>(sql, params);
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
  const rows = await execute<ProjectRow>(em, `select ${PROJECT_COLUMNS('p')} from projects p where p.user_id = ? and p.id = any(?::bigint[])`, [userId, userId, idArray(ids)]);
  return rows.map(fieldsOf);
}

/**
 * At most `limit` of the user's projects whose id is above `after`, by id: a keyset page of
 * the account's export (src/users/export-account.ts), through the primary key (user_id, id).
 */
export async function projectsAfter(
  em: SqlEntityManager,
  userId: number,
  after: number,
  limit: number,
): Promise<Array<ProjectFields & { version: number }>> {
  const sql = `select ${PROJECT_COLUMNS('p')} from projects p where p.user_id = ? and p.id > ? order by p.id limit ${pageLimit(limit)}`;
  return (await execute<ProjectRow>(em, sql, [userId, userId, after])).map(fieldsOf);
}
