/**
 * The REST door: every procedure that has `meta.openapi` answers at its path, routed by
 * trpc-to-openapi's own procedure cache (`createProcedureCache`, the routes openapi.json
 * describes). What the library's node handler did on every call is done here once, at
 * start: which procedures take no input, which query members are arrays, and the library's
 * `coerceSchema` on each input schema (it walked the schema again on every call). Per call
 * there is one URL parse and one route lookup (the library repeated both after this file's
 * checks) and no Fetch `Request` (the library built one for a signal no procedure of this
 * door reads). The input is built exactly as the library builds it, and the procedure is
 * called as tRPC's own caller calls it.
 *
 * This file also does what the library left to us: 404/415 before the body is read, JSON
 * parsing (of every method's body: a GET or DELETE reads and checks one, then ignores it)
 * with a 100 KiB limit, success statuses (201/204), and the exact error envelope.
 */
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { TRPCError } from '@trpc/server';
import {
  acceptsRequestBody,
  coerceSchema,
  createProcedureCache,
  getInputOutputParsers,
  instanceofZodTypeLikeVoid,
  instanceofZodTypeObject,
  instanceofZodTypeOptional,
  normalizePath,
  unwrapZodType,
  zodSupportsCoerce,
  type OpenApiMethod,
} from 'trpc-to-openapi';
import { ZodArray, type ZodObject, type ZodRawShape } from 'zod/v4';
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

/** A procedure of this door, with what its calls need worked out once. */
interface RestProcedure {
  path: string;
  procedure: (options: { path: string; getRawInput: () => Promise<unknown>; ctx: unknown; type: 'query' | 'mutation'; signal: undefined; batchIndex: number }) => Promise<unknown>;
  type: 'query' | 'mutation';
  meta: AppMeta | undefined;
  /** Input is void: the call gets none (revoke, a stream ticket), and a body is not expected. */
  takesNoInput: boolean;
  /** An input object: the names of its array members (a single query value becomes an array of one). */
  arrayMembers: string[] | undefined;
}

/** The request's route, found by the guard and used by the call. */
interface RestRoute {
  procedure: RestProcedure;
  pathInput: Record<string, string>;
}

const ROUTE = Symbol('rest route');
type RoutedRequest = Request & { [ROUTE]?: RestRoute };

/**
 * What trpc-to-openapi's handler works out from an input schema on every call, once: whether
 * the input is void, its array members, and `coerceSchema` (which switches `coerce` on for the
 * numbers, booleans and dates of an input object, except those src/core/fields.ts pins off).
 */
function prepare(path: string, procedure: RestProcedure['procedure'] & { _def: { type: string; meta?: AppMeta } }): RestProcedure {
  const { inputParser } = getInputOutputParsers(procedure as never);
  const schema = unwrapZodType(inputParser, true);
  let arrayMembers: string[] | undefined;
  if (zodSupportsCoerce && instanceofZodTypeObject(schema)) {
    const shape = (schema as unknown as ZodObject<ZodRawShape>).shape;
    arrayMembers = Object.keys(shape).filter((key) => {
      const member = shape[key]!;
      return member instanceof ZodArray || (instanceofZodTypeOptional(member) && member.unwrap() instanceof ZodArray);
    });
    coerceSchema(schema as unknown as ZodObject<ZodRawShape>);
  }
  return {
    path,
    procedure,
    type: procedure._def.type as RestProcedure['type'],
    meta: procedure._def.meta,
    takesNoInput: instanceofZodTypeLikeVoid(schema),
    arrayMembers,
  };
}

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

/** A failure of the call as a TRPCError (anything else thrown is an internal error, its cause kept). */
function asTrpcError(cause: unknown): TRPCError {
  if (cause instanceof TRPCError) return cause;
  return new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: 'Internal server error', cause: cause instanceof Error ? cause : undefined });
}

export function restHandlers({ router, createContext, logFailure }: RestOptions): RequestHandler[] {
  const findProcedure = createProcedureCache(router);
  const prepared = new Map<string, RestProcedure>();
  const procedures = router._def.procedures as unknown as Record<string, Parameters<typeof prepare>[1]>;
  for (const [path, procedure] of Object.entries(procedures)) {
    if (procedure._def.meta?.openapi && procedure._def.type !== 'subscription') prepared.set(path, prepare(path, procedure));
  }

  const guard: RequestHandler = (req, res, next) => {
    const url = new URL(req.url, 'http://localhost');
    const found = findProcedure(req.method as OpenApiMethod, normalizePath(url.pathname));
    const procedure = found?.procedure && prepared.get(found.procedure.path);
    if (!found || !procedure) {
      next('router');
      return;
    }
    const { meta } = procedure;
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
    const takesBody = acceptsRequestBody(req.method as OpenApiMethod) && !procedure.takesNoInput;
    if ((takesBody || carriesBody(req)) && !isJsonMediaType(req.headers['content-type'])) {
      sendErrorResponse(res, toErrorResponse(DomainError.of('unsupported_media_type')));
      return;
    }
    (req as RoutedRequest)[ROUTE] = { procedure, pathInput: found.pathInput };
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
        const useBody = acceptsRequestBody(req.method as OpenApiMethod);
        input = { ...(useBody ? (req.body as Record<string, unknown>) : queryInput(req)), ...pathInput };
        if (!useBody) {
          for (const key of procedure.arrayMembers ?? []) if (input[key] !== undefined && !Array.isArray(input[key])) input[key] = [input[key]];
        }
      }
      const ctx: Context = { ...(await createContext(req, res)), door: 'rest' };
      const data = await procedure.procedure({ path: procedure.path, getRawInput: async () => input, ctx, type: procedure.type, signal: undefined, batchIndex: 0 });
      // 304 has no body: Node drops the body written after this status (RFC 9110 §15.4.5).
      const status = ctx.response.notModified ? 304 : (procedure.meta?.successStatus ?? 200);
      res.statusCode = status;
      res.setHeader('Content-Type', status === 200 || status === 201 ? 'application/json; charset=utf-8' : 'application/json');
      res.end(JSON.stringify(data));
    } catch (cause) {
      const error = asTrpcError(cause);
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
