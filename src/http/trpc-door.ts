/**
 * What the tRPC door checks before tRPC reads a call (API-CONTRACT.md §1, §8):
 *
 * - only GET and POST reach tRPC, and a subscription only with GET; any other method is 404
 *   `missing_endpoint` (a TRACE would make the adapter's `new Request()` throw, a 500), and so
 *   is a path that does not percent-decode (tRPC answered it in text/plain);
 * - a POST's body is read here as the REST door reads one (src/http/request-body.ts: UTF-8
 *   `application/json`, unencoded, whole, up to 100 KiB, at most 64 levels deep; a call of
 *   procedures that take no input may come with no body and no media type, as on REST), and a
 *   GET's `input` is checked the same way (UTF-8 once percent-decoded, the nesting limit), as
 *   is a body a GET carries; tRPC then gets the text as `req.body` and parses it once;
 * - a batch holds at most MAX_BATCH_CALLS calls (one error each); one far over that is refused
 *   with one tRPC error, not thousands (a batch client reads it as the error of every call).
 *
 * - a batch calls procedures of one kind, and no subscription: tRPC cannot answer queries with
 *   mutations, nor a subscription in a batch (400 `invalid`);
 * - every JSON answer under /trpc says `application/json; charset=utf-8` (§1), also those tRPC's
 *   adapter labels `application/json` or, for a call it could not frame, `text/plain`.
 *
 * What the guard refuses itself (a method, a path, a batch far over the cap, a batch of mixed
 * kinds) is a tRPC error too, as every answer under /trpc is (src/http/door-errors.ts).
 *
 * A refusal found while reading is remembered on the request and handed to each call's
 * context (`doorRefusal`); the procedure raises it after authenticating the caller, as on
 * REST, and tRPC answers it in its own error shape (one error per call of a batch), carrying
 * the contract's envelope in `data.errors` like every other /trpc error.
 */
import type { Request, RequestHandler } from 'express';
import { DomainError } from '../core/errors.js';
import { MAX_BATCH_CALLS } from '../core/limits.js';
import { toTRPCError } from '../core/trpc.js';
import type { AnyTRPCProcedure, AnyTRPCRouter } from '@trpc/server';
import { bodilessUntyped, carriesBody, mediaTypeRefusal, percentDecodedBytes, readBody, textOf } from './request-body.js';
import { ignoredBodyRefusal } from './rest.js';
import { calledPaths, sendRefusal } from './door-errors.js';

const refusals = new WeakMap<Request, DomainError>();

const JSON_MEDIA_TYPE = 'application/json; charset=utf-8';

/** The raw (still percent-encoded) value of the first `input` member of the query, as tRPC reads that member. */
export function rawQueryInput(url: string): string | undefined {
  const queryAt = url.indexOf('?');
  if (queryAt < 0) return undefined;
  for (const member of url.slice(queryAt + 1).split('&')) {
    const equals = member.indexOf('=');
    const name = equals < 0 ? member : member.slice(0, equals);
    if (percentDecodedBytes(name).toString('utf8') === 'input') return equals < 0 ? '' : member.slice(equals + 1);
  }
  return undefined;
}

/** More calls than this in one batch are refused with one envelope, not one error per call. */
const MAX_ANSWERED_CALLS = 5 * MAX_BATCH_CALLS;

/** Express middleware in front of tRPC's, for the procedures of `router`. */
export function trpcDoorGuard(router: AnyTRPCRouter): RequestHandler {
  const procedures = router._def.procedures as Record<string, AnyTRPCProcedure>;
  return (req, res, next) => {
    const setHeader = res.setHeader.bind(res);
    res.setHeader = (name, value) =>
      setHeader(name, name.toLowerCase() === 'content-type' && /^(application\/json|text\/plain)\b/i.test(String(value)) ? JSON_MEDIA_TYPE : value);
    if (req.method !== 'GET' && req.method !== 'POST') {
      sendRefusal(req, res, DomainError.of('missing_endpoint'));
      return;
    }
    const called = calledPaths(req.url);
    const paths = called?.paths;
    // The input's depth as on /api: superjson's `{"json": …}` around it, and a batch's `{"0": …}` around that, are not counted.
    const envelope = called?.batch ? 2 : 1;
    if (paths === undefined) {
      sendRefusal(req, res, DomainError.of('missing_endpoint'));
      return;
    }
    if (paths.length > MAX_ANSWERED_CALLS) {
      const detail = `A batch may hold at most ${MAX_BATCH_CALLS} calls; this one holds ${paths.length}.`;
      sendRefusal(req, res, DomainError.of('batch_too_large', { detail }));
      return;
    }
    const kinds = new Set(paths.map((path) => procedures[path]?._def.type).filter((kind) => kind !== undefined));
    if (kinds.size > 1 || (calledPaths(req.url)?.batch && kinds.has('subscription'))) {
      const detail = 'A batch holds queries only or mutations only; a subscription is called on its own, not in a batch.';
      sendRefusal(req, res, DomainError.of('invalid', { status: 400, detail }));
      return;
    }
    // A subscription is read with GET (an event stream); tRPC would answer a POST with one that
    // carries the error. No endpoint answers it, as a query's POST and a mutation's GET.
    if (req.method === 'POST' && kinds.has('subscription')) {
      sendRefusal(req, res, DomainError.of('missing_endpoint'));
      return;
    }
    const refuse = (refusal: DomainError | undefined) => {
      if (refusal) refusals.set(req, refusal);
      if (req.method === 'POST') {
        // tRPC gets a call it can frame (JSON, no input), whose procedure raises the refusal.
        req.headers['content-type'] = 'application/json';
        req.body = '';
      }
      next();
    };
    if (req.method === 'GET') {
      // The input is in the query; a body sent along is read and held to the rules of any body.
      const input = rawQueryInput(req.url);
      const decoded = input === undefined ? undefined : textOf(percentDecodedBytes(input), envelope);
      const inputRefusal = decoded && 'refusal' in decoded ? decoded.refusal : undefined;
      if (inputRefusal || !carriesBody(req)) {
        refuse(inputRefusal);
        return;
      }
      ignoredBodyRefusal(req).then(refuse, next);
      return;
    }
    // A call with no body needs no media type: a call without input, as on REST.
    if (bodilessUntyped(req)) {
      req.headers['content-type'] = 'application/json';
      req.body = '';
      next();
      return;
    }
    const mediaType = mediaTypeRefusal(req);
    if (mediaType) {
      refuse(mediaType);
      return;
    }
    readBody(req).then((read) => {
      if ('refusal' in read) return refuse(read.refusal);
      const decoded = textOf(read.bytes, envelope);
      if ('refusal' in decoded) return refuse(decoded.refusal);
      req.body = decoded.text;
      next();
    }, next);
  };
}

/** For the context factory: what the guard found (raised by the procedure, after authentication); a batch over the cap throws. */
export function doorRefusal(req: Request, info: { isBatchCall: boolean; calls: readonly unknown[] } | undefined): DomainError | undefined {
  if (info?.isBatchCall && info.calls.length > MAX_BATCH_CALLS) {
    throw toTRPCError(
      DomainError.of('batch_too_large', { detail: `A batch may hold at most ${MAX_BATCH_CALLS} calls; this one holds ${info.calls.length}.` }),
    );
  }
  return refusals.get(req);
}
