/**
 * Entity tags and conditional requests (RFC 9110 §8.8.3 and §13, API-CONTRACT.md §11).
 *
 * Every tag is strong and opaque to clients; inside it says what it depends on:
 * - a task: its id and version (`tasks.version` grows with every change of the row);
 * - a project: its id, its version and its list of task ids (the document lists them, and
 *   a task joining, leaving, being abandoned or moving changes that list without touching
 *   the project's row);
 * - a list page: the user's newest change-log number (`users.last_event_seq`, moved by every
 *   write of the user's projects and tasks), the page, the origin its links are built from
 *   and, for the task list, the user's day and its query (finished tasks leave its window at
 *   the user's midnight with no write at all; src/tasks/list-tasks.ts).
 *
 * Versions travel only in headers, never in a body (no response body of SPEC.md changes).
 */
import { createHash } from 'node:crypto';
import { DomainError } from './errors.js';
import type { Context } from './context.js';

const digest = (text: string) => createHash('sha256').update(text).digest('base64url').slice(0, 16);

export function taskEtag(id: number, version: number): string {
  return `"t${id}.${version}"`;
}

/** `taskEtag` in SQL, over the task row (or record) `t`. */
export const taskEtagSql = (t: string): string => `'"t' || ${t}.id || '.' || ${t}.version || '"'`;

/**
 * `projectEtag` in SQL, over the project row `p` and `taskIds`, its listed tasks' ids (bigint[]):
 * the same digest (SHA-256 of the ids joined by commas, base64url, 16 characters).
 */
export const projectEtagSql = (p: string, taskIds: string): string =>
  `'"p' || ${p}.id || '.' || ${p}.version || '.' || translate(left(encode(sha256(convert_to(array_to_string(${taskIds}, ','), 'UTF8')), 'base64'), 16), '+/', '-_') || '"'`;

/** An If-Match header as the strong tags it names (`*` stays `*`), for a write function; weak and malformed tags match nothing. */
export function ifMatchTags(header: string | undefined): string[] | null {
  if (header === undefined) return null;
  const tags = parseEtags(header);
  return tags === '*' ? ['*'] : tags.filter((t) => !t.weak).map((t) => t.tag);
}

/** An If-None-Match header as the tags it names, for a write function: weak ones as their strong form (the weak comparison), `*` as `*`. */
export function ifNoneMatchTags(header: string | undefined): string[] | null {
  if (header === undefined) return null;
  const tags = parseEtags(header);
  return tags === '*' ? ['*'] : tags.map((t) => t.tag);
}

export function projectEtag(id: number, version: number, taskIds: readonly number[]): string {
  return `"p${id}.${version}.${digest(taskIds.join(','))}"`;
}

export function listEtag(parts: ReadonlyArray<string | number>): string {
  return `"l.${digest(parts.join('\n'))}"`;
}

/** The entity tags of an If-Match / If-None-Match value; `*` stays `*`. Malformed parts match nothing. */
export function parseEtags(value: string): Array<{ weak: boolean; tag: string }> | '*' {
  if (value.trim() === '*') return '*';
  return [...value.matchAll(/(W\/)?("[\x21\x23-\x7e\x80-\xff]*")/g)].map((m) => ({ weak: m[1] !== undefined, tag: m[2]! }));
}

/** If-Match uses the strong comparison: a weak tag never matches. */
export function ifMatchHolds(header: string, current: string | null): boolean {
  const tags = parseEtags(header);
  if (tags === '*') return current !== null;
  return current !== null && tags.some((t) => !t.weak && t.tag === current);
}

/** If-None-Match uses the weak comparison; `*` matches any current representation. */
export function ifNoneMatchMatches(header: string, current: string): boolean {
  const tags = parseEtags(header);
  return tags === '*' || tags.some((t) => t.tag === current);
}

export const CONDITIONAL_HEADERS = ['If-Match', 'If-None-Match', 'Idempotency-Key'] as const;

/**
 * One ETag for the HTTP response. A tRPC batch of several calls shares one response, so it
 * gets none (send a call unbatched to read its ETag: src/client.ts does).
 */
export function sendEtag(ctx: Context, etag: string): void {
  if (!ctx.batched) ctx.setHeader('ETag', etag);
}

/**
 * Sends a read's ETag and tells whether If-None-Match matches it, in which case the answer
 * is 304 with no body (the doors read `ctx.response.notModified`). Callers that can compute
 * the tag before building their document (lists) return early and never build it.
 */
export function notModified(ctx: Context, etag: string): boolean {
  sendEtag(ctx, etag);
  const header = ctx.header('If-None-Match');
  if (header === undefined || ctx.batched || !ifNoneMatchMatches(header, etag)) return false;
  ctx.response.notModified = true;
  return true;
}

/** A batch of several tRPC calls cannot carry per-call conditions or keys: refused, nothing runs. */
export function refuseConditionalBatch(ctx: Context): void {
  if (!ctx.batched) return;
  for (const name of CONDITIONAL_HEADERS) {
    if (ctx.header(name) !== undefined) {
      throw DomainError.of('invalid', {
        status: 400,
        parameter: name,
        detail: `${name} applies to one call: send this call unbatched.`,
      });
    }
  }
}
