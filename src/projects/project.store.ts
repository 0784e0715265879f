/**
 * Projects read as plain rows, each with the ids of its listed tasks (not abandoned, by
 * order): a page of the list with its total, or projects by id, each in one statement.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { z } from 'zod';
import { fromSeconds } from '../core/clock.js';
import { Conditions, LIST_VERSION, containsPattern, foldedText, idArray, pageLimit, secondsOf, textArray } from '../db/sql-fragments.js';
import { sortOf, type Sort } from '../core/list-query.js';
import { execute } from '../db/prepared.js';
import { listedTaskIdsOf } from '../tasks/task.sql.js';
import type { ListProjectsInput, PROJECT_SORTS } from './project.schema.js';
import type { ProjectFields } from './project.view.js';

type StoredProject = ProjectFields & { version: number };

/**
 * A project's columns as its fields (`StoredProject`, named so), its listed tasks' ids last: their
 * user is the statement's first value (`?`).
 */
const PROJECT_COLUMNS = (p: string) =>
  `${p}.id, ${p}.user_id as "userId", ${p}.name, ${p}.slug, ${p}.description, ${p}.state, ${p}.version,
   ${secondsOf(`${p}.started_at`)} as "startedAt", ${secondsOf(`${p}.due_at`)} as "dueAt",
   ${secondsOf(`${p}.paused_at`)} as "pausedAt", ${secondsOf(`${p}.finished_at`)} as "finishedAt",
   ${listedTaskIdsOf(p, '?')} as "taskIds"`;

type ProjectSortAttribute = (typeof PROJECT_SORTS)[number];

/** Each sort as an expression over a `projects` row: unset dates are 0 as presented, names in code point order. */
const PROJECT_SORT_KEYS: Record<Exclude<ProjectSortAttribute, 'id'>, (p: string) => string> = {
  name: (p) => `${p}.name collate "C"`,
  dueAt: (p) => `coalesce(${p}.due_at, 'epoch'::timestamptz)`,
  startedAt: (p) => `coalesce(${p}.started_at, 'epoch'::timestamptz)`,
};

function projectOrderBy(sort: Sort<ProjectSortAttribute>, p: string): string {
  const direction = sort.descending ? ' desc' : '';
  return sort.attribute === 'id' ? `${p}.id${direction}` : `${PROJECT_SORT_KEYS[sort.attribute](p)}${direction}, ${p}.id`;
}

/**
 * One page of the user's projects, as the list's query (API-CONTRACT.md §12) keeps and sorts them, and
 * their total, in one statement. A user's projects are few (hundreds): a filter or a sort reads them all.
 * The list without a query is prepared; one with a query is planned for its values.
 */
export async function listProjects(
  em: SqlEntityManager, userId: number, limit: number, offset: number, query: z.infer<typeof ListProjectsInput>,
): Promise<{ projects: StoredProject[]; total: number; seq: string }> {
  const sort = sortOf(query.sort, 'id');
  const where = new Conditions().add('projects.user_id = ?', userId);
  if (query.state) where.add('projects.state = any(?::text[])', textArray(query.state));
  if (query.q !== undefined) where.add(`${foldedText('projects.name')} like ${foldedText('?::text')}`, containsPattern(query.q));
  // A dueAt of 0 reads as unset: it never matches, as an unset one does not.
  if (query.due_after !== undefined || query.due_before !== undefined) where.add("projects.due_at > 'epoch'::timestamptz");
  if (query.due_after !== undefined) where.add('projects.due_at >= ?', fromSeconds(query.due_after));
  if (query.due_before !== undefined) where.add('projects.due_at < ?', fromSeconds(query.due_before));
  const sql = `select c.total, c.seq, ${PROJECT_COLUMNS('p')}
       from (select count(*)::int as total, ${LIST_VERSION} as seq from projects where ${where.sql}) as c
       left join lateral (
         select * from projects where ${where.sql} order by ${projectOrderBy(sort, 'projects')} limit ${pageLimit(limit)} offset ?
       ) as p on true
      order by ${projectOrderBy(sort, 'p')}`;
  const params = [userId, userId, ...where.params, ...where.params, offset];
  const plain = where.parts.length === 1 && sort.attribute === 'id' && !sort.descending;
  type Row = StoredProject & { total: number; seq: string };
  const rows = plain ? await execute<Row>(em, sql, params) : await em.execute<Row[]>(sql, params);
  // An empty page is one row carrying the total and the version, with no project.
  const projects = rows.filter((row) => row.id !== null).map(({ total: _, seq: __, ...project }) => project);
  return { projects, total: Number(rows[0]!.total), seq: rows[0]!.seq };
}

/** The user's projects with these ids. */
export async function projectsByIds(em: SqlEntityManager, userId: number, ids: readonly number[]): Promise<StoredProject[]> {
  if (ids.length === 0) return [];
  const sql = `select ${PROJECT_COLUMNS('p')} from projects p where p.user_id = ? and p.id = any(?::bigint[])`;
  return execute<StoredProject>(em, sql, [userId, userId, idArray(ids)]);
}

/** At most `limit` of the user's projects whose id is above `after`, by id: a keyset page of the account's export. */
export async function projectsAfter(em: SqlEntityManager, userId: number, after: number, limit: number): Promise<StoredProject[]> {
  const sql = `select ${PROJECT_COLUMNS('p')} from projects p where p.user_id = ? and p.id > ? order by p.id limit ${pageLimit(limit)}`;
  return execute<StoredProject>(em, sql, [userId, userId, after]);
}
