/**
 * The task rules that statements repeat, each written once as a SQL fragment over a `tasks` row
 * aliased by the caller: a rule changed here changes in every statement (test/procedures/write-sql/).
 */
import type { InferKyselyDB } from '@mikro-orm/postgresql';
import { compileOnly, compileStatement, sql, v } from '../db/sql-builder.js';
import { secondsOf } from '../db/sql-fragments.js';
import { taskEtagSql } from '../core/conditional.js';
import { preconditionsSql, notFoundSql } from '../writes/operation-sql.js';
import { refusalSql, text } from '../writes/write-functions.js';
import type { TaskSchema } from './task.entity.js';
import { openSql } from './task.lifecycle.js';

/**
 * The user's counters that follow their tasks (next order, open tasks) counted again from the rows, for
 * tasks written by plain SQL (a seed); the service's writes move them themselves. `user`: a SQL parameter.
 */
export function recountUserCountersSql(user: string): string {
  return `update users u set next_task_order = coalesce((select max(t."order") + 1 from tasks t where t.user_id = u.id), 1),
           open_tasks = (select coalesce(sum(${openSql('t.state')}), 0) from tasks t where t.user_id = u.id)
     where u.id = ${user}`;
}

/** Listed: a task its project's document lists, and the user's list shows (unless finished long ago). */
export const LISTED = (t: string) => `${t}.state <> 'abandoned'`;

/**
 * The ids of the tasks project `p` lists, by the user's order (SPEC.md 4.6), ties by id: the `tasks` of
 * its document. `user` is the user's id as SQL (`?` in a read, `p_user` in a write function), named, not
 * joined on `p.user_id`: on Citus every reference to a user table names the user (src/db/data-layout.ts).
 */
export const listedTaskIdsOf = (p: string, user: string) =>
  `array(select t.id from tasks t where t.user_id = ${user} and t.project_id = ${p}.id and ${LISTED('t')} order by t."order", t.id)`;

/** A task's columns as its fields (`TaskFields`, named so), timestamps in seconds. */
export const TASK_COLUMNS = (t: string) =>
  `${t}.id, ${t}.user_id as "userId", ${t}.project_id as "projectId", ${t}.label, ${t}."order", ${t}.planned_count as "plannedCount",
   ${t}.state, ${secondsOf(`${t}.started_at`)} as "startedAt", ${secondsOf(`${t}.planned_at`)} as "plannedAt",
   ${secondsOf(`${t}.finished_at`)} as "finishedAt", ${secondsOf(`${t}.abandoned_at`)} as "abandonedAt"`;

/** A task's columns as presented, with its version (for the ETag). */
export const presentedTaskColumns = (t: string) => `${TASK_COLUMNS(t)}, ${t}.version`;

/** Statements over the user's tasks, composed as values (src/db/sql-builder.ts), typed from the entity. */
export const taskSql = compileOnly<InferKyselyDB<typeof TaskSchema>>();

/** In a write function: the UPDATE of the task read into `v_task`, each column of `set` to its SQL, returning the row. */
export function updateTaskSql(set: Record<string, string>): string {
  const columns = Object.fromEntries(Object.entries(set).map(([column, value]) => [column, sql.raw(value)]));
  const update = taskSql.updateTable('tasks').set(columns).where('user_id', '=', v<number>('p_user'));
  return compileStatement(update.where('id', '=', v<number>('v_task.id')).returningAll(), taskSql);
}

/** In a write function: reads the task of the input's id into `v_task` (declared `tasks%rowtype`): 404, then If-Match. */
export const READ_TASK = `select t.* into v_task from tasks t where t.user_id = p_user and t.id = (p_input->>'id')::bigint;
  if not found then
    ${notFoundSql('task')}
  end if;
  ${preconditionsSql(taskEtagSql('v_task'))}`;

/** In a write function: reads the project `id` names into `into` (a `projects%rowtype`): 422 `record_not_found` on `/task/project_id` when the user has none. */
export const readLinkedProjectSql = (id: string, into: string) => `if ${id} is not null then
    select p.* into ${into} from projects p where p.user_id = p_user and p.id = ${id};
    if not found then
      ${refusalSql({ code: 'record_not_found', validation: true, status: 422, pointer: text('/task/project_id'), detail: text('No project with this id exists for the current user.') })}
    end if;
  end if;`;
