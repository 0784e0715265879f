/**
 * The answers the HTTP layer gives before any procedure is found, in the shape of the door
 * the request addressed (API-CONTRACT.md §8): a bad or missing Host, an Expect or a transfer
 * coding the service does not meet, a request line or header Node cannot parse, headers too
 * large, a method no endpoint answers. Under `/trpc` each is a tRPC error, built as tRPC
 * builds every other error of the door (the error formatter of src/core/trpc.ts, then the
 * transformer: `data.code`, `data.httpStatus`, `data.errors`), with the status and code /api
 * gives; a tRPC client cannot read REST's `{"errors":[…]}`. Elsewhere, REST's envelope.
 *
 * The door is the one Express routes the path to (`app.use('/trpc')`: `/trpc`, `/trpc/…`,
 * `/trpc?…`, letters in either case). Node's own refusals (src/http/http-server.ts) find it
 * from the request target as the service reads it (src/http/request-framing.ts).
 */
import type { Request, Response } from 'express';
import { getTRPCErrorFromUnknown, getTRPCErrorShape, transformTRPCResponse } from '@trpc/server';
import { DomainError } from '../core/errors.js';
import { errorBody, errorHeaders, toErrorResponse } from '../core/failures.js';
import { t, toTRPCError } from '../core/trpc.js';
import { sendErrorResponse } from './rest.js';

export type Door = 'trpc' | 'rest';

const TRPC_PATH = /^\/trpc(?:[/?]|$)/i;

/** The door of a path (as the service reads it: src/http/request-framing.ts), query included or not. */
export function doorOfPath(path: string): Door {
  return TRPC_PATH.test(path) ? 'trpc' : 'rest';
}

/** The procedures a /trpc target calls (`/tasks.create`, `/a,b?batch=1`), relative to /trpc; undefined when its path does not decode. */
export function calledPaths(url: string): { batch: boolean; paths: string[] } | undefined {
  const queryAt = url.indexOf('?');
  const path = queryAt < 0 ? url : url.slice(0, queryAt);
  const batch = queryAt >= 0 && new URLSearchParams(url.slice(queryAt + 1)).get('batch') === '1';
  let decoded: string;
  try {
    decoded = decodeURIComponent(path.replace(/^\//, ''));
  } catch {
    return undefined;
  }
  return { batch, paths: batch ? decoded.split(',') : [decoded] };
}

/** The procedure a single call names (tRPC's `data.path` on its errors); none for a batch, the bare door or a path that does not decode. */
function procedureOf(path: string): string | undefined {
  const called = calledPaths(path.replace(/^\/trpc/i, ''));
  return called && !called.batch && called.paths[0] !== '' ? called.paths[0] : undefined;
}

/** The tRPC headers of an error answer, as tRPC's adapter sends them (with the charset of API-CONTRACT.md §1). */
export const TRPC_ERROR_HEADERS = { 'Content-Type': 'application/json; charset=utf-8', Vary: 'trpc-accept, accept' };

export interface DoorAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * The answer to a refusal on a door: its status (the one /api gives), its headers (media type,
 * Retry-After, WWW-Authenticate) and its body. `path` is the request's path, for the procedure a tRPC error names.
 */
export function doorAnswer(door: Door, error: unknown, path: string): DoorAnswer {
  const response = toErrorResponse(error);
  const headers = errorHeaders(response);
  if (door === 'rest') {
    return { status: response.status, headers: { 'Content-Type': 'application/json; charset=utf-8', ...headers }, body: errorBody(response) };
  }
  const config = t._config;
  const shape = getTRPCErrorShape({
    config,
    error: error instanceof DomainError ? toTRPCError(error) : getTRPCErrorFromUnknown(error),
    type: 'unknown',
    path: procedureOf(path),
    input: undefined,
    ctx: undefined,
  });
  return { status: response.status, headers: { ...TRPC_ERROR_HEADERS, ...headers }, body: JSON.stringify(transformTRPCResponse(config, { error: shape })) };
}

/** Answers a refusal found by a middleware in the shape of the request's door; `path` defaults to the request's (whole) path. */
export function sendRefusal(req: Request, res: Response, error: unknown, path: string = req.originalUrl ?? req.url): void {
  const door = doorOfPath(path);
  if (door === 'rest') {
    sendErrorResponse(res, toErrorResponse(error));
    return;
  }
  const answer = doorAnswer(door, error, path);
  res.status(answer.status);
  for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
  res.end(answer.body);
}
