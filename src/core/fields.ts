/**
 * Field schemas shared by every procedure's input. They encode the wire rules of
 * API-CONTRACT.md §1: lengths in code points, no NUL or lone surrogates, integers
 * that are never coerced from strings, timestamps as whole seconds.
 */
import { z } from 'zod';
import { MUST_BE_SET, type ErrorCode } from './errors.js';

/**
 * Largest accepted timestamp: 9999-12-31T23:59:59Z. Later instants have no four-digit-year
 * ISO form, which the database driver needs; they are `invalid` (documented as `maximum`).
 */
export const MAX_TIMESTAMP = 253_402_300_799;
/**
 * Ids are PostgreSQL bigints, and JSON numbers: any positive integer a JS number holds exactly.
 * On a database sharded by user (Citus) a row inserted by a statement routed to a node takes its
 * id from that node's range, which starts at the node's group number times 2^48.
 */
export const MAX_ID = Number.MAX_SAFE_INTEGER;

/**
 * trpc-to-openapi switches `coerce` on for every number in a REST input, body included, and
 * does so on the shared schema object. Body numbers must stay strict ("5", null and true are
 * `invalid`), so their `coerce` flag is pinned off.
 */
export function strict<T extends z.ZodType>(schema: T): T {
  Object.defineProperty(schema._zod.def, 'coerce', {
    get: () => false,
    set: () => undefined,
    enumerable: true,
    configurable: false,
  });
  return schema;
}

/**
 * Text with no NUL, as a JSON Schema pattern every regex engine reads alike (ECMA-262 with or
 * without the `u` and `v` flags, RE2, Rust's regex, PCRE): `\uD800-\uDFFF` made RE2- and
 * Rust-based tools drop the pattern and send NUL as valid. The other rule, no unpaired
 * surrogate, is said in the description: JSON text can only write one as an escape, which
 * no portable pattern can name.
 */
export const WELL_FORMED_TEXT = '^[^\\x00]*$';

export function codePointLength(value: string): number {
  let n = 0;
  for (const _ of value) n++;
  return n;
}

interface TextRule {
  min?: number;
  max: number;
  /** Code for a value shorter than `min`. */
  tooShort?: ErrorCode;
  /** Code for a value longer than `max` (`too_long` unless given). */
  tooLong?: ErrorCode;
  pattern?: RegExp;
  patternDetail?: string;
  what: string;
}

/** A string checked in code points, reporting every broken rule with its own code. */
export function text(rule: TextRule) {
  const { min = 0, max, tooShort = 'invalid', tooLong = 'too_long', pattern, patternDetail, what } = rule;
  const schema = z.string().superRefine((value, ctx) => {
    const issue = (code: ErrorCode, message: string) =>
      ctx.addIssue({ code: 'custom', message, params: { code } });
    if (value.includes('\u0000') || !value.isWellFormed()) {
      issue('invalid', `${what} must not contain NUL characters or unpaired surrogates.`);
    } else if (pattern && value.length > 0 && !pattern.test(value)) {
      issue('invalid', patternDetail ?? `${what} has an invalid format.`);
    }
    const length = codePointLength(value);
    if (length > max) issue(tooLong, `${what} is too long (at most ${max} characters).`);
    if (length < min) {
      issue(tooShort, min === 1 ? `${what} must not be empty.` : `${what} is too short (at least ${min} characters).`);
    }
  });
  return schema.meta({
    minLength: min,
    maxLength: max,
    // Without a format of its own, the pattern says what every text refuses: NUL and unpaired
    // surrogates (JSON Schema patterns are Unicode-aware: a surrogate pair is one character).
    pattern: pattern ? pattern.source : WELL_FORMED_TEXT,
    description: `${min}${min === max ? '' : ` to ${max}`} characters (Unicode code points); no NUL character, no unpaired surrogate.`,
  });
}

/** A whole number in the body: never coerced from a string. */
export function integer(min: number, max: number) {
  return strict(z.int().min(min).max(max));
}

/** A Unix timestamp in whole seconds. */
export function timestamp() {
  return integer(0, MAX_TIMESTAMP).meta({ description: 'Unix time in whole seconds (UTC).' });
}

/** Id of a record referenced in a body. */
export function recordId() {
  return integer(1, MAX_ID);
}

/**
 * The `id` path parameter. Never coerced: the REST door turns the path's digits into a number
 * itself (src/core/trpc.ts), so that on /trpc "0x1225" or [4645] is no id, as on REST.
 */
export const pathId = strict(z.int().min(1).max(MAX_ID));

/** The `page` query parameter; never coerced, like `pathId`. */
export const pageParam = strict(z.int().min(1)).default(1).meta({ description: 'Page number, from 1.' });

/** The `state` member of a state change: a string, `must_be_set` when absent. */
export function stateField<T extends string>(values: readonly [T, ...T[]]) {
  return z
    .string({ error: (iss) => (iss.input === undefined ? MUST_BE_SET : 'Expected a string.') })
    .meta({ enum: [...values] });
}

/**
 * A procedure's input object, read as `{}` when the call has none, as REST reads a request
 * without a body: so an absent input and an empty one answer alike on both doors, pointing at
 * the missing wrapper (`parameter_missing` on `/project`, `/task`, `/user`: API-CONTRACT.md §2)
 * instead of at the root. REST always hands over an object, so this never applies there.
 */
export function inputObject<S extends z.ZodRawShape>(shape: S): z.ZodObject<S> {
  // `{}` is not of the object's input type: it is what zod then checks member by member. The
  // declared type stays the object's, so a typed client must still send the input.
  return z.object(shape).prefault({} as z.input<z.ZodObject<S>>) as unknown as z.ZodObject<S>;
}

/**
 * The input of an operation that takes none, and the mark of one (`markNoInput`): whatever a call
 * sends is ignored, as REST ignores a body or query sent to it (API-CONTRACT.md §8: the same input
 * on both doors). The door hands such a procedure no input (src/core/procedures.ts).
 */
export const noInput = z.void();

/** Marks the procedures whose input is `noInput` (meta `noInput`), once, where the router is made. */
export function markNoInput(procedures: Record<string, { _def: { inputs: unknown[]; meta?: object } }>): void {
  for (const procedure of Object.values(procedures)) {
    if (procedure._def.inputs.includes(noInput)) procedure._def.meta = { ...procedure._def.meta, noInput: true };
  }
}
