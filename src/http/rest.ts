/**
 * The REST door: every procedure that has `meta.openapi` answers at its path
 * (src/core/rest-routes.ts: the routes openapi.json describes, matched as trpc-to-openapi
 * matches them). Each call gets its input exactly as trpc-to-openapi's node handler built it
 * (the body's or the query's members, then the path's) and its procedure is called as tRPC's
 * own caller calls it; what that handler did again on every call is done once (the schema
 * walks) or not at all (a second URL parse and route lookup, a Fetch `Request` built for a
 * signal no procedure of this door reads).
 *
 * It also does what the library left to us: 404 for a path and method no route answers,
 * before anything else; the checks of the path id, the query and the body (read as both doors
 * read it: src/http/request-body.ts; a GET or DELETE reads and checks one, then ignores it),
 * whose refusal the procedure raises only once the caller is authenticated; success statuses
 * (201/204), and the exact error envelope.
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { getTRPCErrorFromUnknown } from '@trpc/server';
import { DomainError } from '../core/errors.js';
import { QUERY_PARAMETERS } from '../core/list-query.js';
import { errorBody, errorHeaders, toErrorResponse, type ErrorResponse } from '../core/failures.js';
import type { FailureLog } from '../core/failure-log.js';
import type { Context } from '../core/context.js';
import type { AppRouter } from '../app/router.js';
import { isUtf8 } from 'node:buffer';
import { bodilessUntyped, carriesBody, mediaTypeRefusal, percentDecodedBytes, readBody, textOf } from './request-body.js';
import { noteRestMatch, readsBody, restRoutes, type RestMatch } from '../core/rest-routes.js';
import { StreamedAnswer } from '../core/streamed-answer.js';
import { drained } from './drained.js';

export function sendErrorResponse(res: Response, response: ErrorResponse): void {
  res.status(response.status);
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  for (const [name, value] of Object.entries(errorHeaders(response))) res.setHeader(name, value);
  res.end(errorBody(response));
}

interface RestOptions {
  router: AppRouter;
  createContext: (req: Request, res: Response) => Context | Promise<Context>;
  /** Where 5xx answers are logged (src/core/failure-log.ts). */
  logFailure: FailureLog;
}

const INTEGER_TEXT = /^(0|[1-9][0-9]*)$/;
const ID_TEXT = /^[1-9][0-9]*$/;

/** An integer written as decimal digits, with no sign, leading zero, exponent or space; else the text, which the schema refuses. */
const integerOf = (text: string): number | string => (INTEGER_TEXT.test(text) ? Number(text) : text);

/**
 * A query parameter's text as its schema reads it (QUERY_PARAMETERS: integers, comma lists,
 * ids and `none`). Text that does not read stays text, and a parameter given more than once
 * becomes null: the schema refuses both as `invalid` on that parameter, with every other bad
 * parameter of the request.
 */
function queryValue(name: string, value: string | string[]): unknown {
  if (Array.isArray(value)) return value.length === 1 ? queryValue(name, value[0]!) : null;
  switch (QUERY_PARAMETERS[name]?.kind) {
    case 'integer':
      return integerOf(value);
    case 'list':
      return value.split(',');
    case 'ids':
      return value.split(',').map((v) => (v === 'none' ? null : ID_TEXT.test(v) ? Number(v) : v));
    default:
      return value;
  }
}

/**
 * The names of the query's members whose value is not UTF-8 once percent-decoded: Express
 * reads such a value with U+FFFD in place of the bytes, which would then be searched for.
 */
function notUtf8(url: string): Set<string> {
  const names = new Set<string>();
  const queryAt = url.indexOf('?');
  if (queryAt < 0) return names;
  for (const member of url.slice(queryAt + 1).split('&')) {
    const equals = member.indexOf('=');
    if (equals < 0 || !member.includes('%')) continue;
    if (!isUtf8(percentDecodedBytes(member.slice(equals + 1)))) names.add(percentDecodedBytes(member.slice(0, equals)).toString('utf8'));
  }
  return names;
}

/** The query's parameters that the procedure takes, read into their types; other parameters are ignored. */
function queryInput(req: Request, names: readonly string[]): Record<string, unknown> {
  const query: Record<string, unknown> = {};
  const parsed = req.query as Record<string, string | string[] | undefined>;
  const broken = req.url.includes('%') ? notUtf8(req.url) : undefined;
  for (const name of names) {
    const value = parsed[name];
    // Bytes that are no UTF-8 read as null: refused as `invalid` on the parameter.
    if (value !== undefined) query[name] = broken?.has(name) ? null : queryValue(name, value);
  }
  return query;
}

/**
 * What the path id says against the request, before its body is read: ids are written as
 * plain positive integers ("01", "1e0", "0x1" or "+1" name no record).
 */
function pathRefusal({ procedure, pathInput }: RestMatch): DomainError | undefined {
  const { meta } = procedure;
  const id = pathInput.id;
  if (id !== undefined && meta?.resource && !ID_TEXT.test(id)) return DomainError.notFound(meta.resource);
  return undefined;
}

/** Reads a request's body as JSON (src/http/request-body.ts); `42` or `null` is valid JSON whose missing wrapper is a 422. */
async function jsonBody(req: Request): Promise<{ body: unknown } | { refusal: DomainError }> {
  const read = await readBody(req);
  if ('refusal' in read) return read;
  const decoded = textOf(read.bytes);
  if ('refusal' in decoded) return decoded;
  if (decoded.text === '') return { body: {} };
  try {
    return { body: JSON.parse(decoded.text) };
  } catch {
    return { refusal: DomainError.of('invalid_json') };
  }
}

/** What refuses a body sent to an operation that takes none: none when it is empty, else the rules of any body. */
export async function ignoredBodyRefusal(req: Request): Promise<DomainError | undefined> {
  const read = await readBody(req);
  if ('refusal' in read) return read.refusal;
  if (read.bytes.length === 0) return undefined;
  const mediaType = mediaTypeRefusal(req);
  if (mediaType) return mediaType;
  const decoded = textOf(read.bytes);
  if ('refusal' in decoded) return decoded.refusal;
  try {
    JSON.parse(decoded.text);
    return undefined;
  } catch {
    return DomainError.of('invalid_json');
  }
}

/** How long a streamed answer waits for a client that does not read, holding its database connection. */
export const STREAM_DRAIN_MS = 30_000;

/**
 * Writes a StreamedAnswer (src/core/streamed-answer.ts). Its first chunk is read before the
 * status is sent: a failure there throws, and the caller answers with the error envelope.
 * Then each chunk is written once the previous ones drained; a client that goes away, or that
 * reads nothing for STREAM_DRAIN_MS, ends the body's iterator (which releases what it holds)
 * and its connection. A failure after the answer started cannot become an envelope: the
 * response is cut short (no final chunk), which the client sees as an incomplete body.
 *
 * A `frame` writes the body inside an envelope of another door (tRPC's `{"result":…}`): its
 * media type instead of the answer's and its headers, `head` before the first chunk, `tail`
 * after the last.
 */
export async function sendStreamed(res: Response, answer: StreamedAnswer, logFailure: FailureLog, frame?: { contentType: string; head: string; tail: string }): Promise<void> {
  const chunks = answer.body[Symbol.asyncIterator]();
  let done = false;
  try {
    let next = await chunks.next();
    if (res.destroyed) return;
    res.statusCode = 200;
    res.setHeader('Content-Type', frame?.contentType ?? answer.contentType);
    if (!frame) for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
    if (frame) res.write(frame.head);
    try {
      while (!next.done) {
        if (!res.write(next.value) && !(await drained(res, STREAM_DRAIN_MS))) {
          res.destroy();
          return;
        }
        if (res.destroyed) return;
        next = await chunks.next();
      }
      done = true;
      res.end(frame?.tail);
    } catch (error) {
      done = true;
      const response = toErrorResponse(error);
      logFailure(error, response.status, { reqId: res.getHeader('x-request-id'), stream: 'ended' });
      res.destroy();
    }
  } finally {
    // Stopped early (the client gone, or too slow): what the body holds is released now.
    if (!done) await chunks.return?.();
  }
}

export function restHandlers({ router, createContext, logFailure }: RestOptions): RequestHandler {
  const routeOf = restRoutes(router);

  const call = async (req: Request, res: Response, route: RestMatch): Promise<void> => {
    const { procedure, pathInput } = route;
    try {
      // API-CONTRACT.md §1 holds every request that carries a body to JSON, also a GET, a
      // DELETE or a POST that takes none, which then ignore it once it has been read (and
      // found to be JSON within limits). What is wrong with the request is found here and
      // raised by the procedure after authentication.
      let refusal = pathRefusal(route);
      const takesBody = readsBody(req.method) && procedure.takesBody;
      let body: unknown;
      if (!refusal && takesBody) {
        // One that takes a body is sent JSON, also when the body is empty (then `{}`); one sent
        // with no body at all needs no media type (§1 holds requests with a body to it).
        refusal = bodilessUntyped(req) ? undefined : mediaTypeRefusal(req);
        if (!refusal) {
          const read = await jsonBody(req);
          if ('refusal' in read) refusal = read.refusal;
          else body = read.body;
        }
      } else if (!refusal && carriesBody(req)) {
        // One that takes none reads what is sent: nothing (a chunked body of no bytes), or JSON it then ignores.
        refusal = await ignoredBodyRefusal(req);
      }
      // As trpc-to-openapi builds it: the body's members (of a method that takes one) or the
      // query's, then the path's; none for a void input.
      let input: Record<string, unknown> | undefined;
      if (!procedure.takesNoInput && !refusal) {
        const useBody = readsBody(req.method);
        input = { ...(useBody ? (body as Record<string, unknown>) : queryInput(req, procedure.meta?.queryParameters ?? [])), ...pathInput };
      }
      const queryAt = req.url.indexOf('?');
      const ctx: Context = { ...(await createContext(req, res)), door: 'rest', query: queryAt < 0 ? '' : req.url.slice(queryAt + 1), refusal };
      // As tRPC's own caller calls a procedure (router.createCaller), without its proxy.
      const data: unknown = await procedure.procedure({ path: procedure.path, getRawInput: async () => input, ctx, type: procedure.type, signal: undefined, batchIndex: 0 });
      if (data instanceof StreamedAnswer) {
        // Counted as a running procedure while it reads, also after its client has gone.
        const leave = ctx.enterProcedure?.();
        try {
          await sendStreamed(res, data, logFailure);
        } finally {
          leave?.();
        }
        return;
      }
      // 304 has no body: Node drops the body written after this status (RFC 9110 §15.4.5).
      const status = ctx.response.notModified ? 304 : (procedure.meta?.successStatus ?? 200);
      res.statusCode = status;
      // 204 and 304 have no content to describe (RFC 9110 §15.3.5, §15.4.5). The header's name
      // as trpc-to-openapi sent it, in the case it went out before.
      if (status !== 204 && status !== 304) res.setHeader('content-type', 'application/json; charset=utf-8');
      res.end(JSON.stringify(data));
    } catch (cause) {
      // Anything else thrown (from the context factory) is an internal error, its cause kept.
      const error = getTRPCErrorFromUnknown(cause);
      const response = toErrorResponse(error);
      logFailure(error.cause ?? error, response.status, { reqId: req.id });
      sendErrorResponse(res, response);
    }
  };

  // The target was normalised before any middleware ran (src/http/request-framing.ts): its
  // path is what the routes are matched against, as trpc-to-openapi matched them.
  return (req: Request, res: Response, next: NextFunction) => {
    const queryAt = req.url.indexOf('?');
    const route = routeOf(req.method, queryAt < 0 ? req.url : req.url.slice(0, queryAt));
    // The metrics label the request with this match, not with one of their own.
    noteRestMatch(req, route);
    if (!route) {
      next('router');
      return;
    }
    call(req, res, route).catch(next);
  };
}
