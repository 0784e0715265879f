/**
 * PUT /api/tasks/{id}/state (SPEC.md 3.2, 4.8; API-CONTRACT.md §4), its write function (docs/design/writes.md):
 * the task (404), If-Match (412), the action TASK_ACTIONS selects (`invalid_transition`), no member but `state`
 * (`cannot_be_set`), one UPDATE, the change of open tasks (`open`), its event, its project's when abandoned.
 */
import { taskEtagSql } from '../core/conditional.js';
import { answerSql, pointerSegmentSql, projectUpdatedSql } from '../writes/operation-sql.js';
import { refusalSql, text, type WriteOperation } from '../writes/write-functions.js';
import { openSql, requestedActionSql, taskEffectsSql } from './task.lifecycle.js';
import { READ_TASK, updateTaskSql } from './task.sql.js';
import { taskDocumentSql } from './task.view.js';

export function changeTaskStateOperation(): WriteOperation {
  return {
    op: 'tasks.changeState',
    fn: 'tasks_change_state',
    body: `declare
  v_task tasks%rowtype;
  v_to text := p_input->'task'->>'state';
  v_action text;
  v_from text;
  v_member text;
  v_events json[];
begin
  ${READ_TASK}
  v_action := ${requestedActionSql('v_task.state', 'v_to')};
  if v_action is null then
    ${refusalSql({ code: 'invalid_transition', pointer: text('/task/state'), detail: `case when v_task.state = 'abandoned' then 'An ' else 'A ' end || v_task.state || ' task cannot become ' || v_to || '.'` })}
  end if;
  -- A plain expression, not a query, on the path every write takes; the member is named on refusal.
  if (p_input->'task')::jsonb - 'state' <> '{}'::jsonb then
    select m into v_member from json_object_keys(p_input->'task') as m where m <> 'state' limit 1;
    ${refusalSql({ code: 'cannot_be_set', pointer: `'/task/' || ${pointerSegmentSql('v_member')}`, detail: `v_member || ' cannot be set when changing the state.'` })}
  end if;
  v_from := v_task.state;
  ${updateTaskSql({ ...taskEffectsSql('v_action', 'p_now'), version: 'version + 1' })} into v_task;
  v_events := array[json_build_object('type', 'task.updated', 'data', ${taskDocumentSql('v_task')})];
  if v_task.state = 'abandoned' and v_task.project_id is not null then
    v_events := v_events || array(
      select ${projectUpdatedSql('p.id')}
        from projects p where p.user_id = p_user and p.id = v_task.project_id);
  end if;
  return json_build_object('answer', ${answerSql("v_events[1]->'data'")}, 'etag', ${taskEtagSql('v_task')}, 'events', array_to_json(v_events),
                           'open', ${openSql('v_task.state')} - ${openSql('v_from')});
end`,
  };
}
