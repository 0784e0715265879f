/**
 * PUT /api/tasks/{id}/order (SPEC.md 4.9, API-CONTRACT.md §5), its write function (docs/design/writes.md): the
 * task (404), If-Match (412), the order clamped to the highest, one UPDATE shifting the tasks in between. Events:
 * each moved task by order; the task's project after its first moved task when the task and another of its tasks
 * are listed (not abandoned) and both moved: its task list's order changed (a project none of whose listed tasks
 * passed another keeps its document). Answers every task whose order changed.
 */
import { compileStatement, sql, v } from '../db/sql-builder.js';
import { STABILITY_META_SQL, projectUpdatedSql } from '../writes/operation-sql.js';
import type { WriteOperation } from '../writes/write-functions.js';
import { READ_TASK, taskSql } from './task.sql.js';
import { taskDocumentSql } from './task.view.js';

/** A task as the order answer shows it. */
const orderItem = (t: string) => `json_build_object('type', 'task', 'id', ${t}.id, 'attributes', json_build_object('order', ${t}."order"))`;

export function reorderTaskOperation(): WriteOperation {
  const between = (order: string) => `${order} between least(v_task."order", v_to) and greatest(v_task."order", v_to)`;
  const shift = taskSql
    .updateTable('tasks')
    .set({
      order: sql.raw('case when id = v_task.id then v_to when v_to < v_task."order" then "order" + 1 else "order" - 1 end'),
      version: sql.raw('version + 1'),
    })
    .where('user_id', '=', v<number>('p_user'))
    .where(sql.raw<boolean>(between('"order"')));
  const moved = `tasks t where t.user_id = p_user and ${between('t."order"')}`;
  return {
    op: 'tasks.reorder',
    fn: 'tasks_reorder',
    body: `declare
  v_task tasks%rowtype;
  v_to bigint;
  v_events json[];
  v_answer json;
begin
  ${READ_TASK}
  -- numeric: an order beyond bigint's range is clamped too.
  v_to := least((p_input->'task'->>'order')::numeric, p_next_order - 1);
  if v_to = v_task."order" then
    return json_build_object('answer', json_build_object('data', json_build_array(${orderItem('v_task')}), 'meta', ${STABILITY_META_SQL}),
                             'etag', null, 'events', '[]'::json);
  end if;
  ${compileStatement(shift, taskSql)};
  select json_agg(${orderItem('t')} order by t."order", t.id) into v_answer from ${moved};
  v_events := array(
    select e.event from (
      select t."order" as at, 0 as after, json_build_object('type', 'task.updated', 'data', ${taskDocumentSql('t')}) as event from ${moved}
      union all
      select f.first, 1, ${projectUpdatedSql('p.id')}
        from (select t.project_id, min(t."order") as first from ${moved} and t.project_id = v_task.project_id and t.state <> 'abandoned'
                and v_task.state <> 'abandoned' group by t.project_id having count(*) > 1) as f
        join projects p on p.user_id = p_user and p.id = f.project_id
    ) as e order by e.at, e.after);
  return json_build_object('answer', json_build_object('data', v_answer, 'meta', ${STABILITY_META_SQL}), 'etag', null, 'events', array_to_json(v_events));
end`,
  };
}
