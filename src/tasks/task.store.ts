/**
 * Set-based task statements: order assignment and shifting, the effect of a project's
 * state change or deletion on its tasks, and the task ids listed on projects. Each is one
 * SQL statement whatever the number of tasks. Those that write run inside a user's write
 * (src/writes/user-write.ts), under the owner's lock; the state effects come from the
 * actions of task.lifecycle.ts, never written out here. Every statement names the user
 * (`user_id`): tasks are keyed by (user_id, id) (src/db/data-layout.ts).
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { TaskFields } from './task.view.js';
import { Conditions, containsPattern, foldedText, idArray, pageLimit, textArray } from '../db/sql-fragments.js';
import type { Sort } from '../core/list-query.js';
import { MAX_ID } from '../core/fields.js';
import { LISTED, TASK_COLUMNS, presentedTaskColumns } from './task.sql.js';
import { execute } from '../db/prepared.js';

/** One of the user's tasks as presented, with its version; null when the user has none with this id. */
export async function ownedTask(em: SqlEntityManager, userId: number, id: number): Promise<(TaskFields & { version: number }) | null> {
  const [row] = await execute(em, `select ${presentedTaskColumns('t')} from tasks t where t.id = ? and t.user_id = ?`, [id, userId]);
  return row ? presentedTaskOf(row) : null;
}

/** A row of `presentedTaskColumns` as fields, with the version. */
export function presentedTaskOf(row: Record<string, unknown>): TaskFields & { version: number } {
  const listed = row as unknown as ListedTaskRow & { version: number };
  return { ...taskFieldsOf(listed), version: listed.version };
}

/**
 * At most `limit` of the user's tasks whose id is above `after`, by id, listed or not (abandoned,
 * finished long ago): a keyset page of the account's export (src/users/export-account.ts),
 * through the primary key (user_id, id).
 */
export async function tasksAfter(em: SqlEntityManager, userId: number, after: number, limit: number): Promise<TaskFields[]> {
  const rows = await execute<ListedTaskRow>(
    em,
    `select ${TASK_COLUMNS('t')} from tasks t where t.user_id = ? and t.id > ? order by t.id limit ${pageLimit(limit)}`,
    [userId, after],
  );
  return rows.map(taskFieldsOf);
}

interface ListedTaskRow {
  total?: number;
  id: number;
  user_id: number;
  project_id: number | null;
  label: string;
  order: number;
  planned_count: number;
  state: TaskFields['state'];
  started_at: number;
  planned_at: number;
  finished_at: number;
  abandoned_at: number;
}

function taskFieldsOf(row: ListedTaskRow): TaskFields {
  return {
    id: row.id,
    userId: row.user_id,
    projectId: row.project_id,
    label: row.label,
    order: row.order,
    plannedCount: row.planned_count,
    state: row.state,
    startedAt: row.started_at,
    plannedAt: row.planned_at,
    finishedAt: row.finished_at,
    abandonedAt: row.abandoned_at,
  };
}

export interface TaskListPage {
  tasks: TaskFields[];
  /** Listed tasks in all pages. */
  total: number;
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

export type TaskSortAttribute = 'order' | 'id' | 'label' | 'startedAt' | 'plannedAt' | 'finishedAt';

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

const BY_ORDER_SORT: Sort<TaskSortAttribute> = { attribute: 'order', descending: false };

/** Whether the selection keeps every listed task (only the 14-day window applies). */
const keepsAll = (s: TaskSelection) =>
  s.states === undefined && s.projectIds === undefined && !s.loose && s.q === undefined && s.plannedFrom === undefined && s.plannedUntil === undefined;

/**
 * One page of a user's listed tasks (SPEC.md 4.6: not abandoned, not finished before
 * `finishedSince`), as the selection keeps and sorts them, and how many it keeps in all: one
 * statement that reads plain rows.
 *
 * Every listed task, by order (the list without a query): the total is the user's open tasks
 * (the counter on the user's row, `users.open_tasks`) plus the finished ones since
 * `finishedSince` (an index range), so the user's tasks finished long ago,
 * most of them in time, cost nothing. The page's ids come from the
 * (user_id, order, id) index alone, which also carries the filtered columns: a deep page skips
 * the tasks before it without reading them (still O(offset), but index entries only); then its
 * rows are read by id. This statement is prepared.
 *
 * A selection or another sort: the same statement with the selection's conditions, counted by
 * `count(*)` over the rows they keep, which the indexes of each condition find
 * (src/db/migrations/Migration20261127000000_time_zones_and_list_indexes.ts; bench/README.md
 * "Filtered lists" has the plans and what they cost at 100,000 tasks). It is planned for its
 * values each time (a generic plan would not know that one project holds 50 tasks and one
 * state 90,000), so it is not prepared.
 */
export async function listTasks(
  em: SqlEntityManager,
  userId: number,
  selection: TaskSelection,
  limit: number,
  offset: number,
  sort: Sort<TaskSortAttribute> = BY_ORDER_SORT,
): Promise<TaskListPage> {
  const { sql, params, prepare } = taskPageStatement(userId, selection, limit, offset, sort);
  const rows = prepare ? await execute<ListedTaskRow>(em, sql, params) : await em.execute<ListedTaskRow[]>(sql, params);
  // An empty page is one row carrying the total, with no task.
  const tasks = rows.filter((row) => row.id !== null).map(taskFieldsOf);
  return { tasks, total: Number(rows[0]?.total ?? 0) };
}

/**
 * The statement of `listTasks`: its text, values, and whether it is prepared.
 *
 * The page's rows are read by id through a LATERAL lookup that cannot be pulled up into a
 * join (its `limit 1`): one primary-key lookup per id of the page, whatever the planner
 * guesses of the user's size. Joined as a plain join (`join tasks on tasks.user_id = ? and
 * tasks.id = page.id`), a generic plan (the prepared statement's, once PostgreSQL settles on
 * one, as it does where the user is one of many) guessed a few dozen rows per user and
 * hash-joined the page with every task of the user: 174 ms of 258 for page 1 of a user with
 * 100,000 tasks, against 0.35 ms this way (test/http/tasks-list-plan.test.ts).
 */
export function taskPageStatement(
  userId: number,
  selection: TaskSelection,
  limit: number,
  offset: number,
  sort: Sort<TaskSortAttribute> = BY_ORDER_SORT,
): { sql: string; params: unknown[]; prepare: boolean } {
  const where = new Conditions().add('tasks.user_id = ?', userId).add(LISTED('tasks'));
  if (!selection.states) {
    where.add("(tasks.state <> 'finished' or tasks.finished_at >= ?)", selection.finishedSince);
  } else {
    // The window only concerns finished tasks: written per state, each state's index is seen
    // to hold what it asks for (one state as an equality; finished ones by the range of
    // `tasks_finished_index`), where one OR over all states made PostgreSQL read the table.
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
  // On the expression `tasks_planned_at_index` holds (and sort=plannedAt reads), with the
  // unset ones left out: an unset plannedAt never matches, nor one of 0, which reads as unset.
  if (selection.plannedFrom || selection.plannedUntil) where.add("tasks.planned_at > 'epoch'::timestamptz");
  if (selection.plannedFrom) where.add(`${PLANNED_AT('tasks')} >= ?`, selection.plannedFrom);
  if (selection.plannedUntil) where.add(`${PLANNED_AT('tasks')} < ?`, selection.plannedUntil);

  const all = keepsAll(selection);
  const total = all
    ? `((select open_tasks from users where id = ?)
        + (select count(*) from tasks where user_id = ? and state = 'finished' and finished_at >= ?))::int`
    : `(select count(*) from tasks where ${where.sql})::int`;
  const totalParams = all ? [userId, userId, selection.finishedSince] : where.params;
  const sql = `select c.total, ${TASK_COLUMNS('t')}
       from (select ${total} as total) as c
       left join lateral (
         select one.* from (
           select tasks.id from tasks
            where ${where.sql}
            order by ${taskOrderBy(sort, 'tasks')}
            limit ${pageLimit(limit)} offset ?
         ) as page cross join lateral (select tasks.* from tasks where tasks.user_id = ? and tasks.id = page.id limit 1) as one
       ) as t on true
      order by ${taskOrderBy(sort, 't')}`;
  const params = [...totalParams, ...where.params, offset, userId];
  const byOrder = sort.attribute === 'order' && !sort.descending;
  return { sql, params, prepare: all && byOrder };
}
