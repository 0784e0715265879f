/**
 * The change log for clients (API-CONTRACT.md §10): delta sync (`events.list`, GET
 * /api/users/me/events), the tRPC subscription `events.onChange`, and tickets that let a
 * browser's EventSource open the REST stream (src/http/event-stream.ts) without putting
 * its access token in a URL.
 *
 * Opening `events.onChange` is a request like any other (authedProcedure counts it against the
 * token's RATE_LIMIT_PER_MINUTE) and takes one of the token's MAX_STREAMS_PER_TOKEN stream
 * leases, shared by every process and instance (src/changes/event-hub.ts), before its answer
 * starts.
 */
import { createHash } from 'node:crypto';
import { tracked } from '@trpc/server';
import { toSeconds } from '../core/clock.js';
import { DomainError } from '../core/errors.js';
import { noInput } from '../core/fields.js';
import { authedProcedure, routesUnder } from '../core/procedures.js';
import { router } from '../core/trpc.js';
import { followEvents, startCursor } from './event-feed.js';
import { ChangeEvent, EVENTS_PAGE_SIZE, EventsInput, EventsPage, OnChangeInput, StreamTicketDocument } from './event.schema.js';
import { newStreamTicket, readEvents, storeStreamTicket, type StoredEvent } from './event.store.js';
import { isTokenValid, tokenExpiry } from '../users/authentication.js';
import { plainWrite } from '../writes/user-write.js';

const route = routesUnder('events', authedProcedure);
export const EVENTS_PATH = '/api/users/me/events';
/** A stream ticket opens one stream within this many seconds. */
export const TICKET_SECONDS = 60;

export const hashTicket = (ticket: string) => createHash('sha256').update(ticket).digest('base64url');

/** The feed's events as tRPC's tracked events (their id resumes the subscription); heartbeats are tRPC's own pings. */
async function* trackedEvents(feed: AsyncGenerator<StoredEvent | null>) {
  for await (const event of feed) {
    if (event) yield tracked(event.id, event as ChangeEvent);
  }
}

export const eventsRouter = router({
  list: route({
    method: 'GET', path: EVENTS_PATH,
    summary: 'Changes since a cursor (delta sync), or a live stream',
    description: [
      `The changes to your projects and tasks after \`after\`, oldest first, at most ${EVENTS_PAGE_SIZE} a page, with \`links.next\` while more remain and \`meta.last_event_id\` to pass as \`after\` next time.`,
      'Without `after`, `data` is empty and `meta.last_event_id` is the newest id: take it first, then load your lists, then follow from it (events carry whole documents, so seeing a change twice is harmless).',
      'With `Accept: text/event-stream` the same path is a Server-Sent Events stream (`id:` the event id, `event:` its type, `data:` the event), resumable with `Last-Event-ID` or `?after=`, with a `: heartbeat` comment every 15 s. A browser\'s EventSource, which cannot send an Authorization header, opens it with `?ticket=` from POST /api/users/me/events/tickets.',
      'A cursor older than what is kept (EVENTS_RETENTION_DAYS), or beyond the newest id (`after` on a fresh account, a cursor of another account or database), is 410 `cursor_expired`, whose `meta.last_event_id` is the newest id to restart from after reloading. Beyond the newest id while the database takes no writes (a failover under way, when its log may be behind) it is 503 `unavailable` instead: retry from the same cursor.',
    ].join('\n\n'),
  }, { queryParameters: ['after'], errorCodes: ['cursor_expired'] })
    .input(EventsInput)
    .output(EventsPage)
    .query(async ({ ctx, input }) => {
      const cursor = await startCursor(ctx.em, ctx.user.id, input.after);
      if (input.after === undefined) return { data: [], links: {}, meta: { last_event_id: cursor.toString() } };
      const page = await readEvents(ctx.em, ctx.user.id, cursor, EVENTS_PAGE_SIZE);
      const last = page.events.at(-1)?.id ?? cursor.toString();
      return {
        data: page.events as ChangeEvent[],
        links: page.more ? { next: `${ctx.baseUrl}${EVENTS_PATH}?after=${last}` } : {},
        meta: { last_event_id: last },
      };
    }),

  // Its cursor is answered as `after` is: a malformed one is 400 on `lastEventId`.
  onChange: authedProcedure.meta({ queryParameters: ['lastEventId'] }).input(OnChangeInput).subscription(async ({ ctx, input, signal }) => {
    const live = ctx.live;
    if (!live) throw DomainError.of('unavailable', { detail: 'Live changes are not served here.' });
    const after = await startCursor(ctx.em, ctx.user.id, input?.lastEventId);
    // The stream's lease is taken before the answer starts (not in the feed, which runs once
    // it has), so that a refusal (429, 503) carries its headers as every other one does.
    const subscription = await live.subscribe(ctx.user.id, ctx.tokenHash);
    const closed = signal ?? new AbortController().signal;
    // A client gone before the feed starts (or while the lease was being taken): the feed's
    // own ending never runs, this does.
    if (closed.aborted) subscription.close();
    else closed.addEventListener('abort', () => subscription.close(), { once: true });
    return trackedEvents(
      followEvents({
        em: () => ctx.em.fork(),
        live,
        subscription,
        userId: ctx.user.id,
        after,
        signal: closed,
        stillAuthorized: () => isTokenValid(ctx.em.fork(), ctx.user.id, ctx.tokenHash, ctx.clock.now()),
        expiresAt: await tokenExpiry(ctx.em.fork(), ctx.user.id, ctx.tokenHash),
        now: () => ctx.clock.now(),
      }),
    );
  }),

  ticket: route({
    method: 'POST', path: `${EVENTS_PATH}/tickets`,
    summary: 'A ticket for a browser\'s event stream',
    description: `A single-use ticket, valid ${TICKET_SECONDS} s, that opens one event stream as \`GET ${EVENTS_PATH}?ticket=...\` with \`Accept: text/event-stream\` (a browser's EventSource cannot send an Authorization header; the access token never goes in a URL). The stream ends when the token it was issued from is revoked or expires.`,
  }, { successStatus: 201, keyed: true })
    .input(noInput)
    .output(StreamTicketDocument)
    // A write of the user (src/writes/user-write.ts): with an Idempotency-Key, a retry gets the same ticket.
    .mutation(({ ctx }) => plainWrite(ctx, async (em) => {
      const ticket = newStreamTicket(ctx.user.id);
      const expiresAt = new Date(ctx.clock.now().getTime() + TICKET_SECONDS * 1000);
      await storeStreamTicket(em, hashTicket(ticket), ctx.user.id, ctx.tokenHash, expiresAt);
      return { data: { type: 'event_stream_ticket' as const, attributes: { ticket, expiresAt: toSeconds(expiresAt) } } };
    })),
});
