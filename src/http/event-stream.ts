/**
 * GET /api/users/me/events with `Accept: text/event-stream`: the change log as Server-Sent
 * Events (API-CONTRACT.md §10). trpc-to-openapi answers JSON only, so this one route is
 * served here, before the REST door, from the same feed as the tRPC subscription.
 *
 * - Authentication: the Authorization header, or `?ticket=` from POST .../events/tickets
 *   (single use, 60 s) for a browser's EventSource.
 * - Limits, as on every other request and on the tRPC door: opening a stream counts against
 *   the token's RATE_LIMIT_PER_MINUTE (an unknown token or ticket against the client
 *   address's, like a login), with the same RateLimit headers and 429; then it takes one of
 *   the token's 10 stream leases, shared by every process and instance (src/changes/
 *   event-hub.ts; one more is 429). A limit that cannot be checked (database gone) is 503
 *   with Retry-After, never a 500 or a wait.
 * - Resumption: `Last-Event-ID` (what EventSource sends when it reconnects), else `?after=`.
 * - `: heartbeat` comments every idle tick keep proxies from closing the stream; the same
 *   tick re-checks the token, and a stream that keeps delivering checks it at least every 5 s
 *   before its next event (src/changes/event-feed.ts), so a revoked or expired one ends the
 *   stream within one tick, and no event reaches it 5 s after it ended.
 * - A client too slow to read: the server writes one page at a time and waits for the
 *   socket to drain; one that does not drain within 30 s (`slowClientMs`) is told why and
 *   disconnected (it resumes from its last id). Nothing is buffered for it beyond that. A
 *   client that is gone ends its stream at once, whatever the stream was doing when it went.
 */
import type { Request, RequestHandler } from 'express';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Clock } from '../core/clock.js';
import { DomainError, EVENT_ID } from '../core/errors.js';
import { invalidQueryParameter } from '../core/list-query.js';
import { enforceRateLimit } from '../core/rate-limit.js';
import { errorBody, toErrorResponse } from '../core/failures.js';
import type { FailureLog } from '../core/failure-log.js';
import type { Authentication } from '../core/context.js';
import type { EventHub } from '../changes/event-hub.js';
import { followEvents, startCursor } from '../changes/event-feed.js';
import { hashTicket } from '../changes/events.router.js';
import { redeemStreamTicket, userOfStreamTicket } from '../changes/event.store.js';
import { isTokenValid, tokenExpiry } from '../users/authentication.js';
import { ACCESS } from '../app/scopes.js';
import { allows, insufficientScope } from '../core/scopes.js';
import { carriesBody } from './request-body.js';
import { ignoredBodyRefusal, sendErrorResponse } from './rest.js';
import { drained } from './drained.js';

export interface EventStreamOptions {
  orm: MikroORM;
  clock: Clock;
  live: EventHub;
  /** The app's log of failed requests: a 500 at error, 503s (the database gone) sampled at warn. */
  logFailure: FailureLog;
  authenticate: (authorization: string | undefined) => Promise<Authentication | null>;
  /** Requests a minute per token, and per client address for unknown tokens or tickets; 0: no limit. */
  rateLimits: { authPerMinute: number; perMinute: number };
  /** The client's address, as the rate limits of the other requests key it. */
  clientAddress: (req: Request) => string;
}

/** Accept prefers the stream to JSON, quality values read (`text/event-stream;q=0` is not acceptable: RFC 9110 §12.4.2). */
function wantsEventStream(req: Request): boolean {
  return req.headers.accept !== undefined && req.accepts(['application/json', 'text/event-stream']) === 'text/event-stream';
}

export function eventStreamHandler(options: EventStreamOptions): RequestHandler {
  const { orm, clock, live, logFailure, rateLimits } = options;

  /** Who the request is, and (from an Authorization header) the scopes of its token; a ticket was made with the stream's scope. */
  async function who(req: Request): Promise<{ userId: number; tokenHash: string; scopes?: readonly string[] | null } | null> {
    const ticket = typeof req.query.ticket === 'string' ? req.query.ticket : undefined;
    if (ticket !== undefined && !req.headers.authorization) {
      // A ticket names its user; a string that names none is refused without a query.
      const userId = userOfStreamTicket(ticket);
      return userId === null ? null : redeemStreamTicket(orm.em.fork(), userId, hashTicket(ticket), clock.now());
    }
    const authentication = await options.authenticate(req.headers.authorization);
    return authentication && { userId: authentication.user.id, tokenHash: authentication.tokenHash, scopes: authentication.token.scopes };
  }

  return (req, res, next) => {
    if (req.method !== 'GET' || !wantsEventStream(req)) {
      next();
      return;
    }
    // Listened for first: a client gone while the stream is being set up releases its slot.
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    (async () => {
      const setHeader = (name: string, value: string) => {
        if (!res.headersSent) res.setHeader(name, value);
      };
      const client = await who(req);
      if (!client) {
        // Each unknown token or ticket costs a lookup: they count per client address, like logins.
        const presented = req.headers.authorization !== undefined || req.query.ticket !== undefined;
        if (presented && rateLimits.authPerMinute > 0) {
          await enforceRateLimit(orm.em.fork(), [`unknown-token:${options.clientAddress(req)}`], rateLimits.authPerMinute, clock.now(), 'unknown_token', setHeader);
        }
        throw DomainError.unauthorized();
      }
      // Opening a stream is a request of the token like any other.
      if (rateLimits.perMinute > 0) {
        await enforceRateLimit(orm.em.fork(), [`token:${client.tokenHash}`], rateLimits.perMinute, clock.now(), 'token', setHeader);
      }
      // The stream is the change log's page in another form: its scope (API-CONTRACT.md §16).
      const access = ACCESS['events.list'];
      if (!allows(client.scopes ?? null, access)) throw insufficientScope(access);
      // A body sent along is held to the rules of any body, as on the JSON form of this path.
      if (carriesBody(req)) {
        const refusal = await ignoredBodyRefusal(req);
        if (refusal) throw refusal;
      }
      const lastEventId = req.headers['last-event-id'];
      // `after` is held to its rule even when the header, which wins over it, is sent.
      const queried = req.query.after;
      if (queried !== undefined && (typeof queried !== 'string' || !EVENT_ID.test(queried))) throw new DomainError([invalidQueryParameter('after')]);
      const after = typeof lastEventId === 'string' && lastEventId !== '' ? lastEventId : queried;
      if (after !== undefined && (typeof after !== 'string' || !EVENT_ID.test(after))) {
        const error = invalidQueryParameter('after');
        if (after === lastEventId) Object.assign(error, { source: { parameter: 'Last-Event-ID' }, detail: 'Last-Event-ID must be an event id: digits, no leading zero.' });
        throw new DomainError([error]);
      }
      const cursor = await startCursor(orm.em.fork(), client.userId, after);

      const subscription = await live.subscribe(client.userId, client.tokenHash);
      if (abort.signal.aborted) {
        subscription.close();
        return;
      }
      const feed = followEvents({
        em: () => orm.em.fork(),
        live,
        subscription,
        userId: client.userId,
        after: cursor,
        signal: abort.signal,
        stillAuthorized: () => isTokenValid(orm.em.fork(), client.userId, client.tokenHash, clock.now()),
        expiresAt: await tokenExpiry(orm.em.fork(), client.userId, client.tokenHash),
        now: () => clock.now(),
      });
      res.status(200);
      res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
      res.setHeader('Cache-Control', 'no-store');
      res.setHeader('X-Accel-Buffering', 'no');
      res.flushHeaders();
      // The cursor as the stream's first id: a client that drops before any event resumes
      // from here, not from whatever is newest when it reconnects.
      res.write(`retry: 2000\nid: ${cursor}\n: stream of the change log after ${cursor}\n\n`);
      try {
        for await (const event of feed) {
          const chunk = event ? `id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n` : ': heartbeat\n\n';
          if (!res.write(chunk) && !(await drained(res, live.slowClientMs))) {
            if (!res.destroyed) {
              const tooSlow = DomainError.of('unavailable', {
                detail: 'The client did not read the stream fast enough; reconnect with Last-Event-ID.',
              });
              res.end(`event: error\ndata: ${errorBody(toErrorResponse(tooSlow))}\n\n`);
              // A client that never reads again does not keep the socket and its buffers.
              const cut = setTimeout(() => res.destroy(), 10 * live.slowClientMs);
              cut.unref();
              res.once('close', () => clearTimeout(cut));
            }
            return;
          }
        }
        res.end();
      } catch (error) {
        const response = toErrorResponse(error);
        logFailure(error, response.status, { reqId: res.getHeader('x-request-id'), stream: 'ended' });
        if (!res.destroyed) res.end(`event: error\ndata: ${errorBody(response)}\n\n`);
      }
    })().catch((error: unknown) => {
      if (res.headersSent) {
        if (!res.destroyed) res.end();
        return;
      }
      const response = toErrorResponse(error);
      logFailure(error, response.status, { reqId: res.getHeader('x-request-id') });
      sendErrorResponse(res, response);
    });
  };
}
