/**
 * Appending a write's events to the change log (API-CONTRACT.md §10), inside the writing
 * transaction: the transactional outbox. Event ids are the per-user numbers (`seq`), taken
 * under the owner's lock by the write that appends them (src/writes/user-write.ts), so they
 * commit in order: no reader ever sees N and later an event below N. The NOTIFY only wakes
 * listeners (delivered on commit); the table is the truth they read (src/changes/).
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { BATCHED } from '../db/batching.js';

/** The channel every process listens on; the payload is `<user id>:<newest seq>`. */
export const EVENTS_CHANNEL = 'user_events';

export interface NewEvent {
  type: string;
  data: unknown;
  /** Unix seconds. */
  at: number;
}

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
