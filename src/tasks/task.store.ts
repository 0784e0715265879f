/**
 * Set-based task statements: order assignment and shifting, the effect of a project's
 * state change or deletion on its tasks, and the task ids listed on projects. Each is one
 * SQL statement whatever the number of tasks. Those that write run inside a user's write
 * (src/writes/user-write.ts), under the owner's lock; the state effects come from the
 * actions of task.lifecycle.ts, never written out here. Every statement names the user
 * (`user_id`): tasks are keyed by (user_id, id) (src/db/data-layout.ts).
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { taskAction, taskActionSql, taskTransitionSql, type ProjectTaskEffect, type TaskDates } from './task.lifecycle.js';
import { taskEtag } from '../core/conditional.js';
import type { ResourceReader } from '../core/resource.js';
import { presentTaskFields, taskDocumentSql, type TaskFields } from './task.view.js';
import { Conditions, containsPattern, foldedText, idArray, pageLimit, textArray } from '../db/sql-fragments.js';
import type { Sort } from '../core/list-query.js';
import { MAX_ID } from '../core/fields.js';
import { BY_ORDER, LISTED, TASK_COLUMNS, presentedTaskColumns } from './task.sql.js';
import { execute } from '../db/prepared.js';
import { bindUser, USER } from '../db/user-param.js';

/**
 * The version a task takes when a statement here changes it. The statements move it
 * themselves, as entity flushes do, so the `bump_version` row trigger (which does it for any
 * other UPDATE) is not called for each row: that is a PL/pgSQL call per row, 68 of them in an
 * average reorder. Every row these statements select changes (a state, an order, a project),
 * so the version moves exactly where the trigger would have moved it.
 */
const NEXT_VERSION = 'version = tasks.version + 1';

export interface NewTask extends TaskDates {
  userId: number;
  projectId: number | null;
  label: string;
  createdAt: Date;
}

/**
 * The order a new task of the user takes (SPEC.md 4.5: the end of the user's order), the one
 * place that says it. Read in the statement's snapshot: the caller holds the owner's lock since
 * an earlier statement, or guards the statement with FRESH (no write of the user landed between
 * its snapshot and the lock it takes).
 */
const NEXT_ORDER = `(select coalesce(max(o."order"), 0) + 1 from tasks o where o.user_id = ${USER})`;

/**
 * Inserts a task at the end of the user's order (`NEXT_ORDER`), in the caller's transaction,
 * which holds the owner's lock: the statement of `insertTaskSql`.
 * Its state and dates are those of `newTaskFields` (task.lifecycle.ts). Returns the task as
 * presented, with its version.
 */
export async function insertTask(em: SqlEntityManager, task: NewTask): Promise<TaskFields & { version: number }> {
  const { userId, ...fields } = task;
  return (await underHeldLock(em, userId, insertTaskSql(fields)))!;
}

/**
 * The insert of a new task as the `changed` part of a one-statement write
 * (src/writes/user-write.ts `OneStatement`): for `owner`, the owner's row that statement
 * locks first. `also` (FRESH in a statement that takes the lock) makes it insert nothing when
 * the statement's snapshot is older than the lock, since the order is read in it. Returns the
 * whole row.
 */
export function insertTaskSql(task: Omit<NewTask, 'userId'>, also?: string): { sql: string; params: unknown[] } {
  const params = [
    task.projectId, task.label, task.plannedCount, task.state,
    task.startedAt ?? null, task.plannedAt ?? null, task.finishedAt ?? null, task.abandonedAt ?? null, task.createdAt,
  ];
  return {
    sql: `insert into tasks (user_id, "order", project_id, label, planned_count, state, started_at, planned_at, finished_at, abandoned_at, created_at)
          select ${USER}, ${NEXT_ORDER}, ${params.map(() => '?').join(', ')} from owner${also ? ` where ${also}` : ''}
          returning *`,
    params,
  };
}

/**
 * The insert of a new task in a project, as the `changed` part of a one-statement write: over
 * `owner` and `project` (the project's row, read fresh: `projectRowSql`), its fields those
 * `fieldsOf` gives for the project's state (`newTaskFields`: a started project's task starts,
 * another's stays newed). No row when there is no such project.
 */
export function insertTaskInProjectSql(
  task: { label: string; createdAt: Date },
  fieldsOf: (project: { started: boolean }) => TaskDates,
  also?: string,
): { sql: string; params: unknown[] } {
  const started = fieldsOf({ started: true });
  const other = fieldsOf({ started: false });
  const params: unknown[] = [task.label];
  const value = (a: unknown, b: unknown, type: string) => {
    if (a === b || (a instanceof Date && b instanceof Date && a.getTime() === b.getTime())) {
      params.push(a);
      return `?::${type}`;
    }
    params.push(a, b);
    return `case when project.state = 'started' then ?::${type} else ?::${type} end`;
  };
  const columns = [
    value(started.plannedCount, other.plannedCount, 'int'), value(started.state, other.state, 'text'),
    ...(['startedAt', 'plannedAt', 'finishedAt', 'abandonedAt'] as const).map((date) => value(started[date] ?? null, other[date] ?? null, 'timestamptz')),
  ];
  params.push(task.createdAt);
  return {
    sql: `insert into tasks (user_id, "order", project_id, label, planned_count, state, started_at, planned_at, finished_at, abandoned_at, created_at)
          select ${USER}, ${NEXT_ORDER}, project.id, ?, ${columns.join(', ')}, ? from owner, project${also ? ` where ${also}` : ''}
          returning *`,
    params,
  };
}

/**
 * The CTE `project`: the owner's project `id`, its whole row, read with a share row lock so
 * that it is the newest version of the row even when the statement's snapshot is older than
 * the owner's lock: a lock that conflicts with the row's updates follows them to the newest
 * version. A key-share lock would not do: it does not conflict with an update that leaves the
 * key alone (a pause), and returns the version of the snapshot. Empty when the owner has no
 * such project (or one created after the snapshot: the transaction then decides).
 */
export function projectRowSql(id: number): { sql: string; params: unknown[] } {
  return {
    sql: `project as (select p.* from projects p where p.id = ? and p.user_id = ${USER} for share)`,
    params: [id],
  };
}

/**
 * The ids of project `project`'s listed tasks, by order, with the new task `changed` last:
 * read in the statement's snapshot (so under FRESH, or after the owner's lock), which does not
 * hold the row the statement itself inserts; it is removed all the same, should it ever.
 */
export const LISTED_WITH_NEW_TASK = `array_append(array_remove(array(
    select t.id from tasks t where t.user_id = ${USER} and t.project_id = project.id and ${LISTED('t')} order by ${BY_ORDER('t')}
  ), changed.id), changed.id)`;

/**
 * Runs the `changed` part of a one-statement write inside a transaction that already holds
 * the owner's lock (`owner` is then just the user's id), so both ways of a write send the same
 * change. Returns the changed task as presented, or null when nothing changed.
 */
async function underHeldLock(
  em: SqlEntityManager,
  userId: number,
  changed: { sql: string; params: unknown[] },
): Promise<(TaskFields & { version: number }) | null> {
  const statement = bindUser(
    `with owner as (select ?::bigint as id), changed as (${changed.sql}) select ${presentedTaskColumns('changed')} from changed`,
    [userId, ...changed.params],
    userId,
  );
  const [row] = await em.execute<Array<Record<string, unknown>>>(statement.sql, statement.params);
  return row ? presentedTaskOf(row) : null;
}

/**
 * A requested state change of one of the user's tasks, in one statement: the row changes only
 * when its current state has an action reaching `to` (task.lifecycle.ts `taskTransitionSql`),
 * and comes back as presented, with its new version (moved by the statement). Null when
 * nothing changed: no such task, or no action from its state (the caller tells which).
 */
export async function changeTaskStateUnderLock(
  em: SqlEntityManager,
  userId: number,
  taskId: number,
  to: string,
  now: Date,
): Promise<(TaskFields & { version: number }) | null> {
  const changed = taskStateChangeSql(taskId, to, now);
  return changed && underHeldLock(em, userId, changed);
}

/**
 * The same change as the `changed` part of a one-statement write (src/writes/user-write.ts
 * `OneStatement`): it reads `owner`, the owner's row that statement locks first, and returns
 * the whole row. Null when no action reaches `to`.
 */
export function taskStateChangeSql(taskId: number, to: string, now: Date, also?: string): { sql: string; params: unknown[] } | null {
  const transition = taskTransitionSql(to, now);
  if (!transition) return null;
  return {
    sql: `update tasks set ${transition.set}, ${NEXT_VERSION} from owner
           where tasks.id = ? and tasks.user_id = ${USER} and tasks.state in (${transition.from.map((state) => `'${state}'`).join(', ')})${also ? ` and ${also}` : ''}
          returning tasks.*`,
    params: [...transition.params, taskId],
  };
}

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

export interface OrderChange {
  id: number;
  order: number;
}

export interface TaskMove {
  /** Every changed task by order; just the task when it did not move. */
  changed: OrderChange[];
  /** The tasks that moved, as presented after the move (none when it did not move). */
  moved: TaskFields[];
}

/**
 * The CTEs of a move (API-CONTRACT.md §5), over `owner` (the owner's id; its lock held or taken
 * earlier in the statement): `target`, the task with its order and the order it moves to (the
 * request clamped to the user's highest order), and `moved`, the update of the whole span:
 * moving up pushes the tasks in [to, from) one place down, moving down pulls those in
 * (from, to] one place up. Their reads see the statement's snapshot: run after the lock, or
 * under `also` (FRESH). The (user_id, order) uniqueness is checked at the statement's end.
 */
/** Whether task row `t` is in the span a move (`target`) shifts: between its old place and its new one. */
const IN_SPAN = (t: string) => `${t}."order" between least(target.from_order, target.to_order) and greatest(target.from_order, target.to_order)`;

/** The order task row `t` of the span takes in the move: the moved task its new place, the others one place toward its old one. */
const SHIFTED = (t: string) =>
  `case when ${t}.id = target.id then target.to_order when target.to_order < target.from_order then ${t}."order" + 1 else ${t}."order" - 1 end`;

export function moveTaskCtes(taskId: number, requested: number, also?: string): { sql: string; params: unknown[] } {
  return {
    sql: `target as (
       select id, user_id, "order" as from_order,
              least(?::bigint, (select max(o."order") from tasks o where o.user_id = ${USER}))::int as to_order
         from tasks where id = ? and user_id = ${USER}${also ? ` and ${also}` : ''}
     ), moved as (
       update tasks set "order" = ${SHIFTED('tasks')}, ${NEXT_VERSION}
         from target
        where tasks.user_id = ${USER} and target.to_order <> target.from_order and ${IN_SPAN('tasks')}
       returning tasks.*
     )`,
    params: [requested, taskId],
  };
}

/**
 * Moves a task of the user to `requested` (`moveTaskCtes`), in one statement that also reads
 * the moved tasks back; the caller holds the owner's lock, taken by an earlier statement so
 * that this one's snapshot sees every order committed before the lock.
 *
 * Returns null when the user has no such task.
 */
export async function moveTask(em: SqlEntityManager, userId: number, taskId: number, requested: number): Promise<TaskMove | null> {
  const move = moveTaskCtes(taskId, requested);
  const statement = bindUser(
    `with owner as (select ?::bigint as id), ${move.sql}
     select id, "order", to_jsonb(m) as moved from (select ${TASK_COLUMNS('moved')} from moved) as m
     union all
     select id, from_order, null from target`,
    [userId, ...move.params],
    userId,
  );
  const rows = await em.execute<Array<OrderChange & { moved: ListedTaskRow | null }>>(statement.sql, statement.params);
  if (rows.length === 0) return null;
  const moved = rows.flatMap((r) => (r.moved ? [taskFieldsOf(r.moved)] : [])).sort((a, b) => a.order - b.order);
  const changed = (moved.length > 0 ? moved : rows).map((r) => ({ id: r.id, order: r.order })).sort((a, b) => a.order - b.order);
  return { changed, moved };
}

/**
 * The ids of the tasks project `p` lists, by order, after the move of `target` (which the
 * statement's other reads do not see): each task's order as the move leaves it, by the rule the
 * update applies (`SHIFTED` over `IN_SPAN`). Not read back from `moved`: a plan cached for
 * the statement, guessing `moved` small, scanned it once per listed task (24 ms for a span of
 * 51, 290 for 200), where nothing here depends on its size.
 */
export const listedTaskIdsAfterMove = (p: string) =>
  `array(select x.id from (
     select t.id, case when target.to_order <> target.from_order and ${IN_SPAN('t')} then ${SHIFTED('t')} else t."order" end as o
       from tasks t cross join target
      where t.user_id = ${USER} and t.project_id = ${p}.id and ${LISTED('t')}
   ) as x order by x.o, x.id)`;

/**
 * Applies a project's effect on its tasks (its start, restart or pause; its deletion, which
 * also detaches every task). Returns the tasks that changed, as presented after the change:
 * their change-log documents, from the rows the statement wrote, not read again.
 */
export async function applyToProjectTasks(
  em: SqlEntityManager,
  userId: number,
  projectId: number,
  effect: ProjectTaskEffect,
  now: Date,
  options: { detach?: boolean } = {},
): Promise<TaskFields[]> {
  const { set, params } = taskActionSql(taskAction(effect.action), now, effect.states);
  const statesList = `'{${effect.states.join(',')}}'`;
  // The rows come back whole (RETURNING of plain columns), presented by the select around it.
  const rows = await em.execute<ListedTaskRow[]>(
    options.detach
      ? `with changed as (update tasks set ${set}, project_id = null, ${NEXT_VERSION} where user_id = ? and project_id = ? returning tasks.*)
         select ${TASK_COLUMNS('changed')} from changed`
      : `with changed as (update tasks set ${set}, ${NEXT_VERSION} where user_id = ? and project_id = ? and state = any(${statesList}::text[]) returning tasks.*)
         select ${TASK_COLUMNS('changed')} from changed`,
    [...params, userId, projectId],
  );
  return rows.map(taskFieldsOf);
}

/** Ids of each of the user's projects' non-abandoned tasks, by order: one query for a whole page. */
export async function taskIdsOfProjects(
  em: SqlEntityManager,
  userId: number,
  projectIds: readonly number[],
): Promise<Map<number, number[]>> {
  const byProject = new Map<number, number[]>(projectIds.map((id) => [id, []]));
  if (projectIds.length === 0) return byProject;
  const rows = await em.execute<{ project_id: number; id: number }[]>(
    `select project_id, id from tasks
      where user_id = ? and project_id = any(?::bigint[]) and ${LISTED('tasks')}
      order by project_id, ${BY_ORDER('tasks')}`,
    [userId, idArray(projectIds)],
  );
  for (const row of rows) byProject.get(row.project_id)?.push(row.id);
  return byProject;
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
 * (counted in their own partial index, `tasks_open_by_user`, an index-only scan) plus the
 * finished ones since `finishedSince` (an index range), so the user's tasks finished long ago,
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
    ? `((select count(*) from tasks where user_id = ? and state not in ('abandoned', 'finished'))
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

/** The user's tasks with these ids, as presented. */
export async function tasksByIds(em: SqlEntityManager, userId: number, ids: readonly number[]): Promise<TaskFields[]> {
  if (ids.length === 0) return [];
  const rows = await em.execute<ListedTaskRow[]>(
    `select ${TASK_COLUMNS('t')} from tasks t where t.user_id = ? and t.id = any(?::bigint[])`,
    [userId, idArray(ids)],
  );
  return rows.map(taskFieldsOf);
}

/** How the write path reads a task back (src/core/resource.ts): its document, its ETag. */
export const taskReader: ResourceReader = {
  async documents(em, userId, ids) {
    return new Map((await tasksByIds(em, userId, ids)).map((task) => [task.id, presentTaskFields(task)]));
  },
  documentSql: (row) => taskDocumentSql(row),
  async currentEtag(em, userId, id) {
    const [row] = await em.execute<Array<{ version: number }>>('select version from tasks where id = ? and user_id = ?', [id, userId]);
    return row ? taskEtag(id, row.version) : null;
  },
};

/**
 * The one fact a task needs of a project it names: that the user has it, and whether it is
 * started (src/tasks/task.lifecycle.ts `newTaskFields`, `moveToProject`).
 */
export async function linkedProject(em: SqlEntityManager, userId: number, id: number): Promise<{ id: number; started: boolean } | null> {
  const [row] = await em.execute<Array<{ id: number; started: boolean }>>(
    `select id, state = 'started' as started from projects where id = ? and user_id = ?`,
    [id, userId],
  );
  return row ?? null;
}
