/**
 * The one function that turns any failure into what the client sees (`toErrorResponse`):
 * domain errors as they are, zod input failures by their issues, transport failures by
 * their tRPC code, a database that cannot be reached or cannot write now (read-only: a failover
 * under way) as 503,
 * and everything else as a 500 that reveals nothing. `errorBody` writes the envelope.
 */
import { TRPCError } from '@trpc/server';
import { ConnectionException } from '@mikro-orm/core';
import { DomainError, apiError, fromZodError, type ApiError, type ErrorCode } from './errors.js';
import type { ZodError } from 'zod';

export interface ErrorResponse {
  status: number;
  errors: ApiError[];
  /** Seconds to wait before retrying (429, 503). */
  retryAfter?: number;
  meta?: Record<string, unknown>;
  /** Headers the refusal carries besides Retry-After (WWW-Authenticate on a 403). */
  headers?: Record<string, string>;
}

/** The headers of an error answer besides its media type: Retry-After (429, 503), WWW-Authenticate (403). */
export function errorHeaders(response: Pick<ErrorResponse, 'retryAfter' | 'headers'>): Record<string, string> {
  return { ...(response.retryAfter === undefined ? {} : { 'Retry-After': String(response.retryAfter) }), ...response.headers };
}

/** The body of every error answer (API-CONTRACT.md §2; §10 adds `meta` to a 410). */
export function errorBody(response: Pick<ErrorResponse, 'errors' | 'meta'>): string {
  return JSON.stringify(response.meta ? { errors: response.errors, meta: response.meta } : { errors: response.errors });
}

/**
 * The SQLSTATEs and errnos of a connection that is gone or leads to a server that cannot take
 * writes now: refused, reset, cut off by an administrator or a crash (57P01, 57P02), a server
 * starting or stopping (57P03), and a server that is read-only (25006: a hot standby, a demoted
 * primary a proxy still leads to, `default_transaction_read_only`; the service never opens a
 * read-only transaction itself). The connection that saw one is not used again (`isConnectionUnfit`).
 */
const CONNECTION_UNFIT_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN',
  '57P01', '57P02', '57P03', '08000', '08001', '08003', '08004', '08006', '25006',
]);

const UNAVAILABLE_CODES = new Set([
  ...CONNECTION_UNFIT_CODES,
  '53300',
  // Not our bugs, and over once the load or the operator's fix is in: a statement timeout
  // (57014), a full disk (53100; 503 rather than 507, so clients need one retry rule), out of
  // memory (53200), and no file descriptor left for a connection (EMFILE/ENFILE).
  '57014', '53100', '53200', 'EMFILE', 'ENFILE',
]);

/**
 * Too many connections, said by anyone: PostgreSQL's 53300 ("sorry, too many clients already",
 * "too many connections for role", "remaining connection slots are reserved"), and PgBouncer's
 * "no more connections allowed (max_client_conn)".
 */
const TOO_MANY_CONNECTIONS = /too many (clients|connections)|remaining connection slots are reserved|no more connections allowed/i;

/**
 * What a pooler says when it cannot serve now. PgBouncer sends every error of its own as
 * 08P01 (protocol_violation), which from PostgreSQL would be a bug of ours (500); so 08P01
 * counts only with one of these messages (PgBouncer 1.18's): no client slot, no server
 * connection in time or at all, its own query timeout, shutting down or paused.
 */
const POOLER_UNAVAILABLE =
  /max_client_conn|query_wait_timeout|query_timeout|query timeout|client_login_timeout|server_login_retry|cannot connect to server|server conn crashed|pgbouncer|shutting down|database .* is paused|server_connect_timeout/i;

/** True when the error (or one of its causes) says the database cannot be reached. */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && depth < 8; depth++) {
    if (e instanceof ConnectionException) return true;
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) return true;
    if (typeof message === 'string' && TOO_MANY_CONNECTIONS.test(message)) return true;
    if (code === '08P01' && typeof message === 'string' && POOLER_UNAVAILABLE.test(message)) return true;
    if (typeof message === 'string' && (BROKEN_CONNECTION.test(message) || IN_RECOVERY.test(message))) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * What a server in recovery (a standby, an old primary restarting as one) answers besides
 * 25006: a statement on an unlogged table ("cannot access temporary or unlogged relations
 * during recovery", 0A000), a WAL function ("recovery is in progress", 55000). Its connection
 * leads to the wrong server, as a 25006's does.
 */
const IN_RECOVERY = /during recovery|recovery is in progress/i;

/** Words of node-postgres (and of the pool) for a connection that broke or could not be made. */
const BROKEN_CONNECTION = /Connection terminated|timeout exceeded when trying to connect|connect ECONNREFUSED|Client has encountered a connection error|Query read timeout/i;

/**
 * True when the connection that gave this error must not serve another statement: it is gone,
 * or it leads to a server that is read-only now (after a failover, the old primary). A pooled
 * connection that saw one is closed instead of going back to its pool (src/db/unfit-connections.ts).
 * A statement timeout (57014), a full disk or too many connections leave the connection sound.
 */
export function isConnectionUnfit(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && depth < 8; depth++) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (typeof code === 'string' && CONNECTION_UNFIT_CODES.has(code)) return true;
    if (code === '08P01' && typeof message === 'string' && POOLER_UNAVAILABLE.test(message)) return true;
    if (typeof message === 'string' && (BROKEN_CONNECTION.test(message) || IN_RECOVERY.test(message))) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * The server is gone, not slow: the connection was refused, reset or cut off by a shutdown or
 * a crash, or the pooler says it cannot reach any server. A timeout (the pool's, the pooler's
 * wait, a statement's) or too many clients is not one: under load those come from a busy
 * database, and must not make the service refuse everything (`DatabaseRoleWatch.outage`).
 */
const SERVER_GONE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', '57P01', '57P02', '57P03', '08001', '08003', '08004', '08006']);
const SERVER_GONE = /Connection terminated unexpectedly|connect ECONNREFUSED|server login has been failing|cannot connect to server|server conn crashed/i;

export function isServerGone(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && depth < 8; depth++) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (typeof code === 'string' && SERVER_GONE_CODES.has(code)) return true;
    if (typeof message === 'string' && SERVER_GONE.test(message)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** True when the error (or one of its causes) says the server is read-only (25006) or in recovery: a standby, or a demoted primary. */
export function isReadOnlyDatabase(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && depth < 8; depth++) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (code === '25006' || (typeof message === 'string' && IN_RECOVERY.test(message))) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** The 503 for a database that cannot serve now; `cause` (what it said) is kept for the log, and names a statement that ran out of time. */
export function unavailable(cause?: unknown): DomainError {
  const timedOut = cause !== undefined && sqlStateOf(cause) === '57014';
  const error = DomainError.of('unavailable', timedOut ? { detail: 'The database did not finish this request in time; try again shortly.' } : {}).withRetryAfter(5);
  if (cause !== undefined) error.cause = cause;
  return error;
}

/** The first SQLSTATE of the error or its causes. */
export function sqlStateOf(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 8; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * Whether PostgreSQL answered with an error and the connection is still usable: an error with
 * a SQLSTATE, other than those that end the session (class 08, connection exceptions; 57P0x,
 * the server shutting down or the session terminated).
 */
export function answeredByServer(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !code.startsWith('08') && !/^57P0/.test(code);
}

export function isZodError(error: unknown): error is ZodError {
  return error instanceof Error && error.name === 'ZodError' && Array.isArray((error as ZodError).issues);
}

const single = (code: ErrorCode, detail?: string): ErrorResponse => {
  const error = apiError(code, { detail });
  return { status: Number(error.status), errors: [error] };
};

/** Maps a failure to the status and errors the client sees. */
export function toErrorResponse(error: unknown): ErrorResponse {
  const cause = error instanceof TRPCError ? error.cause : error;
  if (cause instanceof DomainError) {
    return {
      status: cause.status,
      errors: cause.errors,
      ...(cause.retryAfter ? { retryAfter: cause.retryAfter } : {}),
      ...(cause.meta ? { meta: cause.meta } : {}),
      ...(cause.headers ? { headers: cause.headers } : {}),
    };
  }
  if (isDatabaseUnavailable(cause)) return toErrorResponse(unavailable(cause));
  if (error instanceof TRPCError) {
    switch (error.code) {
      case 'PARSE_ERROR':
        return single('invalid_json');
      case 'UNSUPPORTED_MEDIA_TYPE':
        return single('unsupported_media_type');
      case 'PAYLOAD_TOO_LARGE':
        return single('payload_too_large');
      case 'NOT_FOUND':
      case 'METHOD_NOT_SUPPORTED':
        return single('missing_endpoint');
      case 'UNAUTHORIZED':
        return toErrorResponse(DomainError.unauthorized());
      case 'BAD_REQUEST':
        if (isZodError(error.cause)) return toErrorResponse(fromZodError(error.cause, { rawInput: undefined }));
        // The tRPC door could not read the call (bad batch framing, superjson metadata).
        return single('invalid_json', 'The request input could not be read.');
    }
  }
  return single('internal_error');
}
