/**
 * POST /api/users/me/tasks (SPEC.md 4.5, API-CONTRACT.md §5), its write function (docs/design/writes.md): the
 * project `project_id` names (422), the action NEW_TASK_RULES gives, the task inserted blank with its effects at
 * the end of the order (`p_next_order`; it takes one order and maybe one open task), its event, its project's.
 */
import { taskEtagSql } from '../core/conditional.js';
import { compileStatement, sql } from '../db/sql-builder.js';
import { answerSql, projectUpdatedSql } from '../writes/operation-sql.js';
import type { WriteOperation } from '../writes/write-functions.js';
import { newTaskActionSql, openSql, taskEffectsSql } from './task.lifecycle.js';
import { readLinkedProjectSql, taskSql } from './task.sql.js';
import { taskDocumentSql } from './task.view.js';

/** A task before any action: newed, nothing set (the columns the effects read). */
const BLANK = `(select null::timestamptz as started_at, null::timestamptz as planned_at, null::timestamptz as finished_at,
                 null::timestamptz as abandoned_at, 0 as planned_count, 'newed'::text as state) as blank`;

export function createTaskOperation(): WriteOperation {
  const effect = taskEffectsSql('v_action', 'p_now');
  const insert = taskSql
    .insertInto('tasks')
    .columns(['user_id', 'order', 'project_id', 'label', 'planned_count', 'state', 'started_at', 'planned_at', 'finished_at', 'abandoned_at', 'created_at'])
    .expression(
      sql.raw(`select p_user, p_next_order, v_project.id, p_input->'task'->>'label', ${effect.planned_count}, ${effect.state}, ${effect.started_at},
                      coalesce(v_planned_at, ${effect.planned_at}), ${effect.finished_at}, ${effect.abandoned_at}, p_now
                 from ${BLANK}`),
    )
    .returningAll();
  return {
    op: 'tasks.create',
    fn: 'tasks_create',
    body: `declare
  v_task tasks%rowtype;
  v_project projects%rowtype;
  v_project_id bigint := (p_input->'task'->>'project_id')::bigint;
  v_planned_at timestamptz := to_timestamp((p_input->'task'->>'planned_at')::float8);
  v_action text;
  v_events json[];
begin
  ${readLinkedProjectSql('v_project_id', 'v_project')}
  v_action := ${newTaskActionSql('v_planned_at', "(v_project.state = 'started')")};
  ${compileStatement(insert, taskSql)} into v_task;
  v_events := array[json_build_object('type', 'task.created', 'data', ${taskDocumentSql('v_task')})];
  if v_project.id is not null then
    v_events := v_events || ${projectUpdatedSql('v_project.id')};
  end if;
  return json_build_object('answer', ${answerSql("v_events[1]->'data'")}, 'etag', ${taskEtagSql('v_task')}, 'events', array_to_json(v_events),
                           'open', ${openSql('v_task.state')}, 'orders', 1);
end`,
  };
}
