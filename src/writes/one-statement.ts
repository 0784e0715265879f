/**
 * Writes made in one statement: the usual request of a write (a task's creation, its state
 * change) as one SQL statement that takes the owner's lock, reads what the change needs, makes
 * it, appends its events and notifies: lock to commit in one round trip. The same change runs
 * inside a transaction that already holds the lock (`runUnderHeldLock`: a keyed or conditional
 * request, a batch's operation), where it is one statement too.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { toSeconds } from '../core/clock.js';
import type { Logger } from '../core/logger.js';
import type { Resource } from '../core/resource.js';
import { escapeLiteral } from '../db/literals.js';
import { executeAndCommit } from '../db/prepared.js';
import { bindUser, USER } from '../db/user-param.js';
import { appendSql, EVENTS_CHANNEL, NOTIFICATION, type NewEvent } from './event-append.js';
import { ownerLockSql, retried } from './owner-lock.js';

/**
 * A write that can be made in one statement. Over `owner` (the owner's row, locked first):
 * `reads`, CTEs the change reads or makes with it (each `name as (...)`; a row it needs fresh
 * is read with a row lock, which returns its newest version even when the statement's snapshot
 * is older than the owner's lock, or under `FRESH`); `changed`, the one row the write answers
 * for (an INSERT, UPDATE or DELETE of one resource returning its whole row, or a SELECT of the
 * row a change in `reads` moved); `events`, the change log's events in order, each a document
 * in SQL over the rows of its `from`. `returning` are further columns of `changed` that
 * `answer` needs (the ETag's); `answer` gets them and `document`, the document of the event
 * `answerEvent` names (the first by default) as the driver parsed it: built once, by
 * PostgreSQL, for the event and the response alike. No `changed` row means the write could not
 * be made this way (not found, a state that does not allow it, a snapshot older than the
 * lock, ...): the use case's transaction then runs, and decides.
 */
export interface OneStatement<T> {
  reads?: { sql: string; params: unknown[] };
  changed: { sql: string; params: unknown[] };
  events: ReadonlyArray<OneStatementEvent>;
  returning: string;
  answer: (row: Record<string, unknown>) => { value: T; etag?: string };
  /**
   * Why nothing changed, told by the same statement, so that a refusal costs no transaction:
   * `current`, a SQL expression over `owner` read in the statement's snapshot (the resource's
   * state; null when the user has no such resource), and `refuse`, which throws the write's
   * refusal for that value (and returns when it has none to give: the transaction decides).
   * The statement's snapshot is taken before it waits for the owner's lock, so `current` is
   * used only when no write of the user committed in between: the user's `last_event_seq` in
   * the snapshot equals the one of the row the lock returned (every write that changes
   * something moves it, under that lock). Otherwise the transaction runs, as without `refusal`.
   */
  refusal?: { current: { sql: string; params: unknown[] }; refuse: (current: unknown) => void | Promise<void> };
  /**
   * The statement reads rows a write landing between its snapshot and the owner's lock could
   * have changed, and has no fresh way to read them: its reads and change must hold `FRESH`,
   * so that it changes nothing then (and the transaction runs).
   */
  freshOnly?: boolean;
  /** Which entry of `events` the answer's document is (the first by default). */
  answerEvent?: number;
}

/**
 * True when no write of the user committed between the statement's snapshot (taken before
 * it waited for the owner's lock) and the lock: every write that changes something moves the
 * user's `last_event_seq`, under that lock, so the snapshot's mark equals the one of the row
 * the lock returned. Then the snapshot is as fresh as the lock. Always true under a lock the
 * transaction already holds.
 */
export const FRESH = 'exists (select 1 from fresh where fresh.fresh)';

/**
 * An event of a one-statement write: its type and its document in SQL over the rows of `from`
 * (`changed` unless said), one event per row: `changed` has one row; another CTE may have none
 * (a project the change did not touch) or many (a project's tasks that changed with it, in
 * `orderBy`'s order). The events are numbered densely in the order of the list.
 */
export interface OneStatementEvent {
  type: `${Resource}.${'created' | 'updated' | 'deleted'}`;
  document: string;
  from?: string;
  orderBy?: string;
  /**
   * Where its events go among the write's, when not in the list's order: entries of one
   * `group` are interleaved by `at`, a SQL number per row (a reorder: each moved task, then
   * its project's event after the project's first moved task).
   */
  place?: { group: number; at: string };
}

/** The events of a write as (n, k, type, data) rows (k: the index of its entry), for the append and for a step's answer. */
function eventsSql(write: OneStatement<unknown>): string {
  const entries = write.events
    .map((e, k) => {
      const sub = e.place?.at ?? (e.orderBy === undefined ? '1' : `row_number() over (order by ${e.orderBy})`);
      return `select ${e.place?.group ?? k} as k, ${sub} as sub, '${e.type}'::text as type, ${e.document} as data from ${e.from ?? 'changed'}`;
    })
    .join(' union all ');
  return `select row_number() over (order by e.k, e.sub) as n, e.k, e.type, e.data from (${entries}) as e`;
}

/** The answer's document: the event of entry `answerEvent` (the first by default). */
function answerDocument(write: OneStatement<unknown>): string {
  return `(select data from evs where k = ${write.answerEvent ?? 0} limit 1)`;
}

function readsOf(write: OneStatement<unknown>): string {
  return write.reads ? `${write.reads.sql}, ` : '';
}

/** The one statement a `OneStatement` write sends, whole: lock, reads, change, events, NOTIFY. */
export function oneStatementSql(userId: number, write: OneStatement<unknown>, now: Date): { sql: string; params: unknown[] } {
  const append = appendSql(userId, now, { sql: eventsSql(write), params: [] }, { many: write.events.length > 1 || write.events.some((e) => e.orderBy !== undefined) });
  const { refusal } = write;
  // With `refusal` or `freshOnly`: the owner's mark as the lock returned it (the newest), against the snapshot's.
  const marked = Boolean(refusal || write.freshOnly);
  const lock = ownerLockSql(marked ? [{ sql: 'last_event_seq', params: [] }] : []);
  const fresh = marked ? `fresh as (select owner.last_event_seq = (select u.last_event_seq from users u where u.id = ${USER}) as fresh from owner), ` : '';
  const sql = `with owner as (${lock.sql}), ${fresh}${readsOf(write)}changed as (${write.changed.sql}), ${append.ctes}
    select ${write.returning}, ${answerDocument(write)} as document, ${NOTIFICATION} as notification${
      refusal
        ? `, ${refusal.current.sql} as current, ${FRESH} as fresh, changed.id is not null as made
           from owner left join changed on true`
        : ' from changed'
    }`;
  return bindUser(sql, [...lock.params, userId, ...(write.reads?.params ?? []), ...write.changed.params, ...append.params, ...(refusal?.current.params ?? [])], userId);
}

/**
 * Runs a write in its one statement, in a transaction of its own: the owner's lock (taken
 * first, as by every write, with its timeout, by a statement sent in the same message just
 * before, so that the statement's snapshot is taken once the lock is held and FRESH holds
 * however many writes of the user queued for it), the change and its events in the statement,
 * then the NOTIFY of its events sent with the commit (a statement of its own: see
 * `appendEvents`), so the lock is held for one round trip and the commit. Null when the change returned no row
 * (nothing was written, no event number taken); throws the write's refusal when the statement
 * could tell it.
 */
export async function runOneStatement<T>(
  em: SqlEntityManager,
  log: Logger | undefined,
  userId: number,
  write: OneStatement<T>,
  now: Date,
): Promise<{ value: T; etag?: string } | null> {
  const { sql, params } = oneStatementSql(userId, write, now);
  const lockSql = ownerLockSql();
  const lock = { sql: lockSql.sql, params: [...lockSql.params, userId] };
  const [row] = await retried(log, () =>
    executeAndCommit(
      em.fork(),
      sql,
      params,
      (rows) => {
        const notification = rows[0]?.notification;
        return typeof notification === 'string' ? `select pg_notify('${EVENTS_CHANNEL}', ${escapeLiteral(notification)})` : null;
      },
      lock,
    ),
  );
  // With `refusal` the statement answers a row whenever the owner exists: `made` is false
  // when nothing changed.
  if (!row || row.made === false) {
    if (row && write.refusal && row.fresh === true) await write.refusal.refuse(row.current);
    return null;
  }
  return write.answer(row);
}

/** The same change in a transaction that holds the owner's lock: no lock, no append; the events come back. */
export function heldLockStatementSql(userId: number, write: OneStatement<unknown>): { sql: string; params: unknown[] } {
  return bindUser(
    `with owner as (select ?::bigint as id), ${write.freshOnly ? 'fresh as (select true as fresh), ' : ''}${readsOf(write)}changed as (${write.changed.sql}), evs as (${eventsSql(write)})
      select ${write.returning}, ${answerDocument(write)} as document,
             (select json_agg(json_build_object('type', type, 'data', data) order by n) from evs) as events
        from changed`,
    [userId, ...(write.reads?.params ?? []), ...write.changed.params],
    userId,
  );
}

/**
 * Makes the change of a one-statement write under the owner's lock the caller's transaction
 * holds, in one statement, and returns its answer and its events (for the caller to append),
 * or null when it changed nothing (the use case's transaction then decides).
 */
export async function runUnderHeldLock<T>(
  em: SqlEntityManager,
  userId: number,
  write: OneStatement<T>,
  now: Date,
): Promise<{ value: T; etag?: string; events: NewEvent[] } | null> {
  const { sql, params } = heldLockStatementSql(userId, write);
  const [row] = await em.execute<Array<Record<string, unknown>>>(sql, params);
  if (!row) return null;
  const at = toSeconds(now);
  const events = ((row.events ?? []) as Array<{ type: string; data: unknown }>).map(({ type, data }) => ({ type, data, at }));
  return { ...write.answer(row), events };
}
