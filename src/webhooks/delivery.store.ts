/**
 * The delivery queue's statements (API-CONTRACT.md §14). There is no queue table: a webhook's
 * place in its user's change log is the queue. A webhook is due when its user's log has grown
 * past its place (or a test event waits) and its next attempt is not in the future; a process
 * takes it with a lease (`FOR UPDATE SKIP LOCKED`, one statement, so it works through a
 * transaction-mode pooler), attempts its events in order, and records each attempt in the
 * statement that moves its place. Every time is the process's, passed as a parameter.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { LogEvent } from '../core/context.js';

/** Events read per webhook at a time. */
export const EVENTS_IN_HAND = 20;

export interface ClaimedWebhook {
  user_id: number;
  id: number;
  url: string;
  events: string[];
  secret: string;
  previous_secret: string | null;
  previous_secret_until: Date | string | null;
  cursor: string;
  attempt: number;
  generation: number;
  /** The test events asked for, oldest first. */
  test_events: Array<{ id: string; at: number }>;
  /** Its log events may be attempted now (enabled, and no retry waits). */
  log_due: boolean;
  /** Up to EVENTS_IN_HAND events after its place (`at` in seconds, as the log keeps it). */
  pending: Array<LogEvent & { at: number }>;
}

const EVENTS_AFTER = (user: string, cursor: string) =>
  `coalesce((select json_agg(json_build_object('id', e.seq::text, 'type', e.type, 'data', e.data, 'at', extract(epoch from e.at)::float8) order by e.seq)
              from (select e.seq, e.type, e.data, e.at from events e where e.user_id = ${user} and e.seq > ${cursor} order by e.seq limit ${EVENTS_IN_HAND}) e), '[]'::json)`;

/**
 * Leases up to `limit` due webhooks to `owner` until `leaseUntil`, with their next events.
 * `users`: only these users' webhooks (a notification named them); null: any.
 */
export async function claimDue(
  em: SqlEntityManager, owner: string, now: Date, leaseUntil: Date, limit: number, users: number[] | null,
): Promise<ClaimedWebhook[]> {
  return em.execute<ClaimedWebhook[]>(
    `with due as (
       select w.user_id, w.id from webhooks w join users u on u.id = w.user_id
        where (w.lease_until is null or w.lease_until < ?)
          and (w.test_events <> '[]' or (w.state = 'enabled' and w.next_attempt_at <= ? and u.last_event_seq > w.cursor))
          ${users ? 'and w.user_id = any(?::int[])' : ''}
        order by w.next_attempt_at
        limit ?
          for update of w skip locked
     ), claimed as (
       update webhooks w set lease_owner = ?, lease_until = ?
         from due where w.user_id = due.user_id and w.id = due.id
       returning w.user_id, w.id, w.url, w.events, w.state, w.secret, w.previous_secret, w.previous_secret_until,
                 w.cursor, w.attempt, w.generation, w.test_events, w.next_attempt_at
     )
     select c.user_id, c.id, c.url, c.events, c.secret, c.previous_secret, c.previous_secret_until, c.cursor::text as cursor,
            c.attempt, c.generation, c.test_events, (c.state = 'enabled' and c.next_attempt_at <= ?) as log_due,
            ${EVENTS_AFTER('c.user_id', 'c.cursor')} as pending
       from claimed c`,
    [now, now, ...(users ? [`{${users.join(',')}}`] : []), limit, owner, leaseUntil, now],
  );
}

export interface Attempt {
  eventId: string;
  eventType: string;
  /** 1 for the first attempt of the event. */
  attempt: number;
  at: Date;
  outcome: 'delivered' | 'failed' | 'blocked';
  httpStatus: number | null;
  error: string | null;
  durationMs: number;
  nextAttemptAt: Date | null;
}

/** What the webhook's row says after a recorded step. */
export interface Recorded {
  /** The lease was still this process's, and its place had not been moved since the claim. */
  held: boolean;
  /** Its owner changed it since the claim (`generation`): the lease was given back. */
  moved: boolean;
  /** The log has events after its (new) place. */
  more: boolean;
  enabled: boolean;
}

export interface Step {
  userId: number;
  id: number;
  owner: string;
  generation: number;
  /** The attempt to log, if one was made. */
  attempt?: Attempt;
  /** The new place: the event delivered (or the last one passed over). */
  cursor?: string;
  /** After a failure: the failed attempts of the event so far, and when to try again. */
  failed?: { attempts: number; nextAttemptAt: Date };
  /** Stop delivering, with this reason (410, or the schedule exhausted). */
  disable?: string;
  /** The test event that was sent, to clear. */
  testId?: string;
  /** Keep the lease until then (more to do), or give it back (null). */
  leaseUntil: Date | null;
}

/**
 * Records one step of a leased webhook in one statement: logs the attempt, moves the place
 * or plans the retry, clears a sent test event, renews or gives back the lease. The place and
 * the lease change only while the lease and the generation are still those of the claim.
 */
export async function recordStep(em: SqlEntityManager, step: Step): Promise<Recorded> {
  const a = step.attempt;
  const [row] = await em.execute<Array<{ held: boolean; moved: boolean; more: boolean; enabled: boolean }>>(
    `with changed as (
       update webhooks w set
         cursor = greatest(w.cursor, coalesce(?::bigint, w.cursor)),
         attempt = coalesce(?::int, case when ?::bigint is not null then 0 else w.attempt end),
         next_attempt_at = coalesce(?::timestamptz, case when ?::bigint is not null then 'epoch'::timestamptz else w.next_attempt_at end),
         state = case when ?::text is not null then 'disabled' else w.state end,
         disabled_reason = coalesce(?::text, w.disabled_reason),
         test_events = coalesce((select jsonb_agg(t order by n) from jsonb_array_elements(w.test_events) with ordinality as x(t, n) where t->>'id' is distinct from ?::text), '[]'::jsonb),
         lease_owner = case when ?::timestamptz is null then null else w.lease_owner end,
         lease_until = ?::timestamptz
        where w.user_id = ? and w.id = ? and w.lease_owner = ? and w.generation = ?
        returning w.user_id, w.cursor, w.state
     ), released as (
       -- Its owner moved it since the claim (a replay, a new URL, disabled): the lease goes back.
       update webhooks w set lease_owner = null, lease_until = null
        where w.user_id = ? and w.id = ? and w.lease_owner = ? and w.generation <> ?
        returning 1
     ), logged as (
       insert into webhook_deliveries (user_id, webhook_id, event_id, event_type, attempt, at, outcome, http_status, error, duration_ms, next_attempt_at)
       select w.user_id, w.id, ?, ?, ?, ?, ?, ?, ?, ?, ?::timestamptz from webhooks w
        where ?::boolean and w.user_id = ? and w.id = ?
     )
     select exists (select 1 from changed) as held, exists (select 1 from released) as moved,
            coalesce((select u.last_event_seq > c.cursor from changed c join users u on u.id = c.user_id where u.id = ?), false) as more,
            coalesce((select c.state = 'enabled' from changed c), false) as enabled`,
    [
      step.cursor ?? null,
      step.failed?.attempts ?? null, step.cursor ?? null,
      step.failed?.nextAttemptAt ?? null, step.cursor ?? null,
      step.disable ?? null, step.disable ?? null,
      step.testId ?? null,
      step.leaseUntil, step.leaseUntil,
      step.userId, step.id, step.owner, step.generation,
      step.userId, step.id, step.owner, step.generation,
      a?.eventId ?? '', a?.eventType ?? '', a?.attempt ?? 0, a?.at ?? new Date(0), a?.outcome ?? 'failed', a?.httpStatus ?? null,
      a?.error ?? null, a?.durationMs ?? 0, a?.nextAttemptAt ?? null,
      a !== undefined, step.userId, step.id,
      step.userId,
    ],
  );
  return { held: row?.held ?? false, moved: row?.moved ?? false, more: row?.more ?? false, enabled: row?.enabled ?? false };
}

/** Gives back every lease of `owner` (a graceful stop): another process takes them at once. */
export async function releaseLeases(em: SqlEntityManager, owner: string): Promise<void> {
  await em.execute(`update webhooks set lease_owner = null, lease_until = null where lease_owner = ?`, [owner], 'run');
}

/** Events after each webhook's place, by the webhook's state (/metrics). */
export async function waitingEvents(em: SqlEntityManager): Promise<Record<'enabled' | 'disabled', number>> {
  const rows = await em.execute<Array<{ state: 'enabled' | 'disabled'; waiting: string }>>(
    `select w.state, sum(greatest(u.last_event_seq - w.cursor, 0))::text as waiting
       from webhooks w join users u on u.id = w.user_id group by w.state`,
  );
  const waiting = { enabled: 0, disabled: 0 };
  for (const r of rows) waiting[r.state] = Number(r.waiting);
  return waiting;
}
