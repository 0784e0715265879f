/**
 * tRPC is initialised here, once. Other files build only on what this one exports:
 * `router`, `publicProcedure` and `authedProcedure` (whose context has a non-null user).
 *
 * Every procedure runs behind one error middleware that turns zod input failures and
 * database outages into domain errors, so both doors (REST and /trpc) report the same
 * codes; the error formatter puts the envelope's `errors` into tRPC's error data.
 */
import { initTRPC, TRPCError, type TRPC_ERROR_CODE_KEY } from '@trpc/server';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import superjson from 'superjson';
import type { OpenApiMeta } from 'trpc-to-openapi';
import type { Clock } from './clock.js';
import type { Logger } from './logger.js';
import { DomainError, QUERY_PARAMETERS, fromZodError, type ErrorCode } from './errors.js';
import { isDatabaseUnavailable, isZodError, toErrorResponse, unavailable } from './failures.js';
import { hit, rateLimitHeaders, rateLimited, tightest } from './rate-limit.js';
import { refuseConditionalBatch } from './conditional.js';
import { noteRateLimitRefusal, type RateLimitKind } from '../metrics/request-scope.js';

export interface AppMeta extends OpenApiMeta {
  /** REST success status when not 200. */
  successStatus?: 201 | 204;
  /** The record a path id names; a bad id is `record_not_found` on it. */
  resource?: 'project' | 'task';
  /** Input members that come from the query string. */
  queryParameters?: string[];
  /** Request-specific codes the operation can answer with (documented in openapi.json). */
  errorCodes?: ErrorCode[];
}

/** What a procedure may use; built without HTTP for tests (`createCaller`). */
export interface Context {
  em: SqlEntityManager;
  clock: Clock;
  /** The raw Authorization header. */
  authorization: string | undefined;
  /** Scheme and host the client used, for absolute links. */
  baseUrl: string;
  passwordHashCost: number;
  /** Client address (honours TRUST_PROXY), the key of the login rate limit. */
  clientIp: string;
  /** Requests a minute; 0 disables the limit. */
  rateLimits: { authPerMinute: number; perMinute: number };
  /** A request header (the first value when repeated); undefined without HTTP. */
  header: (name: string) => string | undefined;
  /** Sets a response header (rate-limit headers, ETag); a no-op without HTTP. */
  setHeader: (name: string, value: string) => void;
  /** What a procedure decided about the HTTP answer beyond its data: 304 when `notModified`. */
  response: { notModified: boolean };
  /**
   * This HTTP request carries several tRPC calls (a batch). They share one response, so no
   * ETag is sent and If-Match, If-None-Match and Idempotency-Key are refused (src/core/conditional.ts).
   */
  batched?: boolean;
  /** Counts a procedure run until the returned function is called (a graceful stop waits for 0). */
  enterProcedure?: () => () => void;
  /** The user and token an Authorization header names, if it is valid now (src/users/). */
  authenticate: (authorization: string | undefined) => Promise<Authentication | null>;
  log?: Logger;
  /** The change log's live side in this process (src/changes/event-hub.ts). */
  live?: LiveEvents;
  /** Set by the REST door, whose path id and query integers arrive as text. */
  door?: 'rest';
}

/** What a stream of the change log needs from this process's event hub. */
export interface LiveEvents {
  /** Milliseconds between a stream's idle ticks (heartbeat, token check, re-read). */
  readonly idleMs: number;
  subscribe(userId: number, tokenHash: string): Promise<LiveSubscription>;
  /** Ends the streams of a revoked token in this process. */
  closeToken(tokenHash: string): void;
}

/** One event of a user's change log, as clients receive it. */
export interface LogEvent {
  id: string;
  type: string;
  data: unknown;
  /** Unix seconds. */
  at: number;
}

export interface LiveSubscription {
  readonly closed: boolean;
  /** Why the stream was ended from the server's side, if it was (a revoked token). */
  readonly reason?: Error;
  /** Resolves on new events of the user (also ones before the call), an idle tick, or close. */
  wait(idleMs: number, signal?: AbortSignal): Promise<'wake' | 'idle' | 'closed'>;
  /**
   * The events notifications brought that follow `after` without a gap (possibly none), or
   * null when the log must be read from the table (first call, a gap, an overflow).
   */
  take(after: bigint): LogEvent[] | null;
  close(): void;
}

export interface AuthedUser {
  id: number;
  username: string;
}

export interface Authentication {
  user: AuthedUser;
  /** Hash of the access token used: the key of the per-token rate limit. */
  tokenHash: string;
  /**
   * The user's newest change-log number (`users.last_event_seq`) as the token was read:
   * the version of the user's lists. Read in the token's statement, so it costs nothing.
   */
  lastEventSeq: string;
}

/** The procedure a request calls, as the write path needs it (idempotency, If-Match). */
export interface Call {
  /** The procedure's path, e.g. `tasks.update`: one method and path template on REST. */
  path: string;
  meta: AppMeta | undefined;
  /** The input as sent (REST: body, path id and query merged), before parsing. */
  rawInput: () => Promise<unknown>;
}

/** The context of a procedure behind `authedProcedure`. */
export type AuthedContext = Context & Authentication & { call: Call };

const STATUS_TO_TRPC: Record<number, TRPC_ERROR_CODE_KEY> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHORIZED',
  404: 'NOT_FOUND',
  409: 'CONFLICT',
  410: 'NOT_FOUND',
  412: 'PRECONDITION_FAILED',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  422: 'UNPROCESSABLE_CONTENT',
  429: 'TOO_MANY_REQUESTS',
  503: 'SERVICE_UNAVAILABLE',
};

export function toTRPCError(error: DomainError): TRPCError {
  return new TRPCError({ code: STATUS_TO_TRPC[error.status] ?? 'INTERNAL_SERVER_ERROR', message: error.message, cause: error });
}

const t = initTRPC
  .context<Context>()
  .meta<AppMeta>()
  .create({
    transformer: superjson,
    isDev: false,
    // Subscriptions (SSE) ping while idle so proxies keep them open, like the REST stream's
    // heartbeat; a client that hears nothing for twice that long reconnects with its last id.
    sse: { ping: { enabled: true, intervalMs: 15_000 }, client: { reconnectAfterInactivityMs: 30_000 } },
    errorFormatter({ shape, error }) {
      const response = toErrorResponse(error);
      const first = response.errors[0]!;
      return {
        code: shape.code,
        message: first.detail,
        data: {
          code: first.code,
          httpStatus: response.status,
          path: shape.data.path,
          errors: response.errors,
          // 410 cursor_expired: the id to restart from, as REST gives it in `meta`.
          ...(response.meta ? { meta: response.meta, last_event_id: response.meta.last_event_id } : {}),
        },
      };
    },
  });

export const router = t.router;
export const createCallerFactory = t.createCallerFactory;

/**
 * What every procedure runs behind, as one middleware (each level of tRPC middleware copies the
 * call's options and context, a cost every request pays):
 * - the run is counted while it runs, whether or not its client is still there (a graceful
 *   stop waits for 0);
 * - the input it sees is built as REST builds it (`restShapedInput`, `restIntegers`);
 * - zod input failures and database outages become domain errors, so both doors report the
 *   same codes (`convertError`).
 */
const door = t.middleware(async ({ ctx, meta, getRawInput, next }) => {
  const leave = ctx.enterProcedure?.();
  try {
    const shaped = async () => restIntegers(ctx, meta, restShapedInput(await getRawInput()));
    const result = await next({ getRawInput: shaped });
    return result.ok ? result : await convertError(result, meta, getRawInput);
  } finally {
    leave?.();
  }
});

type MiddlewareResult = Awaited<ReturnType<Parameters<Parameters<typeof t.middleware>[0]>[0]['next']>>;

async function convertError(result: Extract<MiddlewareResult, { ok: false }>, meta: AppMeta | undefined, getRawInput: () => Promise<unknown>) {
  const { error } = result;
  if (error.cause instanceof DomainError) {
    if (error.code === 'INTERNAL_SERVER_ERROR') throw toTRPCError(error.cause);
    return result;
  }
  if (error.code === 'BAD_REQUEST' && isZodError(error.cause)) {
    const rawInput = await getRawInput().catch(() => undefined);
    throw toTRPCError(
      fromZodError(error.cause, { rawInput, resource: meta?.resource, queryParameters: meta?.queryParameters }),
    );
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
  return raw !== undefined && !isPlainObject(raw) ? {} : raw;
}

const POSITIVE_INTEGER_TEXT = /^[1-9][0-9]*$/;

/**
 * REST hands the path id and query integers over as text, already checked to be written as
 * positive integers (src/http/rest.ts); here they become numbers. The schemas of ids and pages
 * never coerce (src/core/fields.ts), so on /trpc an id or a page that is not a JSON integer
 * ("0x1225", [4645], " 4645 ", "2") is refused as it is on REST.
 */
function restIntegers(ctx: Context, meta: AppMeta | undefined, raw: unknown): unknown {
  if (ctx.door !== 'rest' || !isPlainObject(raw)) return raw;
  // Event ids (`after`) stay text: only integers (QUERY_PARAMETERS) become numbers.
  const names = [...(meta?.resource ? ['id'] : []), ...(meta?.queryParameters ?? []).filter((n) => QUERY_PARAMETERS[n]?.integer)];
  if (names.length === 0) return raw;
  const converted = { ...raw };
  for (const name of names) {
    const value = converted[name];
    if (typeof value === 'string' && POSITIVE_INTEGER_TEXT.test(value)) converted[name] = Number(value);
  }
  return converted;
}

export const publicProcedure = t.procedure.use(door);

type KeysOf = (ctx: Context & { tokenHash?: string }, rawInput: unknown) => string[];

/** Counts the request against every key that applies; refused when any limit is spent. */
async function enforce(ctx: Context, keys: string[], limit: number, kind: RateLimitKind): Promise<void> {
  const decisions = [];
  for (const key of keys) decisions.push(await hit(ctx.em, key, limit, ctx.clock.now()));
  const decision = tightest(decisions);
  for (const [name, value] of Object.entries(rateLimitHeaders(decision))) ctx.setHeader(name, value);
  if (!decision.allowed) {
    noteRateLimitRefusal(kind);
    throw toTRPCError(rateLimited(decision));
  }
}

function rateLimit(limitOf: (ctx: Context) => number, keysOf: KeysOf, kind: RateLimitKind) {
  return t.middleware(async ({ ctx, next, getRawInput }) => {
    const limit = limitOf(ctx);
    if (limit <= 0) return next();
    const raw = await getRawInput().catch(() => undefined);
    await enforce(ctx, keysOf(ctx, raw), limit, kind);
    return next();
  });
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

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
 * Registration and login: limited per client address, and a login also per username (any
 * case), so that one account cannot be guessed from many addresses.
 */
export const credentialsProcedure = publicProcedure.use(
  rateLimit(
    (ctx) => ctx.rateLimits.authPerMinute,
    (ctx, raw) => {
      const username = isRecord(raw) ? raw.username : undefined;
      return [`ip:${ctx.clientIp}`, ...(typeof username === 'string' ? [`login:${username.toLowerCase()}`] : [])];
    },
    'auth',
  ),
);

/**
 * A procedure of the token's user (API-CONTRACT.md §3), as one middleware: the token must name
 * a user (an unknown one counts against the client address's limit, like a login); the request
 * counts against the token's limit; a tRPC batch may not carry conditional headers; the call's
 * path and meta go into the context for the write path (idempotency, If-Match).
 */
export const authedProcedure = publicProcedure.use(async ({ ctx, next, path, meta, getRawInput }) => {
  if (!ctx.authorization) throw toTRPCError(DomainError.unauthorized());
  const authentication = await ctx.authenticate(ctx.authorization);
  if (!authentication) {
    // Each unknown token costs a lookup: they count per client address, like logins.
    if (ctx.rateLimits.authPerMinute > 0) await enforce(ctx, [`unknown-token:${ctx.clientIp}`], ctx.rateLimits.authPerMinute, 'unknown_token');
    throw toTRPCError(DomainError.unauthorized('The access token is unknown, revoked or expired.'));
  }
  if (ctx.rateLimits.perMinute > 0) await enforce(ctx, [`token:${authentication.tokenHash}`], ctx.rateLimits.perMinute, 'token');
  refuseConditionalBatch(ctx);
  return next({ ctx: { ...authentication, call: { path, meta, rawInput: getRawInput } satisfies Call } });
});
