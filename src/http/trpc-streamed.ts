/**
 * Procedures whose answer has no bound (the account's export, API-CONTRACT.md §16: "streamed,
 * constant memory") called alone on /trpc: tRPC's adapter serialises a procedure's value in one
 * piece, so such a call is run here instead, as the REST door runs a procedure (its
 * middlewares: authentication, rate limit, scope, the door's refusal), with `streamsJson` in its
 * context. Its StreamedAnswer of JSON is written chunk by chunk inside tRPC's envelope,
 * `{"result":{"data":{"json":<document>}}}` (superjson's form of a value with nothing but JSON
 * in it), which a tRPC client reads as the whole value; a refusal is the tRPC error the adapter
 * would give. A batch, or a call whose `input` cannot be read, goes on to tRPC.
 */
import type { Request, RequestHandler, Response } from 'express';
import { getTRPCErrorFromUnknown, type AnyTRPCProcedure, type AnyTRPCRouter } from '@trpc/server';
import superjson from 'superjson';
import type { Context } from '../core/context.js';
import type { FailureLog } from '../core/failure-log.js';
import { toErrorResponse } from '../core/failures.js';
import { StreamedAnswer } from '../core/streamed-answer.js';
import { calledPaths, doorAnswer } from './door-errors.js';
import { percentDecodedBytes } from './request-body.js';
import { sendStreamed } from './rest.js';
import { doorRefusal, rawQueryInput } from './trpc-door.js';

/** The procedures answered this way. */
export const STREAMED_ON_TRPC = ['users.export'] as const;

const FRAME = { contentType: 'application/json; charset=utf-8', head: '{"result":{"data":{"json":', tail: '}}}' };

interface Options {
  router: AnyTRPCRouter;
  createContext: (req: Request, res: Response) => Context;
  logFailure: FailureLog;
}

/** The call's input as tRPC reads a GET's (superjson); `undefined` when there is none, `false` when it cannot be read. */
function inputOf(url: string): { value: unknown } | false {
  const raw = rawQueryInput(url);
  if (raw === undefined) return { value: undefined };
  try {
    return { value: superjson.deserialize(JSON.parse(percentDecodedBytes(raw).toString('utf8'))) };
  } catch {
    return false;
  }
}

export function streamedTrpcCalls({ router, createContext, logFailure }: Options): RequestHandler {
  const procedures = router._def.procedures as Record<string, AnyTRPCProcedure>;
  return (req, res, next) => {
    const called = calledPaths(req.url);
    const path = called?.paths[0];
    if (req.method !== 'GET' || !called || called.batch || !(STREAMED_ON_TRPC as readonly string[]).includes(path!)) return next();
    const input = inputOf(req.url);
    if (!input) return next();
    const procedure = procedures[path!]!;
    const ctx: Context = { ...createContext(req, res), streamsJson: true, refusal: doorRefusal(req, undefined) };
    (async () => {
      try {
        const data: unknown = await procedure({ path: path!, getRawInput: async () => input.value, ctx, type: 'query', signal: undefined, batchIndex: 0 });
        if (!(data instanceof StreamedAnswer)) {
          // A value answered whole after all: as tRPC's adapter sends it.
          res.status(200).setHeader('Content-Type', FRAME.contentType);
          return void res.end(JSON.stringify({ result: { data: superjson.serialize(data) } }));
        }
        // Counted as a running procedure while it writes, also after its client has gone.
        const leave = ctx.enterProcedure?.();
        try {
          await sendStreamed(res, data, logFailure, FRAME);
        } finally {
          leave?.();
        }
      } catch (cause) {
        const error = getTRPCErrorFromUnknown(cause);
        const status = toErrorResponse(error).status;
        logFailure(error.cause ?? error, status, { door: 'trpc', reqId: req.id });
        if (res.headersSent) return void res.destroy();
        const answer = doorAnswer('trpc', error, req.originalUrl ?? req.url);
        res.status(answer.status);
        for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
        res.end(answer.body);
      }
    })().catch(next);
  };
}
