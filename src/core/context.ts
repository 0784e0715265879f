/**
 * What a procedure may use, and how one is made without HTTP. `createContextInner` builds a
 * context from what every caller has (an entity manager, a clock, the functions the layers
 * above hand in); the HTTP doors (src/http/app.ts) add what a request brings, and tests call
 * procedures through `createCaller` with it. Touch this file when a procedure needs
 * something new from its caller.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { OpenApiMeta } from 'trpc-to-openapi';
import { PASSWORD_HASH_COST } from '../config.js';
import type { Clock } from './clock.js';
import type { ApiError, DomainError, ErrorCode } from './errors.js';
import type { Logger } from './logger.js';
import type { PathResource } from './resource.js';
import type { Access } from './scopes.js';

export interface AppMeta extends OpenApiMeta {
  /** REST success status when not 200. */
  successStatus?: 201 | 202 | 204;
  /** The record a path id names; a bad id is `record_not_found` on it. */
  resource?: PathResource;
  /** Input members that come from the query string. */
  queryParameters?: string[];
  /** Request-specific codes the operation can answer with (documented in openapi.json). */
  errorCodes?: ErrorCode[];
  /**
   * What a token needs for this operation (API-CONTRACT.md §16), set from the one table of
   * src/app/scopes.ts when the router is made; never written beside a procedure.
   */
  access?: Access;
  /**
   * A write of the user outside projects, tasks, batches and webhooks (whose keys follow from
   * their tags) that takes an Idempotency-Key: it runs as `plainWrite` (src/writes/user-write.ts).
   */
  keyed?: true;
  /** The operation takes no input (src/core/fields.ts `noInput`): what a call sends is no part of it, its key's fingerprint included. Set where the router is made. */
  noInput?: true;
  /**
   * Rules of the input that zod's schema cannot hold (they read the clock, or a password). When
   * the schema refuses the input of an authenticated call, their refusals join its own
   * (API-CONTRACT.md §2: every validation error of a request is reported); when it accepts the
   * input, the procedure applies them itself.
   */
  inputRules?: (ctx: AuthedContext, rawInput: unknown) => Promise<ApiError[]> | ApiError[];
}

/** What a procedure may use; built without HTTP for tests (`createCaller`). */
export interface Context {
  /**
   * The ORM's root entity manager, shared by every request: statements go through it; a unit of
   * work runs in a fork (`ctx.em.fork()`, or `ctx.em.transactional(…)`, whose fork MikroORM merges
   * nothing back into the root from). MikroORM refuses identity-map work on the root itself.
   */
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
  /** The write functions of this code, as installed (src/app/write-functions.ts, docs/design/writes.md). */
  writes: WriteFunctionNames;
  /** Announces committed writes to every process's listeners (src/writes/announcer.ts). */
  announcer: Announcements;
  log?: Logger;
  /** The change log's live side in this process (src/changes/event-hub.ts). */
  live?: LiveEvents;
  /** How webhook URLs are checked, and this process's deliverer (src/webhooks/). */
  webhooks?: WebhookHost;
  /** Set by the REST door, whose path id and query integers arrive as text. */
  door?: 'rest';
  /** On the REST door, the request's query as it was sent (without `?`): list links repeat it. */
  query?: string;
  /** The /trpc door writes a StreamedAnswer of JSON as it is produced (src/http/trpc-streamed.ts): a procedure may answer one. */
  streamsJson?: true;
  /** A batch's operation, being read: its write procedure hands it over instead of running it (src/batch/apply-batch.ts). */
  batchStep?: true;
  /**
   * What the door found wrong with the request before reading its input (a path id, a query
   * parameter, the media type, the body's size, encoding or nesting). The procedure raises it
   * after authentication, in place of reading its input (src/core/procedures.ts), so that an
   * anonymous caller learns nothing from validation and both doors check in one order.
   */
  refusal?: DomainError;
}

/** Where the write functions are: `apply`, the one call every write makes. */
export interface WriteFunctionNames {
  apply: string;
  keyOpen: string;
  keyKeep: string;
}

/** Where a committed write's NOTIFY payload goes (src/writes/announcer.ts). */
export interface Announcements {
  /** Resolves once the payload's NOTIFY is sent (or dropped); never rejects. */
  announce(payload: string): Promise<void>;
}

/** What the webhooks' procedures need of the process (API-CONTRACT.md §14). */
export interface WebhookHost {
  /** WEBHOOK_ALLOW_PRIVATE_URLS: `http:` and private addresses allowed. */
  allowPrivateUrls: boolean;
  /** How host names are resolved; the system's resolver when absent. */
  resolve?: (hostname: string) => Promise<Array<{ address: string; family: 4 | 6 }>>;
  /** Tells this process's deliverer a webhook of the user may have something to send now. */
  wake?: (userId: number) => void;
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
  /** The user's IANA time zone (API-CONTRACT.md §13): the zone of every "today" rule. */
  timeZone: string;
}

/** The access token a request used (API-CONTRACT.md §16). */
export interface UsedToken {
  id: number;
  kind: 'session' | 'personal';
  /** A personal token's scopes; null for a session, which has every scope. */
  scopes: readonly string[] | null;
}

export interface Authentication {
  user: AuthedUser;
  /** Hash of the access token used: the key of the per-token rate limit. */
  tokenHash: string;
  token: UsedToken;
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

/** What every context is made from; the rest has defaults that fit a call without HTTP. */
export interface ContextInner {
  em: SqlEntityManager;
  clock: Clock;
  authenticate: Context['authenticate'];
  writes: WriteFunctionNames;
  announcer: Announcements;
  /** Request headers by any case of their names; none by default. */
  headers?: Readonly<Record<string, string | undefined>>;
}

/** A context without HTTP: no headers unless given, no rate limits, the production password hash. */
export function createContextInner(inner: ContextInner & Partial<Omit<Context, keyof ContextInner>>): Context {
  const { headers = {}, ...rest } = inner;
  const lower = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]));
  return {
    authorization: lower.authorization,
    baseUrl: 'http://localhost',
    passwordHashCost: PASSWORD_HASH_COST,
    clientIp: '127.0.0.1',
    rateLimits: { authPerMinute: 0, perMinute: 0 },
    header: (name) => lower[name.toLowerCase()],
    setHeader: () => {},
    response: { notModified: false },
    ...rest,
  };
}
