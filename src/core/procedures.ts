/**
 * The procedures every router builds on, each behind as few middlewares as it can be (each
 * level of tRPC middleware copies the call's options and context, a cost every request pays):
 * - `publicProcedure`: one middleware (`door`) that counts the run, shapes its input as REST
 *   does, and turns zod input failures and database outages into domain errors, so both
 *   doors (REST and /trpc) report the same codes (and a Retry-After where one applies);
 * - `authedProcedure`: one more, for the token's user (authentication, the per-token rate
 *   limit, conditional headers refused in a batch, the call's path and meta for the write path);
 * - `rateLimited(...)` and `keepDroppedMembers(...)`, middlewares a router adds where it needs them;
 * - `routesUnder(tag, procedure)`, how a router's table gives each of its procedures its meta.
 */
import type { AppMeta, AuthedContext, Call, Context } from './context.js';
import { RECORD_TABLES, type PathResource } from './resource.js';
import { refuseConditionalBatch } from './conditional.js';
import { BODY_WRAPPERS, DomainError, fromZodError, type ApiError } from './errors.js';
import { errorHeaders, isDatabaseUnavailable, isZodError, unavailable } from './failures.js';
import { invalidQueryParameter } from './list-query.js';
import { admitRequests, enforceRateLimit } from './rate-limit.js';
import type { RateLimitKind } from './request-scope.js';
import { allows, insufficientScope, type Scope } from './scopes.js';
import { TRPCError } from '@trpc/server';
import { t, toTRPCError } from './trpc.js';

/**
 * What every procedure runs behind, as one middleware (each level of tRPC middleware copies the
 * call's options and context, a cost every request pays):
 * - the run is counted while it runs, whether or not its client is still there (a graceful
 *   stop waits for 0);
 * - the input it sees is built as REST builds it (`restShapedInput`, `restIntegers`);
 * - zod input failures and database outages become domain errors, so both doors report the
 *   same codes (`convertError`), with a Retry-After header when the error has one.
 */
const door = t.middleware(async ({ ctx, meta, getRawInput, next }) => {
  const leave = ctx.enterProcedure?.();
  try {
    // A request the door refused has no input to read: a public procedure raises the refusal
    // where it reads its input (an authenticated one has raised it already, after the token).
    const shaped = async () => {
      if (ctx.refusal) throw toTRPCError(ctx.refusal);
      const raw = await getRawInput();
      // An operation that takes no input ignores what was sent (JSON, as REST holds a body to), on
      // either door: its key's fingerprint too.
      if (meta?.noInput) return undefined;
      return restIntegers(ctx, meta, restShapedInput(raw));
    };
    const result = await next({ getRawInput: shaped });
    if (result.ok) return result;
    let failure: unknown = result.error;
    try {
      return await convertError(ctx, result, meta, getRawInput);
    } catch (converted) {
      failure = converted;
      throw converted;
    } finally {
      refusalHeaders(ctx, failure);
    }
  } finally {
    leave?.();
  }
});

/**
 * A refusal that says when to retry (429, 503), or which scope it needs (403), says it in its headers on /trpc too,
 * as REST does (src/http/rest.ts), while the answer has not started: also on a subscription
 * refused before its stream (src/changes/events.router.ts).
 */
function refusalHeaders(ctx: Context, error: unknown): void {
  const cause = error instanceof TRPCError ? error.cause : error;
  if (!(cause instanceof DomainError)) return;
  for (const [name, value] of Object.entries(errorHeaders(cause))) ctx.setHeader(name, value);
}

type MiddlewareResult = Awaited<ReturnType<Parameters<Parameters<typeof t.middleware>[0]>[0]['next']>>;

/** A zod refusal of the input as the contract's errors (with more of them: `inputRules`), refused before the call ran. */
function zodRefusal(error: Parameters<typeof fromZodError>[0], meta: AppMeta | undefined, rawInput: unknown, more: ApiError[] = []): DomainError {
  const refused = fromZodError(error, { rawInput, resource: meta?.resource, queryParameters: meta?.queryParameters, invalidQueryParameter });
  // Beside a 422 of the schema only: a malformed path id is a 404 alone, whatever else the input breaks.
  return (more.length > 0 && refused.status === 422 ? new DomainError([...refused.errors, ...more]) : refused).refusedBeforeRun();
}

/** A procedure's input rules; a database that cannot answer them makes the request 503, as it would have made the call. */
async function runInputRules(rules: NonNullable<AppMeta['inputRules']>, ctx: AuthedContext, rawInput: unknown) {
  try {
    return await rules(ctx, rawInput);
  } catch (error) {
    if (isDatabaseUnavailable(error)) throw toTRPCError(unavailable(error));
    throw error;
  }
}

async function convertError(ctx: Context, result: Extract<MiddlewareResult, { ok: false }>, meta: AppMeta | undefined, getRawInput: () => Promise<unknown>) {
  const { error } = result;
  if (error.cause instanceof DomainError) {
    if (error.code === 'INTERNAL_SERVER_ERROR') throw toTRPCError(error.cause);
    return result;
  }
  if (error.code === 'BAD_REQUEST' && isZodError(error.cause)) {
    const rawInput = await getRawInput().catch(() => undefined);
    // A public procedure's rules (an authenticated one's ran after its token: authedProcedure) read no user.
    const more = meta?.inputRules ? await runInputRules(meta.inputRules, ctx as AuthedContext, rawInput) : [];
    throw toTRPCError(zodRefusal(error.cause, meta, rawInput, more));
  }
  if (isDatabaseUnavailable(error.cause)) throw toTRPCError(unavailable(error.cause));
  return result;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && [Object.prototype, null].includes(Object.getPrototypeOf(v));

/**
 * The input a procedure sees is built as REST builds it (API-CONTRACT.md §8): REST spreads
 * the body (or query) into an object, so a `null`, a number or an array there is an object
 * without the wrapper (`parameter_missing` on `/project`). On /trpc the same inputs arrive as
 * they were sent; this makes them that same object. An absent input stays absent (a list's
 * schema reads it as page 1). (Unreadable input throws from `getRawInput`: the input parser
 * reports it.)
 */
function restShapedInput(raw: unknown): unknown {
  if (raw === undefined) return raw;
  if (!isPlainObject(raw)) return {};
  // A body wrapper superjson brought as a class instance (a Date, Map, Set, RegExp) is no JSON
  // object: zod's objects would take it as one with no members (an edit of nothing). It is
  // read as not an object, which a wrapper is refused as (parameter_missing, API-CONTRACT.md §2).
  let shaped: Record<string, unknown> | undefined;
  for (const key of BODY_WRAPPERS) {
    const value = raw[key];
    if (value !== null && typeof value === 'object' && !Array.isArray(value) && !isPlainObject(value)) {
      shaped ??= { ...raw };
      shaped[key] = Object.prototype.toString.call(value);
    }
  }
  return shaped ?? raw;
}

const POSITIVE_INTEGER_TEXT = /^[1-9][0-9]*$/;

/**
 * REST hands the path id over as text, already checked to be written as a positive integer
 * (src/http/rest.ts); here it becomes a number (the query's values are read by the door
 * itself). The schemas of ids never coerce (src/core/fields.ts), so on /trpc an id that is
 * not a JSON integer ("0x1225", [4645], " 4645 ") is refused as it is on REST.
 */
function restIntegers(ctx: Context, meta: AppMeta | undefined, raw: unknown): unknown {
  if (ctx.door !== 'rest' || !meta?.resource || !isPlainObject(raw) || typeof raw.id !== 'string' || !POSITIVE_INTEGER_TEXT.test(raw.id)) return raw;
  return { ...raw, id: Number(raw.id) };
}

export const publicProcedure = t.procedure.use(door);

export type KeysOf = (ctx: Context & { tokenHash?: string }, rawInput: unknown) => string[];

/** Counts the request against every key that applies; refused when any limit is spent. */
async function enforce(ctx: Context, keys: string[], limit: number, kind: RateLimitKind): Promise<void> {
  await asTRPCError(enforceRateLimit(ctx.em, keys, limit, ctx.clock.now(), kind, ctx.setHeader));
}

async function asTRPCError(counting: Promise<void>): Promise<void> {
  try {
    await counting;
  } catch (error) {
    throw error instanceof DomainError ? toTRPCError(error) : error;
  }
}

/** Counts a call against the keys `keysOf` names, at `limitOf` a minute (0: no limit); refused when one is spent. */
export function rateLimited(limitOf: (ctx: Context) => number, keysOf: KeysOf, kind: RateLimitKind) {
  return t.middleware(async ({ ctx, next, getRawInput }) => {
    const limit = limitOf(ctx);
    if (limit <= 0) return next();
    const raw = await getRawInput().catch(() => undefined);
    await enforce(ctx, keysOf(ctx, raw), limit, kind);
    return next();
  });
}

/**
 * Counts `requests` more against the token's limit, beyond the one its call already counted,
 * all of them or none: a batch's further operations (API-CONTRACT.md §15), counted before any
 * of them runs. A batch refused here counts as the one request its call counted.
 */
export async function countFurtherRequests(ctx: Context & { tokenHash: string }, requests: number): Promise<void> {
  const limit = ctx.rateLimits.perMinute;
  if (limit <= 0 || requests <= 0) return;
  // Sent again, the batch counts its call and these; more than the limit never fits: the refusal says so.
  const retry = requests + 1;
  const detail = retry > limit ? `${retry} operations are more than the ${limit} requests a minute this token may send: split the batch.` : undefined;
  await asTRPCError(admitRequests(ctx.em, `token:${ctx.tokenHash}`, limit, ctx.clock.now(), 'token', ctx.setHeader, { requests, retry, detail }));
}

export const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * zod leaves out members it will not copy (`__proto__`), but on the state endpoints every
 * member other than the known ones must be refused as `cannot_be_set`. This puts such
 * members back, as plain own properties, for the entity's check to see.
 */
export function keepDroppedMembers(wrapper: string) {
  return t.middleware(async ({ input, getRawInput, next }) => {
    const raw = await getRawInput();
    const rawMembers = isRecord(raw) ? raw[wrapper] : undefined;
    const parsed = isRecord(input) ? input[wrapper] : undefined;
    if (!isRecord(rawMembers) || !isRecord(parsed)) return next();
    const dropped = Object.keys(rawMembers).filter((key) => !Object.hasOwn(parsed, key));
    if (dropped.length === 0) return next();
    const members = { ...parsed };
    for (const key of dropped) {
      Object.defineProperty(members, key, { value: rawMembers[key], enumerable: true, writable: true, configurable: true });
    }
    return next({ input: { ...(input as Record<string, unknown>), [wrapper]: members } });
  });
}

/**
 * A procedure of the token's user (API-CONTRACT.md §3), as one middleware: the token must name
 * a user (an unknown one counts against the client address's limit, like a login); the request
 * counts against the token's limit; the token must have the operation's scope (§16); a refusal
 * of the door comes only then; a tRPC batch may not carry conditional headers; the call's
 * path and meta go into the context for the write path (idempotency, If-Match).
 */
export const authedProcedure = publicProcedure.use(async ({ ctx, next, path, meta, getRawInput }) => {
  // A database out of reach (src/http/app.ts): the token cannot be read either.
  if (ctx.refusal?.status === 503) throw toTRPCError(ctx.refusal);
  if (!ctx.authorization) throw toTRPCError(DomainError.unauthorized());
  const authentication = await ctx.authenticate(ctx.authorization);
  if (!authentication) {
    // Each unknown token costs a lookup: they count per client address, like logins.
    if (ctx.rateLimits.authPerMinute > 0) await enforce(ctx, [`unknown-token:${ctx.clientIp}`], ctx.rateLimits.authPerMinute, 'unknown_token');
    throw toTRPCError(DomainError.unauthorized('The access token is unknown, revoked or expired.'));
  }
  if (ctx.rateLimits.perMinute > 0) await enforce(ctx, [`token:${authentication.tokenHash}`], ctx.rateLimits.perMinute, 'token');
  // Then the token's scope (API-CONTRACT.md §16), before anything of the input is read.
  const access = meta?.access;
  if (access === undefined) throw new Error(`${path} has no access in src/app/scopes.ts`);
  if (!allows(authentication.token.scopes, access)) throw toTRPCError(insufficientScope(access as Scope));
  // Then what the door found wrong with the request (its path id, query, media type, body).
  if (ctx.refusal) throw toTRPCError(ctx.refusal);
  refuseConditionalBatch(ctx);
  const call = { path, meta, rawInput: getRawInput } satisfies Call;
  const result = await next({ ctx: { ...authentication, call } });
  // The user was deleted (API-CONTRACT.md §16) after its token was read, and a row of the
  // request's refers to it: refused as the token now is, not a 500.
  if (!result.ok && refersToNoUser(result.error)) throw toTRPCError(DomainError.unauthorized('The access token is unknown, revoked or expired.'));
  if (!result.ok && result.error.code === 'BAD_REQUEST' && isZodError(result.error.cause) && (meta?.resource || meta?.inputRules)) {
    const rawInput = await getRawInput().catch(() => undefined);
    // The input refused by its schema on a path id the user has no record of: 404, as with any
    // input (the id names what the request is about; a malformed id is the schema's own 404). A
    // batch's operation is read before any runs, and its id may name what an operation before it
    // makes: the batch looks it up at its turn (src/batch/apply-batch.ts `stopAt`).
    if (meta.resource && !ctx.batchStep && (await pathRecordMissing(ctx, meta.resource, authentication.user.id, rawInput))) {
      throw toTRPCError(DomainError.notFound(meta.resource));
    }
    // The rules the schema cannot hold report theirs beside its own.
    if (meta.inputRules) {
      const more = await runInputRules(meta.inputRules, { ...ctx, ...authentication, call } as AuthedContext, rawInput);
      throw toTRPCError(zodRefusal(result.error.cause, meta, rawInput, more));
    }
  }
  return result;
});

/** Whether a well-formed path id of `rawInput` names no record of the user's (a database out of reach: 503, as the call would). */
async function pathRecordMissing(ctx: Context, resource: PathResource, userId: number, rawInput: unknown): Promise<boolean> {
  const table = RECORD_TABLES[resource];
  const id = isPlainObject(rawInput) ? rawInput.id : undefined;
  if (table === undefined || typeof id !== 'number' || !Number.isSafeInteger(id) || id < 1) return false;
  try {
    return (await ctx.em.execute(`select 1 from ${table} where user_id = ? and id = ?`, [userId, id])).length === 0;
  } catch (error) {
    if (isDatabaseUnavailable(error)) throw toTRPCError(unavailable(error));
    throw error;
  }
}

/** A foreign-key violation on a reference to `users` (SQLSTATE 23503, PostgreSQL's detail names the table). */
function refersToNoUser(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && depth < 8; depth++) {
    const { code, detail } = e as { code?: unknown; detail?: unknown };
    if (code === '23503') return typeof detail === 'string' && detail.includes('is not present in table "users"');
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** A procedure's REST operation: its method, path and documentation, as openapi.json shows them (its tag is its router's). */
export type Operation = Omit<NonNullable<AppMeta['openapi']>, 'tags'>;

/**
 * How a router's table gives each procedure its meta: `route(operation, meta)` is `procedure`
 * with its REST operation under the router's OpenAPI tag (openapi.json groups a router's
 * operations under it) and the rest of its meta (`access` comes from src/app/scopes.ts).
 */
export function routesUnder<B>(tag: string, procedure: { meta(meta: AppMeta): B }) {
  return (operation: Operation, meta: Omit<AppMeta, 'openapi' | 'access'> = {}): B =>
    procedure.meta({ openapi: { ...operation, tags: [tag] }, ...meta });
}
