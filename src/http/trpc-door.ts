/**
 * What the tRPC door checks before tRPC reads a call (API-CONTRACT.md §1, §8):
 *
 * - only GET and POST reach tRPC; any other method is 404 `missing_endpoint` (a TRACE would
 *   make the adapter's `new Request()` throw, a 500);
 * - the body is read here, up to the 100 KiB limit, and its nesting is checked on the raw
 *   text, as is a GET's `input`; tRPC then gets the text as `req.body` and parses it once;
 * - a batch holds at most MAX_BATCH_CALLS calls.
 *
 * A refusal found while reading is remembered on the request and raised from the context
 * factory, so that tRPC answers it in its own error shape (one error per call of a batch),
 * carrying the contract's envelope in `data.errors` like every other /trpc error.
 */
import type { Request, RequestHandler } from 'express';
import { DomainError, TOO_DEEP_DETAIL } from '../core/errors.js';
import { BODY_LIMIT_BYTES, MAX_BATCH_CALLS } from '../core/limits.js';
import { toErrorResponse } from '../core/failures.js';
import { toTRPCError } from '../core/trpc.js';
import { nestsDeeperThan } from './json-depth.js';
import { sendErrorResponse } from './rest.js';

/** Most calls one /trpc batch request may carry. */

type Refusal = 'too_deep' | 'too_large';
const refusals = new WeakMap<Request, Refusal>();

function readBody(req: Request, limit: number): Promise<{ text: string } | { tooLarge: true }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onEnd);
      req.off('aborted', onEnd);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        req.pause();
        resolve({ tooLarge: true });
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve({ text: Buffer.concat(chunks).toString('utf8') });
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onEnd);
    req.on('aborted', onEnd);
  });
}

/** Express middleware in front of tRPC's. */
export const trpcDoorGuard: RequestHandler = (req, res, next) => {
  if (req.method !== 'GET' && req.method !== 'POST') {
    sendErrorResponse(res, toErrorResponse(DomainError.of('missing_endpoint')));
    return;
  }
  if (req.method === 'GET') {
    let input: string | null = null;
    try {
      input = new URL(req.url, 'http://localhost').searchParams.get('input');
    } catch {
      // An unreadable URL: tRPC answers it (400) when it parses it itself.
    }
    if (input !== null && nestsDeeperThan(input)) refusals.set(req, 'too_deep');
    next();
    return;
  }
  readBody(req, BODY_LIMIT_BYTES).then((body) => {
    if ('tooLarge' in body) {
      refusals.set(req, 'too_large');
      req.body = '';
    } else if (nestsDeeperThan(body.text)) {
      refusals.set(req, 'too_deep');
      req.body = '';
    } else {
      req.body = body.text;
    }
    next();
  }, next);
};

/** Raised from the context factory: what the guard found, and the batch cap. */
export function refuseCall(req: Request, info: { isBatchCall: boolean; calls: readonly unknown[] } | undefined): void {
  const refusal = refusals.get(req);
  if (refusal === 'too_deep') {
    throw toTRPCError(DomainError.of('invalid_json', { detail: TOO_DEEP_DETAIL }));
  }
  if (refusal === 'too_large') {
    throw toTRPCError(DomainError.of('payload_too_large'));
  }
  if (info?.isBatchCall && info.calls.length > MAX_BATCH_CALLS) {
    throw toTRPCError(
      DomainError.of('batch_too_large', { detail: `A batch may hold at most ${MAX_BATCH_CALLS} calls; this one holds ${info.calls.length}.` }),
    );
  }
}
