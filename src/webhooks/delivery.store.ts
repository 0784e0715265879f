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
import { execute } from '../db/prepared.js';
import type { RetiredSecretColumns } from './webhook.store.js';

/** Events read per webhook at a time. */
export const EVENTS_IN_HAND = 20;

export interface ClaimedWebhook {
  user_id: number;
  id: number;
  url: string;
  events: string[];
  cursor: string;
  attempt: number;
  generation: number;
  /** The test events asked for, oldest first. */
  test_events: Array<{ id: string; at: number }>;
  /** Its log events may be attempted now (enabled, and no retry waits). */
  log_due: boolean;
  /** The lease of this claim: the process and the claim (a later claim by the same process is another). */
  lease_owner: string;
  /** The newest event of its user's log that retention removed: events up to it cannot be delivered. */
  pruned: string;
  /** Up to EVENTS_IN_HAND events after its place (`at` in seconds, as the log keeps it). */
  pending: Array<LogEvent & { at: number }>;
}

const EVENTS_AFTER = (user: string, cursor: string) =>
  `coalesce((select json_agg(json_build_object('id', e.seq::text, 'type', e.type, 'data', e.data, 'at', extract(epoch from e.at)::float8) order by e.seq)
              from (select e.seq, e.type, e.data, e.at from events e where e.user_id = ${user} and e.seq > ${cursor} order by e.seq limit ${EVENTS_IN_HAND}) e), '[]'::json)`;

/** A webhook is due: no live lease, and a test event waiting or log events it may attempt now. */
const DUE = `(w.lease_until is null or w.lease_until < ?)
          and (w.test_events <> '[]' or (w.state = 'enabled' and w.next_attempt_at <= ? and u.last_event_seq > w.cursor))`;

/**
 * Leases up to `limit` due webhooks to the claim `owner` (the process and this claim) until
 * `leaseUntil`, with their next events. `users`: only these users' webhooks (a notification
 * named them); null: any, found by a read over every user (`dueUsers`).
 *
 * Each user's webhooks are claimed by a statement of their own, which names the user on every
 * table it reads: sharded by user (Citus), a row lock (`for update skip locked`) is taken only
 * by a statement that goes to one node, and only that one reaches one node.
 */
export async function claimDue(
  em: SqlEntityManager, owner: string, now: Date, leaseUntil: Date, limit: number, users: number[] | null,
): Promise<ClaimedWebhook[]> {
  const claimed: ClaimedWebhook[] = [];
  for (const userId of users ?? (await dueUsers(em, now, limit))) {
    if (claimed.length >= limit) break;
    claimed.push(...(await claimOfUser(em, userId, owner, now, leaseUntil, limit - claimed.length)));
  }
  return claimed;
}

/**
 * The users with due webhooks, those due longest first: the round over every user (a safety
 * net behind the notifications), so it asks every node of a sharded database. Reads only: the
 * claims go to each user's node.
 */
async function dueUsers(em: SqlEntityManager, now: Date, limit: number): Promise<number[]> {
  const rows = await em.execute<Array<{ user_id: number }>>(
    `select w.user_id from webhooks w join users u on u.id = w.user_id
      where ${DUE}
      group by w.user_id order by min(w.next_attempt_at) limit ?`,
    [now, now, limit],
  );
  return rows.map((r) => Number(r.user_id));
}

/** The users that have a webhook (src/webhooks/deliverer.ts `#owners`), read at a process's start: a read over every user. */
export async function webhookOwners(em: SqlEntityManager): Promise<number[]> {
  const rows = await em.execute<Array<{ user_id: number }>>('select distinct user_id from webhooks');
  return rows.map((r) => Number(r.user_id));
}

/** Prepared: it follows every write of a user with webhooks. */
async function claimOfUser(
  em: SqlEntityManager, userId: number, owner: string, now: Date, leaseUntil: Date, limit: number,
): Promise<ClaimedWebhook[]> {
  return execute<ClaimedWebhook>(
    em,
    `with due as (
       select w.id from webhooks w join users u on u.id = w.user_id
        where w.user_id = ? and u.id = ? and ${DUE}
        order by w.next_attempt_at
        limit ?
          for update of w skip locked
     ), claimed as (
       update webhooks w set lease_owner = ?, lease_until = ?
         from due where w.user_id = ? and w.id = due.id
       returning w.user_id, w.id, w.url, w.events, w.state,
                 w.cursor, w.attempt, w.generation, w.test_events, w.next_attempt_at, w.lease_owner
     )
     select c.user_id, c.id, c.url, c.events, c.cursor::text as cursor,
            c.attempt, c.generation, c.test_events, (c.state = 'enabled' and c.next_attempt_at <= ?) as log_due, c.lease_owner,
            (select u.events_pruned_through::text from users u where u.id = ?) as pruned,
            ${EVENTS_AFTER('?', 'c.cursor')} as pending
       from claimed c`,
    [userId, userId, now, now, limit, owner, leaseUntil, userId, now, userId, userId],
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
  /** The process's time of the step. */
  now: Date;
}

/**
 * Records one step of a leased webhook in one statement: logs the attempt, moves the place
 * or plans the retry, clears a sent test event, renews or gives back the lease. One UPDATE
 * whose only condition is the claim's lease: PostgreSQL evaluates every column on the newest
 * row (after waiting for an edit that holds it), so a webhook its owner changed since the claim
 * (`generation`: a replay, a new URL or events, disabled) is never half-recorded nor left
 * leased: its place stays, and its lease goes back. A test event sent is cleared all the same:
 * it is attempted once.
 */
export async function recordStep(em: SqlEntityManager, step: Step): Promise<Recorded> {
  const a = step.attempt;
  const [row] = await em.execute<Array<{ held: boolean; moved: boolean; more: boolean; enabled: boolean }>>(
    `with p as (
       select ?::bigint as id, ?::text as owner, ?::int as gen, ?::bigint as cursor, ?::int as failures,
              ?::timestamptz as next_at, ?::text as disable, ?::text as test_id, ?::timestamptz as lease_until, ?::timestamptz as now
     ), changed as (
       update webhooks w set
         cursor = case when w.generation = p.gen then greatest(w.cursor, coalesce(p.cursor, w.cursor)) else w.cursor end,
         attempt = case when w.generation <> p.gen then w.attempt when p.failures is not null then p.failures when p.cursor is not null then 0 else w.attempt end,
         /* Given back with nothing failed: due from now, behind those due before (first come, first served). */
         next_attempt_at = case when w.generation <> p.gen then w.next_attempt_at when p.next_at is not null then p.next_at
                                when p.lease_until is null then p.now else w.next_attempt_at end,
         state = case when w.generation = p.gen and p.disable is not null then 'disabled' else w.state end,
         disabled_reason = case when w.generation = p.gen and p.disable is not null then p.disable else w.disabled_reason end,
         test_events = case when p.test_id is not null
                            then coalesce((select jsonb_agg(t order by n) from jsonb_array_elements(w.test_events) with ordinality as x(t, n)
                                            where t->>'id' is distinct from p.test_id), '[]'::jsonb)
                            else w.test_events end,
         lease_owner = case when w.generation = p.gen and p.lease_until is not null then w.lease_owner else null end,
         lease_until = case when w.generation = p.gen then p.lease_until else null end,
         /* The request of this step has ended (src/users/delete-user.ts waits for it). */
         sending_until = null
        from p
        where w.user_id = ? and w.id = p.id and w.lease_owner = p.owner
        returning w.cursor, w.state, w.generation
     ), held as (
       select c.generation = p.gen as held, c.cursor, c.state from changed c, p
     ), logged as (
       insert into webhook_deliveries (user_id, webhook_id, event_id, event_type, attempt, at, outcome, http_status, error, duration_ms, next_attempt_at)
       select ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::timestamptz
        where ?::boolean and exists (select 1 from webhooks w where w.user_id = ? and w.id = ?)
     )
     select coalesce((select h.held from held h), false) as held,
            coalesce((select not h.held from held h), false) as moved,
            coalesce((select h.held and u.last_event_seq > h.cursor from held h, users u where u.id = ?), false) as more,
            coalesce((select h.held and h.state = 'enabled' from held h), false) as enabled`,
    [
      step.id, step.owner, step.generation, step.cursor ?? null, step.failed?.attempts ?? null,
      step.failed?.nextAttemptAt ?? null, step.disable ?? null, step.testId ?? null, step.leaseUntil, step.now,
      step.userId,
      step.userId, step.id,
      a?.eventId ?? '', a?.eventType ?? '', a?.attempt ?? 0, a?.at ?? new Date(0), a?.outcome ?? 'failed', a?.httpStatus ?? null,
      a?.error ?? null, a?.durationMs ?? 0, a?.nextAttemptAt ?? null,
      a !== undefined, step.userId, step.id,
      step.userId,
    ],
  );
  return { held: row?.held ?? false, moved: row?.moved ?? false, more: row?.more ?? false, enabled: row?.enabled ?? false };
}

/**
 * Marks a leased webhook as sending a request until `until` (the end of the request's time
 * limit), just before the request, and reads the secrets that sign it then (a rotation since
 * the claim signs this request already): one statement that also takes a key-share lock on the
 * user's row. A deletion of the user holds that row's lock (`for update`) from before it looks
 * for marks until its commit (src/users/delete-user.ts), so a mark is either made before that
 * look (and waited for), or waits for the deletion and then finds no row: no request is sent.
 * Null when nothing was marked (the user or the webhook is gone, or the lease is another
 * claim's): then the request is not sent.
 */
export async function markSending(em: SqlEntityManager, userId: number, id: number, owner: string, until: Date): Promise<RetiredSecretColumns & { secret: string } | null> {
  const rows = await em.execute<Array<RetiredSecretColumns & { secret: string }>>(
    `with u as (select id from users where id = ? for key share)
     update webhooks w set sending_until = ?
       from u where w.user_id = ? and u.id = ? and w.id = ? and w.lease_owner = ?
     returning w.secret, w.retired_secrets, w.retired_until`,
    [userId, until, userId, userId, id, owner],
  );
  return rows[0] ?? null;
}

/** Gives back the lease of one claim on one webhook (a loop the database cut off); nothing when the lease is another's. */
export async function releaseLease(em: SqlEntityManager, userId: number, id: number, owner: string): Promise<void> {
  await em.execute(
    `update webhooks set lease_owner = null, lease_until = null where user_id = ? and id = ? and lease_owner = ?`,
    [userId, id, owner], 'run',
  );
}

/**
 * Gives back every lease of the process `owner` (a graceful stop): another process takes them
 * at once. Over every user (a process's leases may be anyone's): on a sharded database it asks
 * every node, once per stop.
 */
export async function releaseLeases(em: SqlEntityManager, owner: string): Promise<void> {
  await em.execute(`update webhooks set lease_owner = null, lease_until = null where lease_owner like ?`, [`${owner}:%`], 'run');
}

/** Events after each webhook's place, by the webhook's state (/metrics): over every user, so every node of a sharded database. */
export async function waitingEvents(em: SqlEntityManager): Promise<Record<'enabled' | 'disabled', number>> {
  const rows = await em.execute<Array<{ state: 'enabled' | 'disabled'; waiting: string }>>(
    `select w.state, sum(greatest(u.last_event_seq - w.cursor, 0))::text as waiting
       from webhooks w join users u on u.id = w.user_id group by w.state`,
  );
  const waiting = { enabled: 0, disabled: 0 };
  for (const r of rows) waiting[r.state] = Number(r.waiting);
  return waiting;
}
