/**
 * What the projects' write functions share: the project read under the user's lock (404,
 * If-Match against its ETag, which covers its listed task ids), its event and its answer.
 */
import { projectEtagSql } from '../core/conditional.js';
import { compileOnly, sql } from '../db/sql-builder.js';
import type { InferKyselyDB } from '@mikro-orm/postgresql';
import { listedTaskIdsOf } from '../tasks/task.sql.js';
import { answerSql, preconditionsSql, notFoundSql } from '../writes/operation-sql.js';
import type { ProjectSchema } from './project.entity.js';
import { projectDocumentSql } from './project.view.js';

/** Statements over the user's projects, composed as values (src/db/sql-builder.ts), typed from the entity. */
export const projectSql = compileOnly<InferKyselyDB<typeof ProjectSchema>>();

/** An UPDATE's `set` from SQL expressions, column by column, in their order. */
export const rawColumns = (columns: Record<string, string>) =>
  Object.fromEntries(Object.entries(columns).map(([column, value]) => [column, sql.raw(value)]));

/** Declares `v_project` (the project), `v_ids` (its listed tasks) and `v_document` (its document, once written). */
export const PROJECT_VARIABLES = `v_project projects%rowtype;
  v_ids bigint[];
  v_document json;`;

/** Reads the project of the input's id into `v_project` and its listed tasks into `v_ids`: 404, then If-Match. */
export const READ_PROJECT = `select p.* into v_project from projects p where p.user_id = p_user and p.id = (p_input->>'id')::bigint;
  if not found then
    ${notFoundSql('project')}
  end if;
  v_ids := ${listedTaskIdsOf('v_project', 'p_user')};
  ${preconditionsSql(projectEtagSql('v_project', 'v_ids'))}`;

/**
 * Sets `v_events` to the project's event (`project.<kind>`) as it is now (its tasks read again into
 * `v_ids`); its document, in `v_document`, is the answer too, not parsed back out of the event.
 */
export const projectEventSql = (kind: 'created' | 'updated') => `v_ids := ${listedTaskIdsOf('v_project', 'p_user')};
  v_document := ${projectDocumentSql('v_project', 'v_ids')};
  v_events := array[json_build_object('type', 'project.${kind}', 'data', v_document)];`;

/** Returns the answer, the project's event's document, with the ETag of that document's project and tasks. */
export const RETURN_PROJECT = `return json_build_object('answer', ${answerSql('v_document')}, 'etag', ${projectEtagSql('v_project', 'v_ids')}, 'events', array_to_json(v_events));`;
