/**
 * The write path's TypeScript side (docs/design/writes.md): `write(ctx, op, input)` checks the
 * Idempotency-Key, waits for the user's turn in this process, makes the one call of `apply`
 * (src/writes/write-functions.ts) and turns its answer into the procedure's: output and ETag, a
 * replay, or a refusal. The NOTIFY is handed to the announcer after the commit, not waited for.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { run, sql } from '../db/sql-builder.js';
import { endOfDay, userDay } from '../core/user-day.js';
import { ifMatchTags, ifNoneMatchTags, sendEtag } from '../core/conditional.js';
import type { AuthedContext } from '../core/context.js';
import { DomainError, type ErrorCode } from '../core/errors.js';
import { IdempotencyKey, keyLock, pruneNowAndThen, replayed, IDEMPOTENCY_KEY_TTL_MS } from './idempotency.js';
import { retried } from './owner-lock.js';
import { turnOf } from './turns.js';
import type { Refusal } from './write-functions.js';

/** One operation of a call of `apply` (its members: src/writes/write-functions.ts). */
export interface Operation {
  op: string;
  input: unknown;
  if_match: string[] | null;
  if_none_match: string[] | null;
  status: number;
  /** In a batch: the name its `ref` gives the resource it creates. */
  ref?: string;
  /** In a batch: the ids of its input that stand for a resource an earlier operation created. */
  refs?: Array<{ at: readonly string[]; ref: string }>;
}

/** The operation that ends a batch before the next one, whose input was refused. */
export const STOP: Operation = { op: 'stop', input: null, if_match: null, if_none_match: null, status: 0 };

interface Applied {
  replay?: { fingerprint: string; status: number; body: unknown; etag: string | null };
  refusal?: Refusal & { stop?: true };
  index?: number;
  body?: unknown;
  etag?: string | null;
  notify?: string | null;
}

/** A batch's operation, read by its procedure and handed to the batch instead of run (src/batch/apply-batch.ts). */
export class BatchStep extends Error {
  constructor(readonly operation: Operation) {
    super('a batch step');
  }
}

/** How a batch answers a refusal of its operation at `index` (`stop`: refused before it ran). */
export type RefusalAt = (refusal: DomainError | 'stop', index: number) => unknown;

/** Runs one write operation of the user (a procedure's call): `op` is the procedure's path. */
export async function write<T>(ctx: AuthedContext, op: string, input: unknown): Promise<T> {
  const operation: Operation = {
    op,
    input,
    if_match: ifMatchTags(ctx.header('If-Match')),
    if_none_match: ifNoneMatchTags(ctx.header('If-None-Match')),
    status: ctx.call.meta?.successStatus ?? 200,
  };
  if (ctx.batchStep) throw new BatchStep(operation);
  return applyWrite<T>(ctx, [operation]);
}

/** Runs the user's operations (one, or a batch's with its `refusalAt`) as one call of `apply`. */
export async function applyWrite<T>(ctx: AuthedContext, operations: Operation[], refusalAt?: RefusalAt): Promise<T> {
  const key = await IdempotencyKey.of(ctx);
  const release = await turnOf(ctx);
  let applied: Applied;
  try {
    const now = ctx.clock.now();
    applied = await retried(ctx.log, () => callApply(ctx, ctx.em, operations, key, now, refusalAt !== undefined));
    if (applied.notify) void ctx.announcer.announce(applied.notify);
    if (key) pruneNowAndThen(ctx.em, now);
  } finally {
    release();
  }
  return answer<T>(ctx, applied, key, refusalAt ?? ((refusal) => refusal));
}

/** The user's day as the write functions read it (`p_day`): its next midnight and its last instant, in the user's zone. */
function dayOf(ctx: AuthedContext, now: Date): string {
  const day = userDay(now, ctx.user.timeZone);
  return JSON.stringify({ next: day.next.toISOString(), end: endOfDay(day).toISOString() });
}

async function callApply(ctx: AuthedContext, em: SqlEntityManager, operations: Operation[], key: IdempotencyKey | undefined, now: Date, batch: boolean): Promise<Applied> {
  const since = new Date(now.getTime() - IDEMPOTENCY_KEY_TTL_MS);
  const rows = await run(em, sql<{ applied: Applied }>`select ${sql.raw(ctx.writes.apply)}(
      ${ctx.user.id}::bigint, ${now}::timestamptz, ${dayOf(ctx, now)}::json, ${jsonText(operations)}::json,
      ${key?.key ?? null}::text, ${key ? keyLock(ctx.user.id, key.key) : null}::bigint, ${key?.fingerprint ?? null}::text,
      ${key ? since : null}::timestamptz, ${batch}::boolean) as applied`);
  return rows[0]!.applied;
}

function answer<T>(ctx: AuthedContext, applied: Applied, key: IdempotencyKey | undefined, refusalAt: RefusalAt): T {
  if (applied.replay) {
    const record = key!.replayOf({ ...applied.replay });
    // A refusal of the write functions is kept as they raised it (`key_keep`), with the index of its operation.
    const stored = record.body as { refusal?: Refusal; index?: number } | null;
    if (stored?.refusal) {
      ctx.setHeader('Idempotent-Replayed', 'true');
      throw refusalAt(refusalError(stored.refusal), stored.index ?? 0);
    }
    return replayed<T>(ctx, record);
  }
  if (applied.refusal?.stop) throw refusalAt('stop', applied.index!);
  // Without an index, the write's own refusal (its key in use, its user gone): no operation's.
  if (applied.refusal) throw applied.index === undefined ? refusalError(applied.refusal) : refusalAt(refusalError(applied.refusal), applied.index);
  if (applied.etag) sendEtag(ctx, applied.etag);
  return (applied.body ?? undefined) as T;
}

/** A refusal of the database's rules as the service's error (its status from the catalogue). */
export function refusalError(refusal: Refusal): DomainError {
  if (refusal.errors) return new DomainError(refusal.errors.flatMap((r) => refusalError(r).errors));
  return DomainError.of(refusal.code as ErrorCode, { status: refusal.status, pointer: refusal.pointer, parameter: refusal.parameter, detail: refusal.detail });
}

/**
 * The input as JSON for the database. Values a schema let through unread may be anything
 * superjson brings: a BigInt is written as its digits, an object met again (a cycle, or one
 * shared along 2^40 paths) as null, a NUL or lone surrogate (which PostgreSQL's text cannot
 * hold; only what a refusal quotes can carry one) as U+FFFD.
 */
function jsonText(value: unknown): string {
  const met = new WeakSet<object>();
  const clean = (text: string) => text.toWellFormed().replaceAll('\0', '\uFFFD');
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === 'string') return clean(v);
    if (typeof v === 'bigint') return v.toString();
    if (v !== null && typeof v === 'object') {
      if (met.has(v)) return null;
      met.add(v);
      if (!Array.isArray(v) && !(v instanceof Date)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [clean(k), x]));
    }
    return v;
  });
}
