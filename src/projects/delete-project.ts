/**
 * DELETE /api/projects/{id} (API-CONTRACT.md §6): the operation's function. The project (404),
 * If-Match (412), its tasks released in one UPDATE (PROJECT_DELETED), the project deleted; the
 * events: `project.deleted`, then each released task by order.
 */
import { compileStatement, v } from '../db/sql-builder.js';
import { PROJECT_DELETED, openSql, taskAction, taskEffectsSql } from '../tasks/task.lifecycle.js';
import { taskSql } from '../tasks/task.sql.js';
import { taskDocumentSql } from '../tasks/task.view.js';
import { text, type WriteOperation } from '../writes/write-functions.js';
import { PROJECT_VARIABLES, READ_PROJECT, projectSql, rawColumns } from './project.write-sql.js';

export function deleteProjectOperation(): WriteOperation {
  const states = PROJECT_DELETED.states.map(text).join(', ');
  const action = `case when state in (${states}) then ${text(PROJECT_DELETED.action)} end`;
  const release = taskSql
    .updateTable('tasks')
    .set(rawColumns({ ...taskEffectsSql(action, 'p_now'), project_id: 'null', version: 'version + 1' }))
    .where('user_id', '=', v<number>('p_user'))
    .where('project_id', '=', v<number>('v_project.id'))
    .returningAll();
  const remove = projectSql.deleteFrom('projects').where('user_id', '=', v<number>('p_user')).where('id', '=', v<number>('v_project.id'));
  return {
    op: 'projects.delete',
    fn: 'projects_delete',
    deletesProject: true,
    body: `declare
  ${PROJECT_VARIABLES}
  v_events json[];
  v_open int;
begin
  ${READ_PROJECT}
  -- The user's open tasks lose those the deletion closes (moved by apply with the events' number).
  select coalesce(sum(${openSql(`'${taskAction(PROJECT_DELETED.action).to}'`)} - ${openSql('t.state')}), 0) into v_open
    from tasks t where t.user_id = p_user and t.project_id = v_project.id and t.state in (${states});
  with released as (${compileStatement(release, taskSql)})
  select array[json_build_object('type', 'project.deleted', 'data', json_build_object('type', 'project', 'id', v_project.id))]
         || coalesce(array_agg(json_build_object('type', 'task.updated', 'data', ${taskDocumentSql('released')}) order by released."order", released.id), '{}')
    into v_events from released;
  ${compileStatement(remove, projectSql)};
  return json_build_object('answer', null, 'etag', null, 'events', array_to_json(v_events), 'open', v_open);
end`,
  };
}
