/**
 * Idempotency keys (API-CONTRACT.md §11), after Stripe's semantics and Brandur Leach's
 * "Implementing Stripe-like Idempotency Keys in Postgres": the outcome of a keyed write is
 * stored by the write's own transaction (src/writes/write-functions.ts `key_open`, `key_keep`),
 * so a crash keeps both or neither. Here: the key as sent, its fingerprint and advisory lock, the
 * check of a record found, and the pruning of records past their 24 hours (which are ignored).
 */
import { createHash } from 'node:crypto';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { DomainError, TOO_DEEP_DETAIL } from '../core/errors.js';
import { MAX_JSON_DEPTH } from '../core/limits.js';
import { sendEtag } from '../core/conditional.js';
import type { AuthedContext, Call } from '../core/context.js';

export const IDEMPOTENCY_KEY_TTL_MS = 24 * 3600 * 1000;
/** 1 to 255 visible ASCII characters. */
const KEY = /^[\x21-\x7e]{1,255}$/;

export interface StoredOutcome {
  fingerprint: string;
  status: number;
  /** A success: the procedure's output (null for 204). A failure: `{errors}`. */
  body: unknown;
  etag: string | null;
}

/**
 * JSON with sorted members, for any value a door can hand over (superjson brings Dates, BigInts,
 * Maps and Sets). Linear in the input: an object met again (a cycle, or superjson's referential
 * equalities: 2^n paths for n bytes) is written as `{"$ref":k}`, not walked again; deeper than
 * MAX_JSON_DEPTH is refused as the doors refuse such text.
 */
function canonical(value: unknown, depth = 0, met = new Map<object, number>()): string {
  if (typeof value === 'bigint') return `{"$bigint":"${value}"}`;
  if (value === undefined || typeof value === 'function' || typeof value === 'symbol') return 'null';
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  const first = met.get(value);
  if (first !== undefined) return `{"$ref":${first}}`;
  met.set(value, met.size);
  if (value instanceof Date) return `{"$date":${JSON.stringify(Number.isNaN(value.getTime()) ? null : value.toISOString())}}`;
  // As deep as the JSON it came from (superjson sends a Set as an array, a Map as an array of pairs).
  if (depth >= MAX_JSON_DEPTH) throw DomainError.of('invalid_json', { detail: TOO_DEEP_DETAIL });
  const inner = (v: unknown) => canonical(v, depth + 1, met);
  if (value instanceof Map) {
    if (value.size > 0 && depth + 1 >= MAX_JSON_DEPTH) throw DomainError.of('invalid_json', { detail: TOO_DEEP_DETAIL });
    return `{"$map":[${[...value.entries()].map(([k, v]) => `[${canonical(k, depth + 2, met)},${canonical(v, depth + 2, met)}]`).join(',')}]}`;
  }
  if (value instanceof Set) return `{"$set":[${[...value.values()].map(inner).join(',')}]}`;
  if (Array.isArray(value)) return `[${value.map(inner).join(',')}]`;
  // A member that is undefined is no member, as in JSON (the same input on either door).
  const keys = Object.keys(value).filter((k) => (value as Record<string, unknown>)[k] !== undefined).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${inner((value as Record<string, unknown>)[k])}`).join(',')}}`;
}

/**
 * What makes two requests "the same": the procedure (one method and path template on REST)
 * and its input as sent: the body with the path id (as a number on both doors) and query.
 */
export async function fingerprintOf(call: Call): Promise<string> {
  const raw = await call.rawInput();
  let input = raw;
  if (raw && typeof raw === 'object' && !Array.isArray(raw) && 'id' in raw && typeof (raw as { id: unknown }).id === 'string') {
    input = { ...(raw as object), id: Number((raw as { id: string }).id) };
  }
  return createHash('sha256').update(`${call.path}\n${canonical(input)}`).digest('base64url');
}

/** The 64-bit advisory lock of a user's key, as a decimal string. */
export function keyLock(userId: number, key: string): string {
  return createHash('sha256').update(`${userId}:${key}`).digest().readBigInt64BE(0).toString();
}

/** The Idempotency-Key of a write request: the key, the request's fingerprint, and what a keyed write does with them. */
export class IdempotencyKey {
  private constructor(
    readonly userId: number,
    readonly key: string,
    readonly fingerprint: string,
  ) {}

  /** The request's key, checked (1 to 255 visible ASCII characters), with its fingerprint; undefined when none was sent. */
  static async of(ctx: AuthedContext): Promise<IdempotencyKey | undefined> {
    const header = ctx.header('Idempotency-Key');
    if (header === undefined) return undefined;
    if (!KEY.test(header)) {
      throw DomainError.of('invalid', { parameter: 'Idempotency-Key', detail: 'Idempotency-Key must be 1 to 255 visible ASCII characters.' });
    }
    return new IdempotencyKey(ctx.user.id, header, await fingerprintOf(ctx.call));
  }

  /** The record found, to replay; 422 idempotency_key_reused when it was another request's. */
  replayOf(record: StoredOutcome): StoredOutcome {
    if (record.fingerprint !== this.fingerprint) {
      throw DomainError.of('idempotency_key_reused', {
        parameter: 'Idempotency-Key',
        detail: 'This Idempotency-Key was already used with a different request (method, path or body).',
      });
    }
    return record;
  }
}

/** What a replayed outcome answers (`Idempotent-Replayed: true`): its error thrown, or its body with its ETag. */
export function replayed<T>(ctx: AuthedContext, record: StoredOutcome): T {
  ctx.setHeader('Idempotent-Replayed', 'true');
  const stored = record.body as { errors?: DomainError['errors']; meta?: Record<string, unknown> } | null;
  if (record.status >= 400 && stored?.errors) {
    const error = new DomainError(stored.errors);
    throw stored.meta ? error.withMeta(stored.meta) : error;
  }
  if (record.etag) sendEtag(ctx, record.etag);
  return (record.body ?? undefined) as T;
}

const PRUNE_EVERY_MS = 60_000;
let prunedAt = Number.NEGATIVE_INFINITY;

/**
 * Starts a prune at most once a minute per process (by the service's clock), after a keyed write
 * committed, not waited for. Two processes racing at worst delete nothing the second time.
 */
export function pruneNowAndThen(em: SqlEntityManager, now: Date): void {
  if (now.getTime() - prunedAt < PRUNE_EVERY_MS && now.getTime() >= prunedAt) return;
  prunedAt = now.getTime();
  pruneIdempotencyKeys(em.fork(), now).catch(() => undefined);
}

/**
 * Drops up to `batch` records past their 24 hours: the users who have some are found first (on
 * a sharded database, every node), then each user's deleted by a statement of that user's node.
 */
export async function pruneIdempotencyKeys(em: SqlEntityManager, now: Date, batch = 5_000): Promise<number> {
  const before = new Date(now.getTime() - IDEMPOTENCY_KEY_TTL_MS);
  const users = await em.execute<Array<{ user_id: number; n: string }>>(
    'select user_id, count(*) as n from idempotency_keys where created_at <= ? group by user_id order by min(created_at) limit ?',
    [before, batch],
  );
  let removed = 0;
  for (const { user_id: userId, n } of users) {
    if (removed >= batch) break;
    const result = await em.execute<{ affectedRows: number }>(
      // The age is checked again on the row deleted: a key used again since it was found (its
      // record replaced by a new write's) is kept.
      `delete from idempotency_keys k where k.user_id = ? and k.created_at <= ? and k.key in (
         select d.key from idempotency_keys d where d.user_id = ? and d.created_at <= ? order by d.created_at limit ?)`,
      [userId, before, userId, before, Math.min(Number(n), batch - removed)],
      'run',
    );
    removed += result.affectedRows;
  }
  return removed;
}
