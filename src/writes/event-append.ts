/**
 * Appending a write's events to the change log (API-CONTRACT.md §10), inside the writing
 * transaction: the transactional outbox. Event ids are the per-user numbers (`seq`), taken
 * under the owner's lock by the write that appends them (src/writes/user-write.ts), so they
 * commit in order: no reader ever sees N and later an event below N. The NOTIFY only wakes
 * listeners (sent after the commit, src/writes/announcer.ts); the table is the truth they read
 * (src/changes/).
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';

/** The channel every process listens on; the payload is `<user id>:<first seq>:<last seq>[:<the events as JSON>]` (`appendSql`). */
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
 * Appends the events of one write: numbers them after the user's newest, moves that mark and
 * stores them, in one statement. The caller holds the owner's lock. Returns the NOTIFY payload,
 * `<user>:<first>:<last>` and, when they fit, `:<the events as JSON>`, so that live streams
 * rarely read the table (event-hub.ts), for the caller to announce once the write committed
 * (src/writes/announcer.ts); null when there was nothing to append (and `also` did not run).
 * `also`, a data-modifying statement of the same write (an idempotency record), rides in the
 * same statement as a CTE, so it costs no round trip.
 */
export async function appendEvents(
  em: SqlEntityManager,
  userId: number,
  events: readonly NewEvent[],
  now: Date,
  also?: { sql: string; params: unknown[] },
): Promise<string | null> {
  if (events.length === 0) return null;
  // The documents as one JSON array, read in one pass (each element comes out as its own text,
  // stored as it is), and the types beside them as a text array: objects of both would be
  // parsed once for the array and again for each of their two members.
  const append = appendSql(
    userId,
    now,
    { sql: `select e.n, e.type, e.data from rows from (json_array_elements(?::json), unnest(?::text[])) with ordinality as e(data, type, n)`,
      params: [JSON.stringify(events.map((e) => e.data)), typeArray(events)] },
    { many: true },
  );
  const [row] = await em.execute<Array<{ notification: string | null }>>(
    `with ${also ? `also as (${also.sql}), ` : ''}${append.ctes} select ${NOTIFICATION} as notification`,
    [...(also?.params ?? []), ...append.params],
  );
  return row?.notification ?? null;
}

/**
 * A batch's events with its `project.updated` events folded (API-CONTRACT.md §15): of those
 * one project gets, only the last is kept, at its place. Its document is the project's final
 * one, so a client applying the log in order ends in the same state; and 100 creates in a
 * project append one copy of its task list, not 100 copies growing by one.
 */
export function foldProjectUpdates(events: readonly NewEvent[]): NewEvent[] {
  const idOf = (event: NewEvent) => (event.data as { id?: unknown } | null)?.id;
  const last = new Map<unknown, number>();
  events.forEach((event, i) => {
    if (event.type === 'project.updated') last.set(idOf(event), i);
  });
  return events.filter((event, i) => event.type !== 'project.updated' || last.get(idOf(event)) === i);
}

/** The select-list expression of a statement with `appendSql`'s CTEs: its NOTIFY payload (null: no events). */
export const NOTIFICATION = '(select notification from payload)';

/** Event types (`task.updated`: letters and a dot, nothing to quote) as a PostgreSQL array literal. */
function typeArray(events: readonly NewEvent[]): string {
  for (const { type } of events) if (!/^[a-z]+\.[a-z]+$/.test(type)) throw new Error(`unexpected event type ${JSON.stringify(type)}`);
  return `{${events.map((e) => e.type).join(',')}}`;
}

/**
 * The CTEs that append a write's events, for a statement that also makes the change: `events`
 * is a query of (n, type, data) rows, n from 1, data as json. They number the events after the
 * user's newest (moving that mark only when there are events), store them and build the
 * NOTIFY payload, which the statement returns as `NOTIFICATION` for the caller to announce
 * after the commit (src/writes/announcer.ts). The owner's lock must be held, or taken earlier in the same statement. Every
 * table they touch is named by the user's id as a parameter, and they return plain columns:
 * what a node of a sharded database can run for one user alone.
 *
 * `many`: the write may have many events (a transaction's). Their JSON for the payload is then
 * built only when their documents alone fit in it (the whole is longer than its documents): a
 * reorder's 60 events would make 25 kB to throw away. A write of one event (made in one
 * statement) builds it at once, without the extra plan nodes that test costs.
 */
export function appendSql(
  userId: number,
  now: Date,
  events: { sql: string; params: unknown[] },
  { many }: { many: boolean },
): { ctes: string; params: unknown[] } {
  const body = `json_agg(json_build_object('id', seq::text, 'type', type, 'data', data, 'at', floor(extract(epoch from at))::bigint) order by seq)::text`;
  const notification = `case when octet_length(body) <= ${PAYLOAD_BYTES} then head || ':' || body else head end as notification`;
  const head = `? || ':' || min(seq) || ':' || max(seq) as head`;
  const payload = many
    ? `counted as (
       select ${head}, sum(octet_length(data::text)) as documents from stored having count(*) > 0
     ), payload as (
       select ${notification} from counted left join lateral (select ${body} as body from stored where counted.documents <= ${PAYLOAD_BYTES}) as events on true
     )`
    : `counted as (
       select ${head}, ${body} as body from stored having count(*) > 0
     ), payload as (
       select ${notification} from counted
     )`;
  return {
    ctes: `evs as (${events.sql}), mark as (
       update users set last_event_seq = last_event_seq + (select count(*) from evs)
        where id = ? and exists (select 1 from evs)
        returning last_event_seq
     ), stored as (
       insert into events (user_id, seq, type, data, at)
       select ?, mark.last_event_seq - (select count(*) from evs) + evs.n, evs.type, evs.data, ?::timestamptz from mark, evs
       returning seq, type, data, at
     ), ${payload}`,
    params: [...events.params, userId, userId, now, String(userId)],
  };
}
