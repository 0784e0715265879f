/**
 * The change log's reading statements (API-CONTRACT.md §10): a user's events after a cursor,
 * the NOTIFY payloads that wake streams, and pruning what retention no longer keeps. Events
 * are appended by the write path (`apply`, src/writes/write-functions.ts), in the writing transaction.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { LogEvent } from '../core/context.js';
import { isTokenValid } from '../users/authentication.js';
import { newUserSecret, userOfSecret } from '../users/credentials.js';

export type StoredEvent = LogEvent;

export interface Notification {
  userId: number;
  first: bigint;
  last: bigint;
  /** The events, when the payload carried them. */
  events?: StoredEvent[];
}

/**
 * Reads a NOTIFY payload of a write (src/writes/write.ts `announce`); null when it is not one. Its events (the JSON after
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

/**
 * Where a user's log stands: its newest number, the newest one retention removed, and whether
 * the server that said so takes writes (a standby's copy of the log may be behind the primary's).
 */
export async function logPosition(em: SqlEntityManager, userId: number): Promise<{ last: bigint; prunedThrough: bigint; writable: boolean }> {
  const [row] = await em.execute<Array<{ last: string; pruned: string; read_only: boolean }>>(
    `select last_event_seq::text as last, events_pruned_through::text as pruned,
            pg_is_in_recovery() or current_setting('transaction_read_only')::boolean as read_only
       from users where id = ?`,
    [userId],
  );
  return { last: BigInt(row?.last ?? 0), prunedThrough: BigInt(row?.pruned ?? 0), writable: row?.read_only !== true };
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
 * Removes events older than `before`, up to `batch` of them, and marks each user's log as
 * pruned. The users who have such events are found by a read over every user (housekeeping:
 * on a sharded database it asks every node); each user's events then go in a transaction of
 * that user alone. It waits for the user's lock at most a moment (a write holds it): never
 * long enough to make that user's writes time out behind it; a user it skips, a later round
 * prunes.
 */
export async function pruneEvents(em: SqlEntityManager, before: Date, batch = 5_000): Promise<number> {
  const users = await em.execute<Array<{ user_id: number; n: string }>>(
    'select user_id, count(*) as n from events where at < ? group by user_id order by min(at) limit ?',
    [before, batch],
  );
  let removed = 0;
  for (const { user_id: userId, n } of users) {
    if (removed >= batch) break;
    try {
      removed += await pruneEventsOf(em, Number(userId), before, Math.min(Number(n), batch - removed));
    } catch (error) {
      // Busy (a write held the user's lock past the moment, 55P03): a later round prunes this
      // user. Anything else is the round's failure, which housekeeping logs.
      if ((error as { code?: unknown }).code !== '55P03') throw error;
    }
  }
  return removed;
}

async function pruneEventsOf(em: SqlEntityManager, userId: number, before: Date, limit: number): Promise<number> {
  return em.fork().transactional(async (tx) => {
    // The lock timeout is set by the statement that waits, on the node that holds the row.
    await tx.execute(`select set_config('lock_timeout', '200ms', true), id from users where id = ? for no key update`, [userId]);
    const [row] = await tx.execute<Array<{ removed: number }>>(
      `with removed as (
         delete from events e where e.user_id = ? and e.seq in (select d.seq from events d where d.user_id = ? and d.at < ? order by d.seq limit ?)
         returning e.seq
       ), marked as (
         update users u set events_pruned_through = greatest(u.events_pruned_through, (select max(seq) from removed))
          where u.id = ? and exists (select 1 from removed)
         returning u.id
       )
       select (select count(*) from removed)::int as removed, (select count(*) from marked)::int as marked`,
      [userId, userId, before, limit, userId],
    );
    return row?.removed ?? 0;
  });
}

/**
 * A new stream ticket of the user `userId`. Like an access token it names its user
 * (src/users/credentials.ts), so that storing and redeeming it ask one node of a database
 * split by user; to clients it is opaque.
 */
export function newStreamTicket(userId: number): string {
  return newUserSecret(userId);
}

/** The user a ticket names; null when it is no ticket (then it is refused without a query). */
export function userOfStreamTicket(ticket: string): number | null {
  return userOfSecret(ticket);
}

/** Stores a stream ticket (by its hash) for `tokenHash`'s user, valid until `expiresAt`. */
export async function storeStreamTicket(em: SqlEntityManager, ticketHash: string, userId: number, tokenHash: string, expiresAt: Date): Promise<void> {
  await em.execute('insert into event_stream_tickets (ticket_hash, user_id, token_hash, expires_at) values (?, ?, ?, ?)', [
    ticketHash, userId, tokenHash, expiresAt,
  ]);
}

/**
 * Uses a ticket of `userId` up: the user and the token it was issued from, or null when it is
 * unknown, used, expired, or its token has since been revoked or has expired. The ticket is
 * deleted whatever it then turns out to be (used once, even when refused). Its expiry and its
 * token are judged after the delete, at the same `now`: RETURNING gives plain columns only,
 * which a database split by user requires.
 */
export async function redeemStreamTicket(em: SqlEntityManager, userId: number, ticketHash: string, now: Date): Promise<{ userId: number; tokenHash: string } | null> {
  const [row] = await em.execute<Array<{ token_hash: string; expires_at: Date | string }>>(
    'delete from event_stream_tickets where user_id = ? and ticket_hash = ? returning token_hash, expires_at',
    [userId, ticketHash],
  );
  if (!row || !(new Date(row.expires_at).getTime() > now.getTime())) return null;
  return (await isTokenValid(em, userId, row.token_hash, now)) ? { userId, tokenHash: row.token_hash } : null;
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
