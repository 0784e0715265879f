/**
 * What the projects' write functions share: the project read under the user's lock (404,
 * If-Match against its ETag, which covers its listed task ids), its event and its answer.
 */
import { projectEtagSql } from '../core/conditional.js';
import { compileOnly } from '../db/sql-builder.js';
import type { InferKyselyDB } from '@mikro-orm/postgresql';
import { listedTaskIdsOf } from '../tasks/task.sql.js';
import { answerSql, preconditionsSql, notFoundSql } from '../writes/operation-sql.js';
import type { ProjectSchema } from './project.entity.js';
import { projectDocumentSql } from './project.view.js';

/** Statements over the user's projects, composed as values (src/db/sql-builder.ts), typed from the entity. */
export const projectSql = compileOnly<InferKyselyDB<typeof ProjectSchema>>();

/** Declares `v_project` (the project) and `v_ids` (its listed tasks). */
export const PROJECT_VARIABLES = `v_project projects%rowtype;
  v_ids bigint[];`;

/** Reads the project of the input's id into `v_project` and its listed tasks into `v_ids`: 404, then If-Match. */
export const READ_PROJECT = `select p.* into v_project from projects p where p.user_id = p_user and p.id = (p_input->>'id')::bigint;
  if not found then
    ${notFoundSql('project')}
  end if;
  v_ids := ${listedTaskIdsOf('v_project', 'p_user')};
  ${preconditionsSql(projectEtagSql('v_project', 'v_ids'))}`;

/** The project's event (`project.<kind>`) as it is now (its tasks read again: a write may have moved them). */
export const projectEventSql = (kind: 'created' | 'updated') =>
  `json_build_object('type', 'project.${kind}', 'data', ${projectDocumentSql('v_project', listedTaskIdsOf('v_project', 'p_user'))})`;

/** Returns the answer whose document is `v_events[1]`'s, with the project's ETag. */
export const RETURN_PROJECT = `v_ids := ${listedTaskIdsOf('v_project', 'p_user')};
  return json_build_object('answer', ${answerSql("v_events[1]->'data'")}, 'etag', ${projectEtagSql('v_project', 'v_ids')}, 'events', array_to_json(v_events));`;
