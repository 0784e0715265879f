/**
 * PATCH /api/tasks/{id} (SPEC.md 4.7, API-CONTRACT.md §5): the operation's function. Under the
 * user's lock (docs/design/writes.md): the task (404), If-Match (412), the project it joins
 * (422 `record_not_found` on `/task/project_id` when not the user's), then the label and the
 * project in one UPDATE, its state following the project by PROJECT_SYNC_RULES. Events: the
 * project it left, the project it joined (each lists its tasks), then the task. The version
 * moves only when a column changes.
 */
import { taskEtagSql } from '../core/conditional.js';
import { compileStatement, sql, v } from '../db/sql-builder.js';
import { answerSql, projectUpdatedSql } from '../writes/operation-sql.js';
import type { WriteOperation } from '../writes/write-functions.js';
import { projectSyncActionSql, taskEffectsSql } from './task.lifecycle.js';
import { READ_TASK, readLinkedProjectSql, taskSql } from './task.sql.js';
import { taskDocumentSql } from './task.view.js';

export function updateTaskOperation(): WriteOperation {
  const effects = taskEffectsSql('v_action', 'p_now');
  const changes = `(v_label is not null and label is distinct from v_label) or (v_moving and project_id is distinct from v_target) or v_action is not null`;
  const update = taskSql
    .updateTable('tasks')
    .set({
      ...Object.fromEntries(Object.entries(effects).map(([column, value]) => [column, sql.raw(value)])),
      label: sql.raw('coalesce(v_label, label)'),
      project_id: sql.raw('case when v_moving then v_target else project_id end'),
      version: sql.raw(`version + case when ${changes} then 1 else 0 end`),
    })
    .where('user_id', '=', v<number>('p_user'))
    .where('id', '=', v<number>('v_task.id'))
    .returningAll();
  return {
    op: 'tasks.update',
    fn: 'tasks_update',
    body: `declare
  v_task tasks%rowtype;
  v_left bigint;
  v_joined projects%rowtype;
  v_label text := p_input->'task'->>'label';
  v_moving boolean := (p_input->'task'->'project_id') is not null;
  v_target bigint := (p_input->'task'->>'project_id')::bigint;
  v_action text;
  v_events json[] := '{}';
begin
  ${READ_TASK}
  ${readLinkedProjectSql('v_target', 'v_joined')}
  v_left := v_task.project_id;
  if v_moving then
    v_action := ${projectSyncActionSql('v_task.state', "v_target is null or v_joined.state = 'started'")};
  end if;
  ${compileStatement(update, taskSql)} into v_task;
  if v_left is distinct from v_task.project_id then
    v_events := array(select ${projectUpdatedSql('p.id')} from projects p where p.user_id = p_user and p.id in (v_left, v_task.project_id)
                       order by p.id = v_task.project_id);
  end if;
  v_events := v_events || json_build_object('type', 'task.updated', 'data', ${taskDocumentSql('v_task')});
  return json_build_object('answer', ${answerSql(`v_events[cardinality(v_events)]->'data'`)}, 'etag', ${taskEtagSql('v_task')}, 'events', array_to_json(v_events));
end`,
  };
}
