/**
 * PATCH /api/projects/{id} (SPEC.md 4.3, API-CONTRACT.md §4 "Project edits"): the operation's function.
 * The project (404), If-Match (412), then every problem at once (`taken`, `due_at`'s rules); else one
 * UPDATE, whose version moves only when a column changes, and its event (none when nothing changed).
 */
import { compileStatement, sql, v } from '../db/sql-builder.js';
import { refusalJsonSql, refusalsSql, text, type WriteOperation } from '../writes/write-functions.js';
import { TAKEN } from './create-project.js';
import { DUE_AT_EDITABLE_IN } from './project.lifecycle.js';
import { PROJECT_VARIABLES, READ_PROJECT, RETURN_PROJECT, projectEventSql, projectSql } from './project.write-sql.js';

export function updateProjectOperation(): WriteOperation {
  const changes = `(v_name is not null and name is distinct from v_name) or (v_description is not null and description is distinct from v_description) or v_due_changes`;
  const update = projectSql
    .updateTable('projects')
    .set({
      name: sql.raw('coalesce(v_name, name)'),
      slug: sql.raw('coalesce(lower(v_name), slug)'),
      description: sql.raw('coalesce(v_description, description)'),
      due_at: sql.raw('case when v_due_changes then v_due else due_at end'),
      version: sql.raw(`version + case when ${changes} then 1 else 0 end`),
    })
    .where('user_id', '=', v<number>('p_user'))
    .where('id', '=', v<number>('v_project.id'))
    .returningAll();
  return {
    op: 'projects.update',
    fn: 'projects_update',
    body: `declare
  ${PROJECT_VARIABLES}
  v_name text := p_input->'project'->>'name';
  v_description text := p_input->'project'->>'description';
  v_due_seconds bigint := (p_input->'project'->>'due_at')::bigint;
  v_due timestamptz := to_timestamp(v_due_seconds::float8);
  v_due_changes boolean := false;
  v_errors json[] := '{}';
  v_events json[];
  v_version int;
begin
  ${READ_PROJECT}
  v_version := v_project.version;
  -- Two conditions, not one joined by "and": a query behind a test of the input is planned again at
  -- every call (its custom plan, the test folded away, beats the generic one).
  if v_name is not null then
    if exists (select 1 from projects p where p.user_id = p_user and p.slug = lower(v_name) and p.id <> v_project.id) then
      v_errors := v_errors || ${refusalJsonSql(TAKEN)};
    end if;
  end if;
  if v_due_seconds is not null and v_due_seconds <> coalesce(floor(extract(epoch from v_project.due_at))::bigint, 0) then
    if v_project.state not in (${DUE_AT_EDITABLE_IN.map((s) => text(s)).join(', ')}) or v_project.started_at is null then
      v_errors := v_errors || ${refusalJsonSql({ code: 'cannot_be_set', pointer: text('/project/due_at'), detail: text('due_at can only be changed while the project is started.') })};
    elsif v_due < v_project.started_at then
      v_errors := v_errors || ${refusalJsonSql({ code: 'cannot_be_before_started_at', pointer: text('/project/due_at'), detail: text('due_at cannot be before the project started.') })};
    else
      v_due_changes := true;
    end if;
  end if;
  ${refusalsSql('v_errors')}
  ${compileStatement(update, projectSql)} into v_project;
  ${projectEventSql('updated')}
  -- An edit that changes nothing (the version stays) appends nothing.
  if v_project.version = v_version then
    v_events := '{}';
  end if;
  ${RETURN_PROJECT}
end`,
  };
}
