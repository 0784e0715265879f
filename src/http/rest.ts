/**
 * The REST door: trpc-to-openapi serves every procedure that has `meta.openapi`, and this
 * file adds what the library leaves to us: 404/415 before the body is read, JSON parsing
 * (of every method's body: a GET or DELETE reads and checks one, then ignores it)
 * with a 100 KiB limit, success statuses (201/204), and the exact error envelope.
 *
 * The library writes its own error body ({message, code, issues}); `onError` runs just
 * before it, so that is where this request's `res.end` is swapped for one that writes the
 * envelope instead.
 */
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import type { TRPCError } from '@trpc/server';
import {
  acceptsRequestBody,
  createOpenApiNodeHttpHandler,
  createProcedureCache,
  normalizePath,
} from 'trpc-to-openapi';
import { DomainError, QUERY_PARAMETERS, TOO_DEEP_DETAIL, invalidQueryParameter } from '../core/errors.js';
import { BODY_LIMIT_BYTES } from '../core/limits.js';
import { errorBody, toErrorResponse, type ErrorResponse } from '../core/failures.js';
import type { FailureLog } from '../core/failure-log.js';
import type { AppMeta, Context } from '../core/context.js';
import type { AppRouter } from '../app/router.js';
import { nestsDeeperThan } from './json-depth.js';

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

export function restHandlers({ router, createContext, logFailure }: RestOptions): RequestHandler[] {
  const findProcedure = createProcedureCache(router);
  const procedures = router._def.procedures as unknown as Record<string, { _def: { meta?: AppMeta; inputs: Array<{ _zod?: { def: { type: string } } }> } }>;
  /** Operations whose input is void take no body (revoke, a stream ticket): like a GET. */
  const takesBody = (path: string | undefined, method: string) => {
    const inputs = path ? procedures[path]?._def.inputs : undefined;
    return acceptsRequestBody(method as never) && !(inputs?.length === 1 && inputs[0]?._zod?.def.type === 'void');
  };

  const guard: RequestHandler = (req, res, next) => {
    const url = new URL(req.url, 'http://localhost');
    const found = findProcedure(req.method as never, normalizePath(url.pathname));
    if (!found) {
      next('router');
      return;
    }
    const meta = found.procedure ? procedures[found.procedure.path]?._def.meta : undefined;
    // Ids are written as plain positive integers: "01", "1e0", "0x1" or "+1" name no record.
    const id = (found.pathInput as Record<string, string>).id;
    if (id !== undefined && meta?.resource && !/^[1-9][0-9]*$/.test(id)) {
      sendErrorResponse(res, toErrorResponse(DomainError.notFound(meta.resource)));
      return;
    }
    // Query parameters are written one way only (QUERY_PARAMETERS): "?page=", "1e3", "0x10" or
    // "01" are refused here, since the library would skip empty values and Number() would
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
    if (takesBody(found.procedure?.path, req.method) || carriesBody(req)) {
      if (!isJsonMediaType(req.headers['content-type'])) {
        sendErrorResponse(res, toErrorResponse(DomainError.of('unsupported_media_type')));
        return;
      }
      // Media types are case-insensitive; the library compares them case-sensitively.
      req.headers['content-type'] = req.headers['content-type']!.toLowerCase();
    } else if (acceptsRequestBody(req.method as never)) {
      // A POST that takes no body and sent none: the library would ask for a media type anyway.
      req.headers['content-type'] = 'application/json';
    }
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

  const handler = createOpenApiNodeHttpHandler({
    router,
    createContext: async ({ req, res }: { req: Request; res: Response }) => ({ ...(await createContext(req, res)), door: 'rest' }),
    maxBodySize: BODY_LIMIT_BYTES,
    responseMeta: ({ paths, errors, ctx }: { paths?: readonly string[]; errors: readonly unknown[]; ctx?: Context }) => {
      if (errors.length > 0) return {};
      // 304 has no body: Node drops the body written after this status (RFC 9110 §15.4.5).
      if (ctx?.response.notModified) return { status: 304 };
      const meta = paths?.[0] ? procedures[paths[0]]?._def.meta : undefined;
      return {
        status: meta?.successStatus ?? 200,
        headers: meta?.successStatus === 204 ? {} : { 'content-type': 'application/json; charset=utf-8' },
      };
    },
    onError: ({ error, req }: { error: TRPCError; req: Request }) => {
      const res = req.res!;
      const response = toErrorResponse(error);
      logFailure(error.cause ?? error, response.status, { reqId: req.id });
      const end = res.end.bind(res);
      res.end = (() => {
        res.end = end;
        sendErrorResponse(res, response);
        return res;
      }) as typeof res.end;
    },
  } as unknown as Parameters<typeof createOpenApiNodeHttpHandler>[0]);

  const rest: RequestHandler = (req: Request, res: Response, next: NextFunction) => {
    handler(req, res, next).catch(next);
  };
  return [guard, parseJson, rest];
}
