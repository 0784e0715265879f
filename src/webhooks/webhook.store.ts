/**
 * Webhooks in PostgreSQL, as their owner manages them (API-CONTRACT.md §14): each statement
 * names the user, so another user's webhook is never found. The writes run in the
 * transaction of `plainWrite` (src/writes/user-write.ts), under the owner's lock. A webhook's place in its user's
 * change log (`cursor`) starts at the newest event when it is created; only a replay moves it
 * back, and a re-enable resumes from it.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { toSeconds } from '../core/clock.js';
import { DomainError } from '../core/errors.js';
import { pageLimit, textArray } from '../db/sql-fragments.js';
import { stillSigning, type RetiredSecret } from './signature.js';
import { MAX_WEBHOOKS_PER_USER, type WebhookResource } from './webhook.schema.js';

export interface WebhookRow {
  user_id: number;
  id: number;
  url: string;
  events: string[];
  description: string;
  state: 'enabled' | 'disabled';
  disabled_reason: string | null;
  created_at: Date | string;
  cursor: string;
}

const COLUMNS = `w.user_id, w.id, w.url, w.events, w.description, w.state, w.disabled_reason, w.created_at, w.cursor::text as cursor`;

/**
 * A change of one webhook (`change`: an INSERT or UPDATE of `webhooks` aliased `w`, without
 * its RETURNING) answering the webhook as COLUMNS: it returns plain columns, converted by the
 * select around it (sharded by user, RETURNING may hold nothing but columns).
 */
const answering = (change: string) => `with changed as (${change} returning w.*) select ${COLUMNS} from changed w`;

/** The `data` document of a webhook. */
export function presentWebhook(row: WebhookRow): WebhookResource {
  return {
    type: 'webhook',
    id: row.id,
    attributes: {
      url: row.url,
      events: row.events as WebhookResource['attributes']['events'],
      description: row.description,
      state: row.state,
      disabledReason: row.disabled_reason,
      createdAt: toSeconds(new Date(row.created_at)),
      lastEventId: row.cursor,
    },
  };
}

const notFound = () => DomainError.notFound('webhook');

/** The user's webhook, or 404. */
export async function findWebhook(em: SqlEntityManager, userId: number, id: number): Promise<WebhookRow> {
  const [row] = await em.execute<WebhookRow[]>(`select ${COLUMNS} from webhooks w where w.user_id = ? and w.id = ?`, [userId, id]);
  if (!row) throw notFound();
  return row;
}

export async function listWebhooks(em: SqlEntityManager, userId: number): Promise<WebhookRow[]> {
  return em.execute<WebhookRow[]>(`select ${COLUMNS} from webhooks w where w.user_id = ? order by w.id`, [userId]);
}

/** At most `limit` of the user's webhooks whose id is above `after`, by id: a keyset page of the account's export. */
export async function webhooksAfter(em: SqlEntityManager, userId: number, after: number, limit: number): Promise<WebhookRow[]> {
  return em.execute<WebhookRow[]>(`select ${COLUMNS} from webhooks w where w.user_id = ? and w.id > ? order by w.id limit ${pageLimit(limit)}`, [userId, after]);
}

export interface NewWebhook {
  url: string;
  events: string[];
  description: string;
  secret: string;
  now: Date;
}

/**
 * Adds a webhook that starts after the newest event of the log. Run under the owner's lock
 * (src/writes/user-write.ts `plainWrite`), as every write of the user: two creations at once
 * cannot both see room for a tenth.
 */
export async function insertWebhook(em: SqlEntityManager, userId: number, webhook: NewWebhook): Promise<WebhookRow> {
  const [row] = await em.execute<WebhookRow[]>(
    `with room as (
       select u.last_event_seq from users u
        where u.id = ? and (select count(*) from webhooks c where c.user_id = ?) < ?
     ), changed as (
       insert into webhooks as w (user_id, url, events, description, secret, created_at, updated_at, cursor, next_attempt_at)
       select ?, ?, ?::jsonb, ?, ?, ?, ?, room.last_event_seq, 'epoch' from room
       returning w.*
     )
     select ${COLUMNS} from changed w`,
    [
      userId, userId, MAX_WEBHOOKS_PER_USER,
      userId, webhook.url, JSON.stringify(webhook.events), webhook.description, webhook.secret, webhook.now, webhook.now,
    ],
  );
  if (!row) {
    throw DomainError.of('limit_reached', {
      pointer: '/webhook',
      detail: `You have ${MAX_WEBHOOKS_PER_USER} webhooks, the most a user may have: delete one first.`,
    });
  }
  return row;
}

export interface WebhookEdit {
  url?: string;
  events?: string[];
  description?: string;
  state?: 'enabled' | 'disabled';
}

/**
 * Changes a webhook. Enabling a disabled one resumes from its place: the first event after
 * `cursor`, unless retention has removed it (410 cursor_expired, with the newest id).
 * Disabling, or a new URL or events, ends the delivery under way: its `generation` moves, so
 * that the process attempting it records nothing more of it (an attempt already sent is made
 * again, to the new URL, once enabled) and gives its lease back.
 */
export async function updateWebhook(tx: SqlEntityManager, userId: number, id: number, edit: WebhookEdit, now: Date): Promise<WebhookRow> {
  const [current] = await tx.execute<Array<{ state: string; url: string; events: string[]; cursor: string; pruned: string; last: string }>>(
    `select w.state, w.url, w.events, w.cursor::text as cursor, u.events_pruned_through::text as pruned, u.last_event_seq::text as last
       from webhooks w join users u on u.id = w.user_id
      where w.user_id = ? and w.id = ? and u.id = ?
        for update of w`,
    [userId, id, userId],
  );
  if (!current) throw notFound();
  const enabling = edit.state === 'enabled' && current.state === 'disabled';
  // A new URL starts afresh: the failures of the old one are not its own.
  const newUrl = edit.url !== undefined && edit.url !== current.url;
  const moved =
    (edit.state !== undefined && edit.state !== current.state) ||
    newUrl ||
    (edit.events !== undefined && JSON.stringify(edit.events) !== JSON.stringify(current.events));
  if (enabling && BigInt(current.cursor) < BigInt(current.pruned)) {
    throw DomainError.of('cursor_expired', {
      detail: `The first event this webhook has not delivered (after ${current.cursor}) is no longer kept: replay it from a kept id (meta.last_event_id is the newest), then enable it.`,
    }).withMeta({ last_event_id: current.last });
  }
  const [row] = await tx.execute<WebhookRow[]>(
    answering(`update webhooks w set
       url = coalesce(?, w.url),
       events = coalesce(?::jsonb, w.events),
       description = coalesce(?, w.description),
       state = coalesce(?, w.state),
       disabled_reason = case when ? then null when ? = 'disabled' and w.state = 'enabled' then null else w.disabled_reason end,
       attempt = case when ? then 0 else w.attempt end,
       next_attempt_at = case when ? then 'epoch' else w.next_attempt_at end,
       generation = w.generation + case when ? then 1 else 0 end,
       updated_at = ?
     where w.user_id = ? and w.id = ?`),
    [
      edit.url ?? null, edit.events ? JSON.stringify(edit.events) : null, edit.description ?? null, edit.state ?? null,
      enabling, edit.state ?? null,
      enabling || newUrl, enabling || newUrl, moved,
      now, userId, id,
    ],
  );
  return row!;
}

export async function deleteWebhook(em: SqlEntityManager, userId: number, id: number): Promise<void> {
  const result = await em.execute<{ affectedRows: number }>('delete from webhooks where user_id = ? and id = ?', [userId, id], 'run');
  if (result.affectedRows === 0) throw notFound();
}

/**
 * Delivers every kept event after `after` again, in order, before newer ones: the place moves
 * back to `after` (never forward past an event not yet delivered, unless that event is no
 * longer kept: then to `after`, which is how a webhook whose place expired resumes). An id
 * older than what is kept, or newer than the log, is 410 cursor_expired.
 */
export async function replayWebhook(tx: SqlEntityManager, userId: number, id: number, after: bigint, now: Date): Promise<WebhookRow> {
  const [current] = await tx.execute<Array<{ pruned: string; last: string }>>(
    `select u.events_pruned_through::text as pruned, u.last_event_seq::text as last
       from webhooks w join users u on u.id = w.user_id
      where w.user_id = ? and w.id = ? and u.id = ?
        for update of w`,
    [userId, id, userId],
  );
  if (!current) throw notFound();
  if (after < BigInt(current.pruned) || after > BigInt(current.last)) {
    throw DomainError.of('cursor_expired', {
      detail: after > BigInt(current.last) ? 'This id is not in your change log.' : 'Events after this id are no longer kept.',
      pointer: '/replay/after',
    }).withMeta({ last_event_id: current.last });
  }
  const [row] = await tx.execute<WebhookRow[]>(
    answering(`update webhooks w set
       cursor = case when w.cursor < ? then ? else least(w.cursor, ?) end,
       attempt = 0, next_attempt_at = 'epoch', generation = w.generation + 1, updated_at = ?
     where w.user_id = ? and w.id = ?`),
    [current.pruned, after.toString(), after.toString(), now, userId, id],
  );
  return row!;
}

/** Test events a webhook may have waiting; one more is 429 until they are sent. */
export const MAX_PENDING_TESTS = 10;

/**
 * Queues a `webhook.test` event (its own id, not in the change log) to go whatever the
 * patterns, after the tests asked for before it.
 */
export async function queueTestEvent(em: SqlEntityManager, userId: number, id: number, testId: string, now: Date): Promise<WebhookRow> {
  const [row] = await em.execute<Array<WebhookRow & { queued: boolean }>>(
    `with found as (select w.user_id, w.id, jsonb_array_length(w.test_events) < ? as room from webhooks w where w.user_id = ? and w.id = ?),
     queued as (
       update webhooks w set test_events = w.test_events || jsonb_build_array(jsonb_build_object('id', ?::text, 'at', ?::bigint)), updated_at = ?
         from found where found.room and w.user_id = ? and w.id = found.id
       returning w.*
     )
     select ${COLUMNS}, true as queued from queued w
     union all
     select ${COLUMNS}, false from webhooks w join found f on f.id = w.id where w.user_id = ? and not f.room`,
    [MAX_PENDING_TESTS, userId, id, testId, toSeconds(now), now, userId, userId],
  );
  if (!row) throw notFound();
  if (!row.queued) {
    throw DomainError.of('rate_limited', {
      detail: `${MAX_PENDING_TESTS} test events of this webhook are still waiting to be sent; ask again once they are.`,
    }).withRetryAfter(5);
  }
  return row;
}

/**
 * Secrets retired within a day that a webhook may hold: an eleventh rotation is 429 until the
 * oldest stops signing. A bound of the service's own (the contract names none): each retired
 * secret adds a signature to every delivery, and receivers refuse headers past a few KiB.
 */
export const MAX_RETIRED_SECRETS = 10;

/** A webhook's retired secrets as its row holds them: two arrays, the same place in each, oldest first. */
export interface RetiredSecretColumns {
  retired_secrets: string[];
  retired_until: Array<Date | string>;
}

/** The retired secrets of a row, oldest first. */
export function retiredSecretsOf(row: RetiredSecretColumns): RetiredSecret[] {
  return row.retired_secrets.map((secret, i) => ({ secret, until: new Date(row.retired_until[i]!) }));
}

/**
 * A new signing secret. The one it replaces signs beside it until `retiredUntil`, and so does
 * every secret retired before that still signs; those no longer signing are dropped. Run
 * under the owner's lock (`plainWrite`), as every rotation: the read and the write see no
 * other rotation between them. A delivery under way reads the secrets again before each
 * request (delivery.store.ts `markSending`): its next request is signed with the new one too,
 * and what it has sent stays delivered (the secrets it signed with still sign).
 */
export async function rotateSecret(em: SqlEntityManager, userId: number, id: number, secret: string, now: Date, retiredUntil: Date): Promise<WebhookRow> {
  const [current] = await em.execute<Array<RetiredSecretColumns & { secret: string }>>(
    'select w.secret, w.retired_secrets, w.retired_until from webhooks w where w.user_id = ? and w.id = ?',
    [userId, id],
  );
  if (!current) throw notFound();
  const signing = stillSigning(retiredSecretsOf(current), now);
  if (signing.length >= MAX_RETIRED_SECRETS) {
    const free = Math.max(1, Math.ceil((signing[0]!.until.getTime() - now.getTime()) / 1000));
    throw DomainError.of('rate_limited', {
      detail: `${MAX_RETIRED_SECRETS} secrets retired by earlier rotations still sign this webhook's deliveries; rotate again once the oldest stops, in ${free} seconds.`,
    }).withRetryAfter(free);
  }
  const retired = [...signing, { secret: current.secret, until: retiredUntil }];
  const [row] = await em.execute<WebhookRow[]>(
    answering(`update webhooks w set retired_secrets = ?::text[], retired_until = ?::timestamptz[], secret = ?, updated_at = ?
      where w.user_id = ? and w.id = ?`),
    [textArray(retired.map((r) => r.secret)), textArray(retired.map((r) => r.until.toISOString())), secret, now, userId, id],
  );
  return row!;
}

export interface DeliveryRow {
  id: string;
  event_id: string;
  event_type: string;
  attempt: number;
  at: Date | string;
  outcome: 'delivered' | 'failed' | 'blocked';
  http_status: number | null;
  error: string | null;
  duration_ms: number;
  next_attempt_at: Date | string | null;
}

/** A page of the webhook's attempts, newest first, and how many there are. */
export async function listDeliveries(
  em: SqlEntityManager, userId: number, id: number, offset: number, limit: number,
): Promise<{ rows: DeliveryRow[]; total: number }> {
  const [head] = await em.execute<Array<{ found: boolean; total: number }>>(
    `select exists (select 1 from webhooks w where w.user_id = ? and w.id = ?) as found,
            (select count(*) from webhook_deliveries d where d.user_id = ? and d.webhook_id = ?)::int as total`,
    [userId, id, userId, id],
  );
  if (!head?.found) throw notFound();
  const rows = await em.execute<DeliveryRow[]>(
    `select d.id::text as id, d.event_id, d.event_type, d.attempt, d.at, d.outcome, d.http_status, d.error, d.duration_ms, d.next_attempt_at
       from webhook_deliveries d where d.user_id = ? and d.webhook_id = ?
      order by d.id desc offset ? limit ?`,
    [userId, id, offset, limit],
  );
  return { rows, total: head.total };
}

/**
 * Attempts older than the change log keeps events (EVENTS_RETENTION_DAYS), a batch at a time.
 * The users who have such attempts are found by a read over every user (on a sharded
 * database, every node); each user's are deleted by a statement that goes to its node alone.
 */
export async function pruneDeliveries(em: SqlEntityManager, now: Date, retentionDays: number): Promise<number> {
  const before = new Date(now.getTime() - retentionDays * 86_400_000);
  let removed = 0;
  for (;;) {
    const users = await em.execute<Array<{ user_id: number }>>(
      'select distinct user_id from webhook_deliveries where at < ? limit 100',
      [before],
    );
    if (users.length === 0) return removed;
    for (const { user_id: userId } of users) {
      for (;;) {
        const result = await em.execute<{ affectedRows: number }>(
          `delete from webhook_deliveries d where d.user_id = ? and d.id in (
             select o.id from webhook_deliveries o where o.user_id = ? and o.at < ? limit 5000)`,
          [userId, userId, before],
          'run',
        );
        removed += result.affectedRows;
        if (result.affectedRows < 5000) break;
      }
    }
  }
}
