/**
 * Reading the change log: where a client's cursor stands (`startCursor`), and the live feed
 * both streams share (`followEvents`): the events after the cursor in order, then each new
 * one as it commits. The token is re-checked at least once an idle period (15 s), busy or
 * not, so a revoked or expired token ends its streams within that time (at once in the
 * process that revoked it); an idle tick also re-reads the table (so a lost notification
 * delays an event by one tick at most, never loses it). A feed ends as soon as its client is
 * gone (its signal), closing its subscription and so giving back its stream's lease.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { DomainError } from '../core/errors.js';
import { unavailable } from '../core/failures.js';
import type { LiveEvents, LiveSubscription } from '../core/context.js';
import { EVENTS_PAGE_SIZE } from './event.schema.js';
import { logPosition, readEvents, type EventPage, type StoredEvent } from './event.store.js';

/**
 * The cursor to read after: the given id, or the newest when none is given. An id older
 * than what retention kept, or newer than the log, is 410 cursor_expired with the newest id
 * to restart from (after reloading the lists). Newer than the log of a server that takes no
 * writes (a standby, a demoted primary, while a failover is under way) is 503 instead: the
 * primary's log may hold it (API-CONTRACT.md §17, streams resume from their cursors).
 */
export async function startCursor(em: SqlEntityManager, userId: number, after: string | null | undefined): Promise<bigint> {
  const { last, prunedThrough, writable } = await logPosition(em, userId);
  if (after === undefined || after === null) return last;
  const cursor = BigInt(after);
  if (cursor > last && !writable) {
    // As the server would refuse a write now (25006), so that /healthz and the log say read-only.
    throw unavailable(Object.assign(new Error("the server takes no writes: its change log may be behind the primary's"), { code: '25006' }));
  }
  if (cursor < prunedThrough || cursor > last) {
    throw DomainError.of('cursor_expired', {
      detail:
        cursor > last
          ? 'This id is not in your change log: reload your lists, then follow the log from meta.last_event_id.'
          : undefined,
    }).withMeta({ last_event_id: last.toString() });
  }
  return cursor;
}

export interface FeedOptions {
  /** A fresh entity manager for each read (a feed lives longer than a request's). */
  em: () => SqlEntityManager;
  live: LiveEvents;
  /** From `live.subscribe`, taken before the feed starts (it may refuse: 429); closed by the feed. */
  subscription: LiveSubscription;
  userId: number;
  after: bigint;
  signal: AbortSignal;
  /** Whether the stream's token is still valid. */
  stillAuthorized: () => Promise<boolean>;
  /** When the stream's token expires (no event is sent from then on), and the clock it is read by. */
  expiresAt: Date | undefined;
  now: () => Date;
}

/**
 * How often, at most, a stream that keeps delivering checks that its token is still valid: a
 * token that expires (or is revoked where no notice reaches this process) stops receiving
 * events within this bound, as a revoked one's streams end within 5 s (API-CONTRACT.md §16).
 */
export const AUTHORIZATION_RECHECK_MS = 5_000;

/** Yields events in order, and `null` on each idle tick (a stream's heartbeat). */
export async function* followEvents(options: FeedOptions): AsyncGenerator<StoredEvent | null> {
  const { subscription } = options;
  const idleMs = options.live.idleMs;
  const recheckMs = Math.min(idleMs, AUTHORIZATION_RECHECK_MS);
  let checkedAt = Date.now();
  const expired = () => options.expiresAt !== undefined && options.now() >= options.expiresAt;
  try {
    let cursor = options.after;
    let more = false;
    for (;;) {
      // Catching up reads the table page by page; live events come from notifications.
      const live: StoredEvent[] | null = more ? null : subscription.take(cursor);
      const page: EventPage = live ? { events: live, more: false } : await readEvents(options.em(), options.userId, cursor, EVENTS_PAGE_SIZE);
      for (const event of page.events) {
        if (subscription.reason) throw subscription.reason;
        if (subscription.closed || options.signal.aborted) return;
        if (expired()) throw DomainError.unauthorized('The access token was revoked or has expired.');
        yield event;
        cursor = BigInt(event.id);
      }
      more = page.more;
      // An idle stream wakes at its token's expiry too, and ends there (its check fails).
      const untilExpiry = options.expiresAt ? options.expiresAt.getTime() - options.now().getTime() : idleMs;
      const woken = more ? 'wake' : await subscription.wait(Math.max(0, Math.min(idleMs, untilExpiry)), options.signal);
      if (subscription.reason) throw subscription.reason;
      if (woken === 'closed' || subscription.closed || options.signal.aborted) return;
      if (woken === 'idle' || Date.now() - checkedAt >= recheckMs) {
        if (!(await options.stillAuthorized())) throw DomainError.unauthorized('The access token was revoked or has expired.');
        // The client may have gone while the token was checked: nothing more is written then.
        if (subscription.closed || options.signal.aborted) return;
        checkedAt = Date.now();
        if (woken === 'idle') yield null;
      }
    }
  } finally {
    subscription.close();
  }
}
