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

/** The channel every process listens on; the payload is `<user id>:<newest seq>`. */
export const EVENTS_CHANNEL = 'user_events';

export interface NewEvent {
  type: string;
  data: unknown;
  /** Unix seconds. */
  at: number;
}

export interface StoredEvent extends NewEvent {
  id: string;
}

/**
 * Appends the events of one write in one statement: numbers them after the user's newest,
 * moves that mark, stores them and notifies. The caller holds the owner's lock. `also`, a
 * data-modifying statement of the same write (an idempotency record), rides in the same
 * statement as a CTE, so it costs no round trip. Returns false when there was nothing to
 * append (and `also` did not run).
 */
export async function appendEvents(
  em: SqlEntityManager,
  userId: number,
  events: readonly NewEvent[],
  now: Date,
  also?: { sql: string; params: unknown[] },
): Promise<boolean> {
  if (events.length === 0) return false;
  await em.execute(
    `with ${also ? `also as (${also.sql}), ` : ''}mark as (
       update users set last_event_seq = last_event_seq + ? where id = ? returning last_event_seq - ? as base
     ), stored as (
       insert into events (user_id, seq, type, data, at)
       select ?, mark.base + e.n, e.ev->>'type', e.ev->'data', ?
         from mark, jsonb_array_elements(?::jsonb) with ordinality as e(ev, n)
       returning seq
     )
     select pg_notify('${EVENTS_CHANNEL}', ? || ':' || max(seq)) from stored`,
    [
      ...(also?.params ?? []),
      events.length, userId, events.length, userId, now, JSON.stringify(events.map(({ type, data }) => ({ type, data }))), String(userId),
    ],
  );
  return true;
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
  const rows = await em.execute<Array<{ seq: string; type: string; data: unknown; at: number }>>(
    `select seq::text as seq, type, data, extract(epoch from at)::float8 as at
       from events where user_id = ? and seq > ? order by seq limit ?`,
    [userId, after.toString(), limit + 1],
  );
  const more = rows.length > limit;
  return {
    events: rows.slice(0, limit).map((r) => ({ id: r.seq, type: r.type, data: r.data, at: Math.floor(Number(r.at)) })),
    more,
  };
}

/** Removes events older than `before`, a batch at a time, and marks each user's log as pruned. */
export async function pruneEvents(em: SqlEntityManager, before: Date, batch = 5_000): Promise<number> {
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
