/**
 * tRPC is initialised here, once: its context and meta types, the transformer (superjson's
 * wire format: transformer.ts), the SSE settings, and the error formatter that puts the
 * envelope's `errors` into tRPC's error data. The procedures every router builds on are in
 * procedures.ts; routers take `router` from here.
 */
import { initTRPC, TRPCError, type TRPC_ERROR_CODE_KEY } from '@trpc/server';
import { TRPC_ERROR_CODES_BY_KEY } from '@trpc/server/rpc';
import type { DomainError } from './errors.js';
import { toErrorResponse } from './failures.js';
import { transformer } from './transformer.js';
import type { AppMeta, Context } from './context.js';

/** The tRPC code of each status; 417 and 431 (answered before any procedure) have none closer than BAD_REQUEST. */
const STATUS_TO_TRPC: Record<number, TRPC_ERROR_CODE_KEY> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  408: 'TIMEOUT',
  409: 'CONFLICT',
  410: 'NOT_FOUND',
  412: 'PRECONDITION_FAILED',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  417: 'BAD_REQUEST',
  422: 'UNPROCESSABLE_CONTENT',
  429: 'TOO_MANY_REQUESTS',
  431: 'BAD_REQUEST',
  501: 'NOT_IMPLEMENTED',
  503: 'SERVICE_UNAVAILABLE',
};

export function toTRPCError(error: DomainError): TRPCError {
  return new TRPCError({ code: STATUS_TO_TRPC[error.status] ?? 'INTERNAL_SERVER_ERROR', message: error.message, cause: error });
}

export const t = initTRPC
  .context<Context>()
  .meta<AppMeta>()
  .create({
    transformer,
    isDev: false,
    // Subscriptions (SSE) ping while idle so proxies keep them open, like the REST stream's
    // heartbeat; a client that hears nothing for twice that long reconnects with its last id.
    sse: { ping: { enabled: true, intervalMs: 15_000 }, client: { reconnectAfterInactivityMs: 30_000 } },
    errorFormatter({ shape, error }) {
      const response = toErrorResponse(error);
      const first = response.errors[0]!;
      return {
        // A domain error raised where no middleware converts it (inside a subscription that
        // has started) reaches here as an internal error: its JSON-RPC code follows its status.
        code: shape.code === TRPC_ERROR_CODES_BY_KEY.INTERNAL_SERVER_ERROR && response.status !== 500
          ? TRPC_ERROR_CODES_BY_KEY[STATUS_TO_TRPC[response.status] ?? 'INTERNAL_SERVER_ERROR']
          : shape.code,
        message: first.detail,
        data: {
          code: first.code,
          httpStatus: response.status,
          path: shape.data.path,
          errors: response.errors,
          // REST's `meta`: 410 cursor_expired's id to restart from (also as `last_event_id`), 403's required scope.
          ...(response.meta ? { meta: response.meta } : {}),
          ...(response.meta?.last_event_id !== undefined ? { last_event_id: response.meta.last_event_id } : {}),
        },
      };
    },
  });

export const router = t.router;
export const createCallerFactory = t.createCallerFactory;
