/**
 * The change log's reading statements (API-CONTRACT.md §10): a user's events after a cursor,
 * the NOTIFY payloads that wake streams, and pruning what retention no longer keeps. Events
 * are appended by the write path (src/writes/event-append.ts), in the writing transaction.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { LogEvent } from '../core/context.js';

export type StoredEvent = LogEvent;

export interface Notification {
  userId: number;
  first: bigint;
  last: bigint;
  /** The events, when the payload carried them. */
  events?: StoredEvent[];
}

/**
 * Reads a NOTIFY payload of `appendEvents`; null when it is not one. Its events (the JSON after
 * the header) are parsed only when `wanted` says their user has a stream here: a process with
 * no stream of the user (webhook delivery hears every notification) reads the header alone.
 */
export function parseNotification(payload: string | undefined, wanted: (userId: number) => boolean = () => true): Notification | null {
  const match = /^(\d+):(\d+):(\d+)(?::)?/.exec(payload ?? '');
  if (!match) return null;
  const userId = Number(match[1]);
  const rest = payload!.slice(match[0].length);
  if (rest !== '' && !match[0].endsWith(':')) return null;
  let events: StoredEvent[] | undefined;
  if (match[0].endsWith(':') && wanted(userId)) {
    try {
      events = JSON.parse(rest) as StoredEvent[];
    } catch {
      events = undefined;
    }
  }
  return { userId, first: BigInt(match[2]!), last: BigInt(match[3]!), events };
}

export interface EventPage {
  events: StoredEvent[];
  /** More events follow the page. */
  more: boolean;
}

/** Where a user's log stands: its newest number, and the newest one retention removed. */
export async function logPosition(em: SqlEntityManager, userId: number): Promise<{ last: bigint; prunedThrough: bigint }> {
  const [row] = await em.execute<Array<{ last: string; pruned: string }>>(
    'select last_event_seq::text as last, events_pruned_through::text as pruned from users where id = ?',
    [userId],
  );
  return { last: BigInt(row?.last ?? 0), prunedThrough: BigInt(row?.pruned ?? 0) };
}

/** Up to `limit` events of the user after `after`, oldest first. */
export async function readEvents(em: SqlEntityManager, userId: number, after: bigint, limit: number): Promise<EventPage> {
  const rows = await em.execute<Array<{ id: string; type: string; data: unknown; at: number }>>(
    // Ordered by the column, not by its text alias (which would put 10 before 2).
    `select e.seq::text as id, e.type, e.data, extract(epoch from e.at)::float8 as at
       from events e where e.user_id = ? and e.seq > ? order by e.seq limit ?`,
    [userId, after.toString(), limit + 1],
  );
  const more = rows.length > limit;
  return {
    events: rows.slice(0, limit).map((r) => ({ id: r.id, type: r.type, data: r.data, at: Math.floor(Number(r.at)) })),
    more,
  };
}

/**
 * Removes events older than `before`, a batch at a time, and marks each user's log as pruned.
 * It waits for a user's lock at most a moment (a write holds it): never long enough to make
 * that user's or another's writes time out behind it; what it skips, a later round removes.
 */
export async function pruneEvents(em: SqlEntityManager, before: Date, batch = 5_000): Promise<number> {
  return em.transactional(async (tx) => {
    await tx.execute(`select set_config('lock_timeout', '200ms', true)`);
    return pruneBatch(tx, before, batch);
  });
}

async function pruneBatch(em: SqlEntityManager, before: Date, batch: number): Promise<number> {
  const [row] = await em.execute<Array<{ removed: number }>>(
    `with doomed as (
       select user_id, seq from events where at < ? order by at limit ?
     ), removed as (
       delete from events e using doomed d where e.user_id = d.user_id and e.seq = d.seq returning e.user_id, e.seq
     ), marked as (
       update users u set events_pruned_through = greatest(u.events_pruned_through, m.seq)
         from (select user_id, max(seq) as seq from removed group by user_id) m
        where u.id = m.user_id
       returning 1
     )
     select (select count(*) from removed)::int as removed`,
    [before, batch],
  );
  return row?.removed ?? 0;
}

/** Stores a stream ticket (by its hash) for `tokenHash`'s user, valid until `expiresAt`. */
export async function storeStreamTicket(em: SqlEntityManager, ticketHash: string, userId: number, tokenHash: string, expiresAt: Date): Promise<void> {
  await em.execute('insert into event_stream_tickets (ticket_hash, user_id, token_hash, expires_at) values (?, ?, ?, ?)', [
    ticketHash, userId, tokenHash, expiresAt,
  ]);
}

/**
 * Uses a ticket up: the user and token it was issued from, or null when it is unknown, used,
 * expired, or its token has since been revoked or has expired.
 */
export async function redeemStreamTicket(em: SqlEntityManager, ticketHash: string, now: Date): Promise<{ userId: number; tokenHash: string } | null> {
  const [row] = await em.execute<Array<{ user_id: number; token_hash: string; live: boolean }>>(
    `delete from event_stream_tickets t where t.ticket_hash = ?
      returning t.user_id, t.token_hash,
                t.expires_at > ? and exists (select 1 from access_tokens a where a.token_hash = t.token_hash and a.user_id = t.user_id and a.expires_at > ?) as live`,
    [ticketHash, now, now],
  );
  return row?.live ? { userId: row.user_id, tokenHash: row.token_hash } : null;
}

/** Drops expired stream tickets. */
export async function pruneStreamTickets(em: SqlEntityManager, now: Date): Promise<number> {
  const result = await em.execute<{ affectedRows: number }>('delete from event_stream_tickets where expires_at < ?', [now], 'run');
  return result.affectedRows;
}

/** Retention (EVENTS_RETENTION_DAYS): removes what is older, a batch at a time, until none is left. */
export async function pruneChangeLog(em: SqlEntityManager, now: Date, retentionDays: number): Promise<number> {
  const before = new Date(now.getTime() - retentionDays * 86_400_000);
  let removed = 0;
  for (let batch = await pruneEvents(em, before); batch > 0; batch = await pruneEvents(em, before)) removed += batch;
  return removed;
}
