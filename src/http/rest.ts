/**
 * The REST door: every procedure that has `meta.openapi` answers at its path
 * (src/core/rest-routes.ts: the routes openapi.json describes, matched as trpc-to-openapi
 * matches them). Each call gets its input exactly as trpc-to-openapi's node handler built it
 * (the body's or the query's members, then the path's) and its procedure is called as tRPC's
 * own caller calls it; what that handler did again on every call is done once (the schema
 * walks) or not at all (a second URL parse and route lookup, a Fetch `Request` built for a
 * signal no procedure of this door reads).
 *
 * It also does what the library left to us: 404/415 before the body is read, JSON parsing
 * (of every method's body: a GET or DELETE reads and checks one, then ignores it) with a
 * 100 KiB limit, success statuses (201/204), and the exact error envelope.
 */
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { getTRPCErrorFromUnknown } from '@trpc/server';
import { DomainError, QUERY_PARAMETERS, TOO_DEEP_DETAIL, invalidQueryParameter } from '../core/errors.js';
import { BODY_LIMIT_BYTES } from '../core/limits.js';
import { errorBody, toErrorResponse, type ErrorResponse } from '../core/failures.js';
import type { FailureLog } from '../core/failure-log.js';
import type { AppMeta, Context } from '../core/context.js';
import type { AppRouter } from '../app/router.js';
import { nestsDeeperThan } from './json-depth.js';
import { readsBody, restRoutes, type RestMatch } from '../core/rest-routes.js';

export function sendErrorResponse(res: Response, response: ErrorResponse): void {
  res.status(response.status);
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  if (response.retryAfter !== undefined) res.setHeader('Retry-After', String(response.retryAfter));
  res.end(errorBody(response));
}

/** Thrown by the body parser's verify step; the app's error handler answers it (400 invalid_json). */
export function tooDeep(): Error {
  return Object.assign(new Error(TOO_DEEP_DETAIL), { status: 400, type: 'entity.too.deep' });
}

function isJsonMediaType(contentType: string | undefined): boolean {
  const mediaType = contentType?.split(';')[0]?.trim().toLowerCase();
  return mediaType === 'application/json';
}

/** A body is on its way: announced by a non-zero Content-Length or by Transfer-Encoding. */
function carriesBody(req: Request): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || Number(length) > 0;
}

interface RestOptions {
  router: AppRouter;
  createContext: (req: Request, res: Response) => Context | Promise<Context>;
  /** Where 5xx answers are logged (src/core/failure-log.ts). */
  logFailure: FailureLog;
}

const ROUTE = Symbol('rest route');
type RoutedRequest = Request & { [ROUTE]?: RestMatch };

/** The query as trpc-to-openapi reads it: each member's value, or its values when repeated; empty values left out. */
function queryInput(req: Request): Record<string, unknown> {
  const query: Record<string, unknown> = {};
  const parsed = req.query as Record<string, unknown>;
  for (const key of Object.keys(parsed)) {
    const value = parsed[key];
    if (value) query[key] = Array.isArray(value) && value.length === 1 ? value[0] : value;
  }
  return query;
}

export function restHandlers({ router, createContext, logFailure }: RestOptions): RequestHandler[] {
  const routeOf = restRoutes(router);

  const guard: RequestHandler = (req, res, next) => {
    // Read as trpc-to-openapi read it: a target starting with '//' or '/\' is a path, never
    // another host ('//evil/api/…' names no route); an absolute-form target keeps its own.
    let url: URL;
    try {
      url = new URL(req.url.startsWith('/') ? `http://127.0.0.1${req.url}` : req.url);
    } catch {
      next('router');
      return;
    }
    const found = routeOf(req.method, url.pathname);
    if (!found) {
      next('router');
      return;
    }
    const { meta } = found.procedure;
    // Ids are written as plain positive integers: "01", "1e0", "0x1" or "+1" name no record.
    const id = found.pathInput.id;
    if (id !== undefined && meta?.resource && !/^[1-9][0-9]*$/.test(id)) {
      sendErrorResponse(res, toErrorResponse(DomainError.notFound(meta.resource)));
      return;
    }
    // Query parameters are written one way only (QUERY_PARAMETERS): "?page=", "1e3", "0x10" or
    // "01" are refused here, since empty values are left out of the input and Number() would
    // accept the others.
    for (const name of meta?.queryParameters ?? []) {
      const pattern = QUERY_PARAMETERS[name]?.pattern;
      if (pattern && url.searchParams.has(name) && url.searchParams.getAll(name).some((v) => !pattern.test(v))) {
        sendErrorResponse(res, toErrorResponse(new DomainError([invalidQueryParameter(name)])));
        return;
      }
    }
    // API-CONTRACT.md §1 holds every request that carries a body to JSON, also a GET, a DELETE
    // or a POST that takes none, which then ignore it once it has been read (and found to be
    // JSON within limits).
    const takesBody = readsBody(req.method) && !found.procedure.takesNoInput;
    if ((takesBody || carriesBody(req)) && !isJsonMediaType(req.headers['content-type'])) {
      sendErrorResponse(res, toErrorResponse(DomainError.of('unsupported_media_type')));
      return;
    }
    (req as RoutedRequest)[ROUTE] = found;
    next();
  };

  // Not strict: `42` or `null` is valid JSON whose missing wrapper is a 422, not a 400.
  // The nesting limit is checked on the raw bytes, before JSON.parse and every library after it.
  const parseJson = express.json({
    limit: BODY_LIMIT_BYTES,
    type: () => true,
    strict: false,
    verify: (_req, _res, body) => {
      if (nestsDeeperThan(body)) throw tooDeep();
    },
  });

  const call = async (req: Request, res: Response): Promise<void> => {
    const { procedure, pathInput } = (req as RoutedRequest)[ROUTE]!;
    try {
      // As trpc-to-openapi builds it: the body's members (of a method that takes one) or the
      // query's, then the path's; none for a void input.
      let input: Record<string, unknown> | undefined;
      if (!procedure.takesNoInput) {
        const useBody = readsBody(req.method);
        input = { ...(useBody ? (req.body as Record<string, unknown>) : queryInput(req)), ...pathInput };
        if (!useBody) {
          for (const key of procedure.arrayMembers) if (input[key] !== undefined && !Array.isArray(input[key])) input[key] = [input[key]];
        }
      }
      const ctx: Context = { ...(await createContext(req, res)), door: 'rest' };
      // As tRPC's own caller calls a procedure (router.createCaller), without its proxy.
      const data: unknown = await procedure.procedure({ path: procedure.path, getRawInput: async () => input, ctx, type: procedure.type, signal: undefined, batchIndex: 0 });
      // 304 has no body: Node drops the body written after this status (RFC 9110 §15.4.5).
      const status = ctx.response.notModified ? 304 : (procedure.meta?.successStatus ?? 200);
      res.statusCode = status;
      // The header's name as trpc-to-openapi sent it, in the case it went out before.
      if (status === 200 || status === 201) res.setHeader('content-type', 'application/json; charset=utf-8');
      else res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify(data));
    } catch (cause) {
      // Anything else thrown (from the context factory) is an internal error, its cause kept.
      const error = getTRPCErrorFromUnknown(cause);
      const response = toErrorResponse(error);
      logFailure(error.cause ?? error, response.status, { reqId: req.id });
      sendErrorResponse(res, response);
    }
  };

  const rest: RequestHandler = (req: Request, res: Response, next: NextFunction) => {
    call(req, res).catch(next);
  };
  return [guard, parseJson, rest];
}
