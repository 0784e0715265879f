/**
 * The query parameters both lists share (API-CONTRACT.md §12), as zod schemas that type the
 * tRPC input and document the REST query, and the links that keep them. Each list's own
 * parameters (which states, which attributes sort) are in its schema (src/tasks/task.schema.ts,
 * src/projects/project.schema.ts); what they select is in its store.
 *
 * On REST the values arrive as text and are read into these types by the REST door
 * (src/http/rest.ts: integers, comma lists, `none`); a value that does not read is left as
 * text, which these schemas refuse. Every refusal is `400 invalid` on its parameter
 * (src/core/errors.ts `fromZodError`), all of a request's bad parameters at once.
 */
import { z } from 'zod';
import { MAX_TIMESTAMP, codePointLength, strict } from './fields.js';
import { MAX_LIST_VALUES, MAX_PAGE_SIZE, MAX_SEARCH_LENGTH } from './limits.js';
import { parseLocalDate } from './user-day.js';

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
    description: `Keeps items whose text contains this, ignoring case (Unicode lower case): 1 to ${MAX_SEARCH_LENGTH} characters, no NUL. In a query string \`+\` is a space: write a plus as \`%2B\`.`,
    minLength: 1,
    maxLength: MAX_SEARCH_LENGTH,
    example: 'invoice',
  })
  .optional();

/** `planned_on`: `today`, `tomorrow` or a date `YYYY-MM-DD`, in the user's time zone. */
export const dayParam = z
  .string()
  .refine((value) => value === 'today' || value === 'tomorrow' || parseLocalDate(value) !== undefined)
  .meta({
    description: '`today`, `tomorrow` or a date `YYYY-MM-DD` that exists: the day in the user\'s time zone.',
    pattern: '^(today|tomorrow|[0-9]{4}-[0-9]{2}-[0-9]{2})$',
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

/**
 * The query of a list's links: every parameter the request gave (in `names` order), then
 * `page`, which is all that changes from link to link.
 */
export function linkQuery(input: Readonly<Record<string, unknown>>, names: readonly string[]): string {
  return names
    .filter((name) => name !== 'page' && input[name] !== undefined)
    .map((name) => `${name}=${written(input[name])}&`)
    .join('');
}
