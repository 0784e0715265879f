/**
 * The task rules that statements repeat, each written once as a named SQL fragment over a
 * `tasks` row aliased by the caller. The stores, the projects' statements and the one-statement
 * writes build on these; a rule changed here changes in every statement
 * (test/procedures/write-sql/ shows each write's statements whole).
 */
import type { InferKyselyDB } from '@mikro-orm/postgresql';
import { compileOnly } from '../db/sql-builder.js';
import { secondsOf } from '../db/sql-fragments.js';
import { taskEtagSql } from '../core/conditional.js';
import { preconditionsSql, notFoundSql } from '../writes/operation-sql.js';
import { refusalSql, text } from '../writes/write-functions.js';
import type { TaskSchema } from './task.entity.js';
import { openSql } from './task.lifecycle.js';

/**
 * The counters on the user's row that follow their tasks (the order of the next task, the open
 * tasks), counted again from the rows, for the user `user` names (a SQL parameter): for tasks
 * written by plain SQL (a seed), never by the service's writes, which move them themselves.
 */
export function recountUserCountersSql(user: string): string {
  return `update users u set next_task_order = coalesce((select max(t."order") + 1 from tasks t where t.user_id = u.id), 1),
           open_tasks = (select coalesce(sum(${openSql('t.state')}), 0) from tasks t where t.user_id = u.id)
     where u.id = ${user}`;
}

/** Listed: a task its project's document lists, and the user's list shows (unless finished long ago). */
export const LISTED = (t: string) => `${t}.state <> 'abandoned'`;

/** The user's order of tasks (SPEC.md 4.6), ties by id. */
export const BY_ORDER = (t: string) => `${t}."order", ${t}.id`;

/**
 * The ids of the tasks project `p` lists, by order: the `tasks` of its document, as an array.
 * `user` is the user's id as SQL: a placeholder (`?`) in a read, `p_user` in a write function.
 * Named, not joined on `p.user_id`: on a database split by user (Citus) every reference to a
 * user table names the user, or the statement asks every node (src/db/data-layout.ts).
 */
export const listedTaskIdsOf = (p: string, user: string) =>
  `array(select t.id from tasks t where t.user_id = ${user} and t.project_id = ${p}.id and ${LISTED('t')} order by ${BY_ORDER('t')})`;

/** A task's columns as presented (`TaskFields`), timestamps in seconds. */
export const TASK_COLUMNS = (t: string) =>
  `${t}.id, ${t}.user_id, ${t}.project_id, ${t}.label, ${t}."order", ${t}.planned_count, ${t}.state,
   ${secondsOf(`${t}.started_at`)} as started_at, ${secondsOf(`${t}.planned_at`)} as planned_at,
   ${secondsOf(`${t}.finished_at`)} as finished_at, ${secondsOf(`${t}.abandoned_at`)} as abandoned_at`;

/** A task's columns as presented, with its version (for the ETag). */
export const presentedTaskColumns = (t: string) => `${TASK_COLUMNS(t)}, ${t}.version`;

/** Statements over the user's tasks, composed as values (src/db/sql-builder.ts), typed from the entity. */
export const taskSql = compileOnly<InferKyselyDB<typeof TaskSchema>>();

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
