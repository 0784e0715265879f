/**
 * The reads of tasks: one task, a keyset page for the account's export, a page of the user's list.
 * Every statement names the user: tasks are keyed by (user_id, id) (src/db/data-layout.ts).
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { TaskFields } from './task.view.js';
import { Conditions, LIST_VERSION, containsPattern, foldedText, idArray, pageLimit, textArray } from '../db/sql-fragments.js';
import type { Sort } from '../core/list-query.js';
import { MAX_ID } from '../core/fields.js';
import type { TASK_SORTS } from './task.schema.js';
import { LISTED, TASK_COLUMNS, presentedTaskColumns } from './task.sql.js';
import { execute } from '../db/prepared.js';

/** One of the user's tasks as presented, with its version; null when the user has none with this id. */
export async function ownedTask(em: SqlEntityManager, userId: number, id: number): Promise<(TaskFields & { version: number }) | null> {
  const sql = `select ${presentedTaskColumns('t')} from tasks t where t.id = ? and t.user_id = ?`;
  const [row] = await execute<TaskFields & { version: number }>(em, sql, [id, userId]);
  return row ?? null;
}

/** At most `limit` of the user's tasks above id `after`, by id, listed or not: a keyset page of the account's export. */
export async function tasksAfter(em: SqlEntityManager, userId: number, after: number, limit: number): Promise<TaskFields[]> {
  const sql = `select ${TASK_COLUMNS('t')} from tasks t where t.user_id = ? and t.id > ? order by t.id limit ${pageLimit(limit)}`;
  return execute<TaskFields>(em, sql, [userId, after]);
}

/** What a task list keeps (API-CONTRACT.md §12), as instants and values; absent members keep everything. */
export interface TaskSelection {
  /** SPEC.md 4.6: finished tasks are listed from this instant on (the start of the day 14 days ago). */
  finishedSince: Date;
  states?: readonly string[];
  /** Tasks of these projects; `loose` adds the tasks of no project. */
  projectIds?: readonly number[];
  loose?: boolean;
  /** A substring of the label, compared in Unicode lower case. */
  q?: string;
  /** plannedAt >= plannedFrom and < plannedUntil. */
  plannedFrom?: Date;
  plannedUntil?: Date;
}

export type TaskSortAttribute = (typeof TASK_SORTS)[number];

/** plannedAt as presented (unset is 0), the expression `tasks_planned_at_index` holds. */
const PLANNED_AT = (t: string) => `coalesce(${t}.planned_at, 'epoch'::timestamptz)`;

/** Each sort as an expression over a `tasks` row: unset dates are 0 as presented, labels in code point order. */
const TASK_SORT_KEYS: Record<TaskSortAttribute, (t: string) => string> = {
  order: (t) => `${t}."order"`,
  id: (t) => `${t}.id`,
  label: (t) => `${t}.label collate "C"`,
  startedAt: (t) => `coalesce(${t}.started_at, 'epoch'::timestamptz)`,
  plannedAt: PLANNED_AT,
  finishedAt: (t) => `coalesce(${t}.finished_at, 'epoch'::timestamptz)`,
};

/** ORDER BY of a sort over `t`: the attribute, then the id ascending. */
function taskOrderBy(sort: Sort<TaskSortAttribute>, t: string): string {
  const direction = sort.descending ? ' desc' : '';
  return sort.attribute === 'id' ? `${t}.id${direction}` : `${TASK_SORT_KEYS[sort.attribute](t)}${direction}, ${t}.id`;
}

/** A page of the user's listed tasks (SPEC.md 4.6) as the selection keeps and sorts them, and how many it keeps in all. */
export async function listTasks(
  em: SqlEntityManager,
  ...page: Parameters<typeof taskPageStatement>
): Promise<{ tasks: TaskFields[]; total: number; seq: string }> {
  const { sql, params, prepare } = taskPageStatement(...page);
  type Row = TaskFields & { total: number; seq: string };
  const rows = prepare ? await execute<Row>(em, sql, params) : await em.execute<Row[]>(sql, params);
  // An empty page is one row carrying the total and the version, with no task.
  const tasks = rows.filter((row) => row.id !== null).map(({ total: _, seq: __, ...task }) => task);
  return { tasks, total: Number(rows[0]!.total), seq: rows[0]!.seq };
}

/**
 * The statement of `listTasks`, and whether it is prepared. The page's ids come from an index alone;
 * its rows are read by id in a LATERAL whose `limit 1` keeps a generic plan from hash-joining every
 * task of the user (test/http/tasks-list-plan.test.ts). With no filter the total is `users.open_tasks`
 * plus the tasks finished since `finishedSince`, and by order it is prepared; otherwise it counts and is
 * planned for its values each time (plans: bench/README.md "Filtered lists"; indexes and why:
 * src/db/migrations/Migration20261127000000_time_zones_and_list_indexes.ts).
 */
export function taskPageStatement(
  userId: number,
  selection: TaskSelection,
  limit: number,
  offset: number,
  sort: Sort<TaskSortAttribute> = { attribute: 'order', descending: false },
): { sql: string; params: unknown[]; prepare: boolean } {
  const where = new Conditions().add('tasks.user_id = ?', userId).add(LISTED('tasks'));
  if (!selection.states) {
    where.add("(tasks.state <> 'finished' or tasks.finished_at >= ?)", selection.finishedSince);
  } else {
    // Per state, so that each state's index is seen to hold what it asks for (the window by the range
    // of `tasks_finished_index`): one OR over all states made PostgreSQL read the table.
    const open = selection.states.filter((state) => state !== 'finished');
    const arms: Array<{ sql: string; params: unknown[] }> = [];
    if (open.length === 1) arms.push({ sql: 'tasks.state = ?', params: [open[0]] });
    else if (open.length > 1) arms.push({ sql: 'tasks.state = any(?::text[])', params: [textArray(open)] });
    if (selection.states.includes('finished')) arms.push({ sql: "(tasks.state = 'finished' and tasks.finished_at >= ?)", params: [selection.finishedSince] });
    where.add(arms.length === 1 ? arms[0]!.sql : `(${arms.map((a) => a.sql).join(' or ')})`, ...arms.flatMap((a) => a.params));
  }
  if (selection.projectIds || selection.loose) {
    // An id beyond every id (ids are PostgreSQL integers) is no project of the user's: it matches nothing.
    const projectIds = (selection.projectIds ?? []).filter((id) => id <= MAX_ID);
    const ids = projectIds.length ? 'tasks.project_id = any(?::bigint[])' : undefined;
    if (ids && selection.loose) where.add(`(${ids} or tasks.project_id is null)`, idArray(projectIds));
    else if (ids) where.add(ids, idArray(projectIds));
    else if (selection.loose) where.add('tasks.project_id is null');
    else where.add('false');
  }
  if (selection.q !== undefined) where.add(`${foldedText('tasks.label')} like ${foldedText('?::text')}`, containsPattern(selection.q));
  // On `tasks_planned_at_index`'s expression; an unset plannedAt never matches, nor one of 0 (read as unset).
  if (selection.plannedFrom || selection.plannedUntil) where.add("tasks.planned_at > 'epoch'::timestamptz");
  if (selection.plannedFrom) where.add(`${PLANNED_AT('tasks')} >= ?`, selection.plannedFrom);
  if (selection.plannedUntil) where.add(`${PLANNED_AT('tasks')} < ?`, selection.plannedUntil);

  const all = selection.states === undefined && selection.projectIds === undefined && !selection.loose && selection.q === undefined
    && selection.plannedFrom === undefined && selection.plannedUntil === undefined;
  const total = all
    ? `((select open_tasks from users where id = ?)
        + (select count(*) from tasks where user_id = ? and state = 'finished' and finished_at >= ?))::int`
    : `(select count(*) from tasks where ${where.sql})::int`;
  const totalParams = all ? [userId, userId, selection.finishedSince] : where.params;
  const sql = `select c.total, c.seq, ${TASK_COLUMNS('t')}
       from (select ${total} as total, ${LIST_VERSION} as seq) as c
       left join lateral (
         select one.* from (
           select tasks.id from tasks
            where ${where.sql}
            order by ${taskOrderBy(sort, 'tasks')}
            limit ${pageLimit(limit)} offset ?
         ) as page cross join lateral (select tasks.* from tasks where tasks.user_id = ? and tasks.id = page.id limit 1) as one
       ) as t on true
      order by ${taskOrderBy(sort, 't')}`;
  const params = [...totalParams, userId, ...where.params, offset, userId];
  const byOrder = sort.attribute === 'order' && !sort.descending;
  return { sql, params, prepare: all && byOrder };
}
