/**
 * The change log's statements (API-CONTRACT.md §10): append a write's events, read a user's
 * events after a cursor, and prune what retention no longer keeps.
 *
 * Event ids are the per-user numbers (`seq`) as decimal strings. They are taken under the
 * owner's lock by the write that appends them (src/changes/user-write.ts), so they commit
 * in order: no reader ever sees N and later an event below N. The NOTIFY only wakes
 * listeners (delivered on commit); the table is the truth they read.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { LogEvent } from '../core/trpc.js';
import { BATCHED } from '../db/batching.js';

/** The channel every process listens on; the payload is `<user id>:<newest seq>`. */
export const EVENTS_CHANNEL = 'user_events';

export interface NewEvent {
  type: string;
  data: unknown;
  /** Unix seconds. */
  at: number;
}

export type StoredEvent = LogEvent;

/** A NOTIFY payload carries the events themselves when they fit in this many bytes. */
const PAYLOAD_BYTES = 7_000;

/**
 * Appends the events of one write in one statement: numbers them after the user's newest,
 * moves that mark, stores them and notifies. The caller holds the owner's lock. The payload
 * is `<user>:<first>:<last>` and, when they fit, `:<the events as JSON>`, so that live
 * streams rarely read the table (event-hub.ts). `also`, a data-modifying statement of the
 * same write (an idempotency record), rides in the same statement as a CTE, so it costs no
 * round trip. It is the last statement of its write, so it is sent with the `commit` that
 * follows (src/db/batching.ts): an error in it fails the commit, and the write rolls back.
 * Returns false when there was nothing to append (and `also` did not run).
 */
export async function appendEvents(
  em: SqlEntityManager,
  userId: number,
  events: readonly NewEvent[],
  now: Date,
  also?: { sql: string; params: unknown[] },
): Promise<boolean> {
  if (events.length === 0) return false;
  const append = appendSql(
    userId,
    now,
    { sql: `select e.n, e.ev->>'type' as type, e.ev->'data' as data from json_array_elements(?::json) with ordinality as e(ev, n)`,
      params: [JSON.stringify(events.map(({ type, data }) => ({ type, data })))] },
  );
  await em.execute(
    `${BATCHED}with ${also ? `also as (${also.sql}), ` : ''}${append.ctes} select count(*) from notified`,
    [...(also?.params ?? []), ...append.params],
  );
  return true;
}

/**
 * The CTEs that append a write's events, for a statement that also makes the change: `events`
 * is a query of (n, type, data) rows, n from 1, data as json. They number the events after the
 * user's newest (moving that mark only when there are events), store them and notify; the
 * statement must read `notified` (a CTE nobody reads does not run). The owner's lock must be
 * held, or taken earlier in the same statement.
 */
export function appendSql(userId: number, now: Date, events: { sql: string; params: unknown[] }): { ctes: string; params: unknown[] } {
  return {
    ctes: `evs as (${events.sql}), mark as (
       update users set last_event_seq = last_event_seq + (select count(*) from evs)
        where id = ? and exists (select 1 from evs)
        returning last_event_seq - (select count(*) from evs) as base
     ), stored as (
       insert into events (user_id, seq, type, data, at)
       select ?, mark.base + evs.n, evs.type, evs.data, ?::timestamptz from mark, evs
       returning seq, type, data, at
     ), payload as (
       select ? || ':' || min(seq) || ':' || max(seq) as head,
              json_agg(json_build_object('id', seq::text, 'type', type, 'data', data, 'at', floor(extract(epoch from at))::bigint) order by seq)::text as body
         from stored having count(*) > 0
     ), notified as (
       select pg_notify('${EVENTS_CHANNEL}', case when octet_length(body) <= ${PAYLOAD_BYTES} then head || ':' || body else head end) from payload
     )`,
    params: [...events.params, userId, userId, now, String(userId)],
  };
}

export interface Notification {
  userId: number;
  first: bigint;
  last: bigint;
  /** The events, when the payload carried them. */
  events?: StoredEvent[];
}

/** Reads a NOTIFY payload of `appendEvents`; null when it is not one. */
export function parseNotification(payload: string | undefined): Notification | null {
  const match = /^(\d+):(\d+):(\d+)(?::([\s\S]*))?$/.exec(payload ?? '');
  if (!match) return null;
  let events: StoredEvent[] | undefined;
  try {
    events = match[4] === undefined ? undefined : (JSON.parse(match[4]) as StoredEvent[]);
  } catch {
    events = undefined;
  }
  return { userId: Number(match[1]), first: BigInt(match[2]!), last: BigInt(match[3]!), events };
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
                t.expires_at > ? and exists (select 1 from access_tokens a where a.token_hash = t.token_hash and a.expires_at > ?) as live`,
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
