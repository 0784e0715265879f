/**
 * The writes of the user that run in TypeScript (`plainWrite`: webhooks, tokens, stream tickets,
 * settings; projects and tasks go through src/writes/write.ts). The same steps as `apply`, with
 * the same SQL (`key_open`, `key_keep`): the key checked and a turn taken; in one transaction the
 * key claimed, the user's lock, a replay or the work, and its outcome kept under the key (a
 * refusal it decided after the work is rolled back to the savepoint before it).
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { AuthedContext } from '../core/context.js';
import { DomainError } from '../core/errors.js';
import { IdempotencyKey, IDEMPOTENCY_KEY_TTL_MS, keyLock, pruneNowAndThen, replayed, type StoredOutcome } from './idempotency.js';
import { retried } from './owner-lock.js';
import { turnOf } from './turns.js';
import type { Refusal } from './write-functions.js';
import { refusalError } from './write.js';

type Outcome<T> = { kind: 'ran'; value: T } | { kind: 'failed'; error: DomainError } | { kind: 'replay'; record: StoredOutcome };

/** Kept under a key: what the work decided; not a refusal before it ran, nor a 429 or 5xx (a retry runs again). */
function decidedByWork(error: unknown): error is DomainError {
  return error instanceof DomainError && !error.beforeRun && error.status < 500 && error.status !== 429;
}

/** A write that appends no events; `work` runs under the user's lock, with the transaction's entity manager. */
export async function plainWrite<T>(ctx: AuthedContext, work: (em: SqlEntityManager) => Promise<T>): Promise<T> {
  const key = await IdempotencyKey.of(ctx);
  const release = await turnOf(ctx);
  try {
    const outcome = await retried(ctx.log, () =>
      ctx.em.fork().transactional(async (em): Promise<Outcome<T>> => {
        const now = ctx.clock.now();
        const replay = await openWrite(ctx, em, key, now);
        if (replay) return { kind: 'replay', record: key!.replayOf(replay) };
        const keep = (status: number, body: unknown) =>
          em.execute(`select ${ctx.writes.keyKeep}(?::bigint, ?::text, ?::text, ?::int, ?::json, null, ?::timestamptz)`, [
            ctx.user.id, key!.key, key!.fingerprint, status, JSON.stringify(body ?? null), now,
          ]);
        if (!key) return { kind: 'ran', value: await work(em) };
        await em.execute('savepoint work');
        try {
          const value = await work(em);
          await keep(ctx.call.meta?.successStatus ?? 200, value);
          return { kind: 'ran', value };
        } catch (error) {
          if (!decidedByWork(error)) throw error;
          // The work undone, its refusal kept (with a top-level meta such as cursor_expired's last_event_id).
          await em.execute('rollback to savepoint work');
          await keep(error.status, error.meta === undefined ? { errors: error.errors } : { errors: error.errors, meta: error.meta });
          return { kind: 'failed', error };
        }
      }),
    );
    if (key) pruneNowAndThen(ctx.em, ctx.clock.now());
    if (outcome.kind === 'failed') throw outcome.error;
    return outcome.kind === 'replay' ? replayed<T>(ctx, outcome.record) : outcome.value;
  } finally {
    release();
  }
}

/** `key_open`: the key claimed, the user's lock, the key's record if any; its refusal thrown. */
async function openWrite(ctx: AuthedContext, em: SqlEntityManager, key: IdempotencyKey | undefined, now: Date): Promise<StoredOutcome | undefined> {
  const since = key ? new Date(now.getTime() - IDEMPOTENCY_KEY_TTL_MS) : null;
  const [row] = await em.execute<Array<{ opened: { refusal?: Refusal; replay?: StoredOutcome } }>>(
    `select ${ctx.writes.keyOpen}(?::bigint, ?::text, ?::bigint, ?::timestamptz) as opened`,
    [ctx.user.id, key?.key ?? null, key ? keyLock(ctx.user.id, key.key) : null, since],
  );
  if (row!.opened.refusal) throw refusalError(row!.opened.refusal);
  return row!.opened.replay;
}
