/**
 * Classifies any thrown value into the error envelope: domain errors as they are, zod
 * input failures by their issues, transport failures by their tRPC code, a database that
 * cannot be reached as 503, and everything else as a 500 that reveals nothing.
 */
import { TRPCError } from '@trpc/server';
import { ConnectionException } from '@mikro-orm/core';
import { DomainError, apiError, fromZodError, type ApiError } from './errors.js';
import type { ZodError } from 'zod';

export interface ErrorResponse {
  status: number;
  errors: ApiError[];
  /** Seconds to wait before retrying (429, 503). */
  retryAfter?: number;
}

const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN',
  '57P01', '57P02', '57P03', '08000', '08001', '08003', '08004', '08006', '53300',
  // Not our bugs, and over once the load or the operator's fix is in: a statement timeout
  // (57014), a full disk (53100; 503 rather than 507, so clients need one retry rule), out of
  // memory (53200), and no file descriptor left for a connection (EMFILE/ENFILE).
  '57014', '53100', '53200', 'EMFILE', 'ENFILE',
]);

/** True when the error (or one of its causes) says the database cannot be reached. */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && depth < 8; depth++) {
    if (e instanceof ConnectionException) return true;
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) return true;
    if (typeof message === 'string' && /Connection terminated|timeout exceeded when trying to connect|connect ECONNREFUSED|Client has encountered a connection error|Query read timeout/i.test(message)) {
      return true;
    }
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** The 503 for a database that cannot serve now; `cause` (what it said) is kept for the log. */
export function unavailable(cause?: unknown): DomainError {
  const error = DomainError.of(503, 'service_unavailable', 'The database cannot be reached right now; try again shortly.');
  error.retryAfter = 5;
  if (cause !== undefined) error.cause = cause;
  return error;
}

export function isZodError(error: unknown): error is ZodError {
  return error instanceof Error && error.name === 'ZodError' && Array.isArray((error as ZodError).issues);
}

/** Maps a failure to the status and errors the client sees. */
export function toErrorResponse(error: unknown): ErrorResponse {
  const cause = error instanceof TRPCError ? error.cause : error;
  if (cause instanceof DomainError) {
    return { status: cause.status, errors: cause.errors, ...(cause.retryAfter ? { retryAfter: cause.retryAfter } : {}) };
  }
  if (isDatabaseUnavailable(cause)) return toErrorResponse(unavailable());
  if (error instanceof TRPCError) {
    switch (error.code) {
      case 'PARSE_ERROR':
        return { status: 400, errors: [apiError(400, 'invalid_json', 'The request body is not valid JSON.')] };
      case 'UNSUPPORTED_MEDIA_TYPE':
        return { status: 415, errors: [apiError(415, 'unsupported_media_type', 'Send the body as application/json.')] };
      case 'PAYLOAD_TOO_LARGE':
        return { status: 413, errors: [apiError(413, 'payload_too_large', 'The request body is larger than 100 KiB.')] };
      case 'NOT_FOUND':
      case 'METHOD_NOT_SUPPORTED':
        return { status: 404, errors: [apiError(404, 'missing_endpoint', 'No endpoint answers this method and path.')] };
      case 'UNAUTHORIZED':
        return toErrorResponse(DomainError.unauthorized());
      case 'BAD_REQUEST':
        if (isZodError(error.cause)) return toErrorResponse(fromZodError(error.cause, { rawInput: undefined }));
        // The tRPC door could not read the call (bad batch framing, superjson metadata).
        return { status: 400, errors: [apiError(400, 'invalid_json', 'The request input could not be read.')] };
    }
  }
  return { status: 500, errors: [apiError(500, 'internal_error', 'Something went wrong on our side; the request id identifies it in our logs.')] };
}
