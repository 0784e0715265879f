/**
 * PATCH /api/tasks/{id} (SPEC.md 4.7, API-CONTRACT.md §5), its write function (docs/design/writes.md): the task
 * (404), If-Match (412), the project it joins (422), then label, project and the state PROJECT_SYNC_RULES gives in
 * one UPDATE (the version moves only when a column changes). Events: the project left, the one joined, the task
 * (none when nothing changed).
 */
import { taskEtagSql } from '../core/conditional.js';
import { answerSql, projectUpdatedSql } from '../writes/operation-sql.js';
import type { WriteOperation } from '../writes/write-functions.js';
import { projectSyncActionSql, taskEffectsSql } from './task.lifecycle.js';
import { READ_TASK, readLinkedProjectSql, updateTaskSql } from './task.sql.js';
import { taskDocumentSql } from './task.view.js';

export function updateTaskOperation(): WriteOperation {
  const changes = `(v_label is not null and label is distinct from v_label) or (v_moving and project_id is distinct from v_target) or v_action is not null`;
  const update = updateTaskSql({
    ...taskEffectsSql('v_action', 'p_now'),
    label: 'coalesce(v_label, label)',
    project_id: 'case when v_moving then v_target else project_id end',
    version: `version + case when ${changes} then 1 else 0 end`,
  });
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
  v_version int;
  v_document json;
  v_events json[] := '{}';
begin
  ${READ_TASK}
  v_version := v_task.version;
  ${readLinkedProjectSql('v_target', 'v_joined')}
  v_left := v_task.project_id;
  if v_moving then
    v_action := ${projectSyncActionSql('v_task.state', "v_target is null or v_joined.state = 'started'")};
  end if;
  ${update} into v_task;
  -- The projects' documents list their tasks that are not abandoned: an abandoned task's move changes neither.
  if v_left is distinct from v_task.project_id and v_task.state <> 'abandoned' then
    v_events := array(select ${projectUpdatedSql('p.id')} from projects p where p.user_id = p_user and p.id in (v_left, v_task.project_id)
                       order by p.id = v_task.project_id);
  end if;
  v_document := ${taskDocumentSql('v_task')};
  -- An edit that changes nothing (the version stays) appends nothing.
  if v_task.version <> v_version then
    v_events := v_events || json_build_object('type', 'task.updated', 'data', v_document);
  end if;
  return json_build_object('answer', ${answerSql('v_document')}, 'etag', ${taskEtagSql('v_task')}, 'events', array_to_json(v_events));
end`,
  };
}
