/**
 * Pieces every operation's function (src/writes/write-functions.ts `WriteOperation`) says the
 * same way: a missing resource, If-Match, the answer. Each is PL/pgSQL text over the function's
 * arguments and variables, made from constants of the code.
 */
import { STABILITY_META } from '../core/envelope.js';
import type { Resource } from '../core/resource.js';
import { refusalSql, text } from './write-functions.js';

/** `DomainError.notFound`, raised. */
export const notFoundSql = (resource: Resource): string =>
  refusalSql({ code: 'record_not_found', pointer: text(`/${resource}`), detail: text(`No ${resource} with this id exists for the current user.`) });

/**
 * The preconditions of a write (API-CONTRACT.md §11, RFC 9110 §13.2.2) against `etag`, the
 * resource's tag as SQL, after it is found and before any rule: If-Match 412 unless `*` or one of
 * its tags; If-None-Match 412 when `*` or one of its tags (a write is never 304).
 */
export const preconditionsSql = (etag: string): string =>
  `if p_if_match is not null and not ('*' = any(p_if_match) or ${etag} = any(p_if_match)) then
    ${refusalSql({ code: 'precondition_failed', parameter: text('If-Match') })}
  end if;
  if p_if_none_match is not null and ('*' = any(p_if_none_match) or ${etag} = any(p_if_none_match)) then
    ${refusalSql({ code: 'precondition_failed', parameter: text('If-None-Match'), detail: text('The resource is still at a version named by If-None-Match.') })}
  end if;`;

/** The `meta` of every project and task answer, as SQL. */
export const STABILITY_META_SQL = `json_build_object(${Object.entries(STABILITY_META).map(([k, value]) => `${text(k)}, ${text(value)}`).join(', ')})`;

/** An answer `{data, meta}` with `data` the document `document`. */
export const answerSql = (document: string): string => `json_build_object('data', ${document}, 'meta', ${STABILITY_META_SQL})`;

/**
 * The `project.updated` event of a project whose task list a task's operation changed, by
 * reference: `apply` writes the project's document once for all of them (API-CONTRACT.md §15).
 */
export const projectUpdatedSql = (id: string): string => `json_build_object('type', 'project.updated', 'project', ${id})`;

/** A JSON Pointer's segment (RFC 6901) in SQL: `~` as `~0`, `/` as `~1`. */
export const pointerSegmentSql = (segment: string): string => `replace(replace(${segment}, '~', '~0'), '/', '~1')`;
