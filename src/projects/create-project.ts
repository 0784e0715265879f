/**
 * POST /api/users/me/projects (SPEC.md 4.1, API-CONTRACT.md §6): the operation's function. A name
 * another project of the user has in any case (its slug, lower-cased) is `taken`; its format is the schema's.
 */
import { compileStatement, sql } from '../db/sql-builder.js';
import { refusalSql, text, type WriteOperation } from '../writes/write-functions.js';
import { PROJECT_VARIABLES, RETURN_PROJECT, projectEventSql, projectSql } from './project.write-sql.js';

export const NAME_TAKEN_DETAIL = 'Project name already exists for this user.';
/** The name's refusal when another project of the user has it (in any case). */
export const TAKEN = { code: 'taken', validation: true, pointer: text('/project/name'), detail: text(NAME_TAKEN_DETAIL) } as const;

export function createProjectOperation(): WriteOperation {
  const insert = projectSql
    .insertInto('projects')
    .columns(['user_id', 'name', 'slug', 'description', 'state', 'created_at'])
    .expression(sql.raw(`select p_user, v_name, lower(v_name), '', 'newed', p_now`))
    .returningAll();
  return {
    op: 'projects.create',
    fn: 'projects_create',
    body: `declare
  ${PROJECT_VARIABLES}
  v_name text := p_input->'project'->>'name';
  v_events json[];
begin
  if exists (select 1 from projects p where p.user_id = p_user and p.slug = lower(v_name)) then
    ${refusalSql(TAKEN)}
  end if;
  ${compileStatement(insert, projectSql)} into v_project;
  ${projectEventSql('created')}
  ${RETURN_PROJECT}
end`,
  };
}
