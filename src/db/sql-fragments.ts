/** SQL pieces the stores share. */

/** A timestamp column as whole Unix seconds, 0 when unset, read by pg as a JS number. */
export const secondsOf = (column: string) => `coalesce(floor(extract(epoch from ${column})), 0)::float8`;

/** Ids as one PostgreSQL array literal: MikroORM would expand a JS array into a list of parameters. */
export const idArray = (ids: readonly number[]) => `{${ids.map((id) => Math.trunc(id)).join(',')}}`;

/**
 * A page's size written into its statement (a whole number from the code, never a request):
 * prepared with `limit $n`, PostgreSQL's generic plan costs about a fifth more per run of a
 * list than with the number itself (measured on the task list: 1.0–1.3 ms against 1.2–1.6 ms).
 */
export const pageLimit = (limit: number): number => {
  if (!Number.isSafeInteger(limit) || limit < 1) throw new Error(`a page's size must be a positive whole number, not ${limit}`);
  return limit;
};

/**
 * `value` as the pattern of a LIKE that finds it anywhere, ignoring case: its `\`, `%` and `_`
 * escaped (a LIKE's escape character is `\` unless it says otherwise), the whole folded by
 * the same `lower` as the column it is matched against (`foldedText`).
 */
export const containsPattern = (value: string): string => `%${value.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/**
 * A text column folded to Unicode lower case by ICU's root locale, whatever the database's
 * own locale (the embedded one has none, whose `lower` folds ASCII only): `É` is `é`, `Σ` is
 * `σ`. A search compares it with the pattern folded the same way. Lower case is not a fold
 * everywhere: a capital sigma is `ς` at the end of a word and `σ` inside one, so `q=Σ` would
 * miss `ΟΔΟΣ`; both become `σ`.
 */
export const foldedText = (expression: string): string => `replace(lower(${expression} collate "und-x-icu"), 'ς', 'σ')`;

/** The conditions of a WHERE, each with its values in the order they are written. */
export class Conditions {
  readonly parts: string[] = [];
  readonly params: unknown[] = [];
  add(sql: string, ...params: unknown[]): this {
    this.parts.push(sql);
    this.params.push(...params);
    return this;
  }
  get sql(): string {
    return this.parts.join(' and ');
  }
}

/** Texts as one PostgreSQL array literal, each quoted (for values a schema has limited to words). */
export const textArray = (values: readonly string[]) => `{${values.map((v) => `"${v.replace(/["\\]/g, (c) => `\\${c}`)}"`).join(',')}}`;

/**
 * The user's change-log number, read by a list's own statement (its parameter: the user's id), so
 * the list's ETag names the snapshot its page was read in, even when a write lands after the token's read.
 */
export const LIST_VERSION = '(select last_event_seq::text from users where id = ?)';
