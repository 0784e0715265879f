/**
 * The query parameters of the API (API-CONTRACT.md §7, §10, §12): how each is written and
 * what a bad one answers (`QUERY_PARAMETERS`), the ones both lists share as zod schemas that
 * type the tRPC input and document the REST query, and the links that keep them. Each list's own
 * parameters (which states, which attributes sort) are in its schema (src/tasks/task.schema.ts,
 * src/projects/project.schema.ts); what they select is in its store.
 *
 * On REST the values arrive as text and are read into these types by the REST door
 * (src/http/rest.ts: integers, comma lists, `none`); a value that does not read is left as
 * text, which these schemas refuse. Every refusal is `400 invalid` on its parameter
 * (src/core/errors.ts `fromZodError`), all of a request's bad parameters at once.
 */
import { z } from 'zod';
import { EVENT_ID, apiError, type ApiError } from './errors.js';
import { MAX_TIMESTAMP, WELL_FORMED_TEXT, codePointLength, strict } from './fields.js';
import { MAX_LIST_VALUES, MAX_PAGE_SIZE, MAX_SEARCH_LENGTH } from './limits.js';
import { parseLocalDate } from './user-day.js';

/**
 * How the REST door reads a query parameter's text (src/http/rest.ts): `integer`, written as
 * decimal digits with no sign, leading zero, exponent or space; `list`, a comma list of
 * texts; `ids`, a comma list of ids and `none`; `text`, as it is.
 */
export type QueryParameterKind = 'integer' | 'list' | 'ids' | 'text';

/** The query parameters the API takes (API-CONTRACT.md §7, §10, §12), each written one way only. */
export const QUERY_PARAMETERS: Record<string, { kind: QueryParameterKind; detail: string; pattern?: RegExp }> = {
  page: { kind: 'integer', detail: 'Query parameter page must be an integer >= 1.' },
  page_size: { kind: 'integer', detail: `Query parameter page_size must be an integer from 1 to ${MAX_PAGE_SIZE}.` },
  state: { kind: 'list', detail: `Query parameter state must be a comma list of at most ${MAX_LIST_VALUES} states of this list (abandoned tasks are never listed).` },
  project_id: { kind: 'ids', detail: `Query parameter project_id must be a comma list of at most ${MAX_LIST_VALUES} project ids and none.` },
  q: { kind: 'text', detail: `Query parameter q must be 1 to ${MAX_SEARCH_LENGTH} characters, without NUL.` },
  planned_after: { kind: 'integer', detail: 'Query parameter planned_after must be a Unix time in whole seconds.' },
  planned_before: { kind: 'integer', detail: 'Query parameter planned_before must be a Unix time in whole seconds.' },
  planned_on: { kind: 'text', detail: 'Query parameter planned_on must be today, tomorrow or a date YYYY-MM-DD that exists.' },
  due_after: { kind: 'integer', detail: 'Query parameter due_after must be a Unix time in whole seconds.' },
  due_before: { kind: 'integer', detail: 'Query parameter due_before must be a Unix time in whole seconds.' },
  sort: { kind: 'text', detail: 'Query parameter sort must be one attribute this list sorts by, with - in front for descending.' },
  after: { kind: 'text', pattern: EVENT_ID, detail: 'Query parameter after must be an event id: digits, no leading zero.' },
  // events.onChange's cursor: in the URL of its stream, and answered like `after` and Last-Event-ID.
  lastEventId: { kind: 'text', pattern: EVENT_ID, detail: 'lastEventId must be an event id: digits, no leading zero.' },
};

/** A query parameter not written as QUERY_PARAMETERS says. */
export function invalidQueryParameter(name: string): ApiError {
  const detail = QUERY_PARAMETERS[name]?.detail ?? `Query parameter ${name} is not valid.`;
  return apiError('invalid', { status: 400, detail, parameter: name });
}

export function pageSizeParam(defaultSize: number) {
  return strict(z.int().min(1).max(MAX_PAGE_SIZE))
    .meta({ description: `Items per page, 1 to ${MAX_PAGE_SIZE} (default ${defaultSize}).`, example: 100 })
    .optional();
}

/** Unix seconds, as a bound of a date filter. */
export function secondsParam(description: string) {
  return strict(z.int().min(0).max(MAX_TIMESTAMP)).meta({ description, example: 1_781_524_800 }).optional();
}

/** A comma list of values: at least one, at most MAX_LIST_VALUES. */
export function listParam<T extends z.ZodType>(element: T, description: string, example: unknown[]) {
  return z.array(element).min(1).max(MAX_LIST_VALUES).meta({ description, example }).optional();
}

/** `q`: 1 to 100 code points, no NUL, no unpaired surrogate. */
export const searchParam = z
  .string()
  .refine((value) => {
    const length = codePointLength(value);
    return length >= 1 && length <= MAX_SEARCH_LENGTH && !value.includes('\u0000') && value.isWellFormed();
  })
  .meta({
    description: `Keeps items whose text contains this, ignoring case (Unicode lower case): 1 to ${MAX_SEARCH_LENGTH} characters; no NUL character, no unpaired surrogate. In a query string \`+\` is a space: write a plus as \`%2B\`.`,
    minLength: 1,
    maxLength: MAX_SEARCH_LENGTH,
    pattern: WELL_FORMED_TEXT,
    example: 'invoice',
  })
  .optional();

/**
 * How `planned_on` is written, as a pattern a client can check: `today`, `tomorrow`, or a
 * date whose month is 01 to 12 and day 01 to 31 (whether the day exists, 2026-02-30 does
 * not, is the service's to say).
 */
export const DAY_PATTERN = '^(today|tomorrow|[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01]))$';

/** `planned_on`: `today`, `tomorrow` or a date `YYYY-MM-DD`, in the user's time zone. */
export const dayParam = z
  .string()
  .refine((value) => value === 'today' || value === 'tomorrow' || parseLocalDate(value) !== undefined)
  .meta({
    description: '`today`, `tomorrow` or a date `YYYY-MM-DD` that exists: the day in the user\'s time zone.',
    pattern: DAY_PATTERN,
    example: 'today',
  })
  .optional();

/** `sort`: one of `attributes`, `-` in front for descending; ties by id ascending. */
export function sortParam<A extends string>(attributes: readonly [A, ...A[]], defaultAttribute: A) {
  const values = [...attributes, ...attributes.map((a) => `-${a}` as const)] as [A | `-${A}`, ...Array<A | `-${A}`>];
  return z
    .enum(values)
    .meta({ description: `One attribute to sort by, \`-\` in front for descending (default \`${defaultAttribute}\`); ties by id, ascending.`, example: `-${attributes[1] ?? defaultAttribute}` })
    .optional();
}

/** A sort as a store reads it. */
export interface Sort<A extends string> {
  attribute: A;
  descending: boolean;
}

export function sortOf<A extends string>(value: A | `-${A}` | undefined, defaultAttribute: A): Sort<A> {
  if (value === undefined) return { attribute: defaultAttribute, descending: false };
  return value.startsWith('-') ? { attribute: value.slice(1) as A, descending: true } : { attribute: value as A, descending: false };
}

/** A parameter's value as it is written in a link: lists comma-joined (`none` for null), text percent-encoded. */
function written(value: unknown): string {
  if (Array.isArray(value)) return value.map((v) => (v === null ? 'none' : encodeURIComponent(String(v)))).join(',');
  return encodeURIComponent(String(value));
}

/** A character a URL's query cannot hold as it is (outside printable ASCII, or one the URL standard encodes there). */
const UNFIT_IN_QUERY = /[^\x21-\x7e]|["<>\\^`{|}]/gu;

/** The name of a query member, percent-decoded as the door reads it (undecodable: as it is). */
function decodedName(member: string): string {
  const name = member.split('=')[0]!.replaceAll('+', ' ');
  try {
    return decodeURIComponent(name);
  } catch {
    return name;
  }
}

/**
 * The query of a list's link to page `n` (API-CONTRACT.md §12: links keep every parameter of
 * the request and change only `page`): the parameters in the order the request gave them (its
 * query on REST, its input's members on /trpc), `page` given the link's number where it stood
 * (appended when it was not sent), the parameters of `names` written alike on both doors. On
 * REST every other member of the query is kept as it was sent (a parameter the list does not
 * know: ignored, but kept); /trpc has no query, and its unknown members are not parameters.
 * What the input holds and the request did not send (no parameter has a default today) comes in
 * the order of `names`, before `page`.
 */
export async function linkQuery(ctx: { query?: string; call?: { rawInput: () => Promise<unknown> } }, input: Readonly<Record<string, unknown>>, names: readonly string[]): Promise<(n: number) => string> {
  const raw = ctx.query === undefined ? await ctx.call?.rawInput().catch(() => undefined) : undefined;
  const sent = ctx.query !== undefined
    ? ctx.query.split('&').filter((member) => member !== '')
    : Object.keys(raw !== null && typeof raw === 'object' ? raw : {}).filter((name) => name === 'page' || names.includes(name));
  const members: Array<string | null> = [];
  const seen = new Set<string>();
  for (const member of sent) {
    const name = ctx.query !== undefined ? decodedName(member) : member;
    if (seen.has(name)) continue;
    if (name === 'page') members.push(null);
    else if (!names.includes(name)) members.push(member.replace(UNFIT_IN_QUERY, (c) => encodeURIComponent(c)));
    else if (input[name] !== undefined) members.push(`${name}=${written(input[name])}`);
    else continue;
    if (name === 'page' || names.includes(name)) seen.add(name);
  }
  const given = names.filter((name) => name !== 'page' && !seen.has(name) && input[name] !== undefined).map((name) => `${name}=${written(input[name])}`);
  const page = members.indexOf(null);
  const all = page < 0 ? [...members, ...given, null] : [...members.slice(0, page), ...given, ...members.slice(page)];
  return (n) => all.map((member) => member ?? `page=${n}`).join('&');
}
