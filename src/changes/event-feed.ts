/**
 * Reading the change log: where a client's cursor stands (`startCursor`), a page of delta
 * sync, and the live feed both streams share (`followEvents`): the events after the cursor
 * in order, then each new one as it commits, with an idle tick between that re-checks the
 * token (a revoked or expired one ends the stream within one tick) and re-reads the table
 * (so a lost notification delays an event by one tick at most, never loses it).
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { DomainError } from '../core/errors.js';
import type { LiveEvents, LiveSubscription } from '../core/trpc.js';
import { EVENTS_PAGE_SIZE } from './event.schema.js';
import { logPosition, readEvents, type StoredEvent } from './event.store.js';

/**
 * The cursor to read after: the given id, or the newest when none is given. An id older
 * than what retention kept, or newer than the log, is 410 cursor_expired with the newest id
 * to restart from (after reloading the lists).
 */
export async function startCursor(em: SqlEntityManager, userId: number, after: string | null | undefined): Promise<bigint> {
  const { last, prunedThrough } = await logPosition(em, userId);
  if (after === undefined || after === null) return last;
  const cursor = BigInt(after);
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
}

/** Yields events in order, and `null` on each idle tick (a stream's heartbeat). */
export async function* followEvents(options: FeedOptions): AsyncGenerator<StoredEvent | null> {
  const { subscription } = options;
  try {
    let cursor = options.after;
    for (;;) {
      const live = subscription.take(cursor);
      const page = live ? { events: live, more: false } : await readEvents(options.em(), options.userId, cursor, EVENTS_PAGE_SIZE);
      for (const event of page.events) {
        if (subscription.closed || options.signal.aborted) return;
        yield event;
        cursor = BigInt(event.id);
      }
      if (page.more) continue;
      const woken = await subscription.wait(options.live.idleMs, options.signal);
      if (woken === 'closed') return;
      if (woken === 'idle') {
        if (!(await options.stillAuthorized())) throw DomainError.unauthorized('The access token was revoked or has expired.');
        yield null;
      }
    }
  } finally {
    subscription.close();
  }
}
