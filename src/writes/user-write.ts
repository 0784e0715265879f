/**
 * A write of the user that runs in TypeScript (src/writes/write.ts is the one path of the
 * projects' and tasks' writes and of a batch of them, each one call of a write function): the
 * writes of webhooks, tokens, stream tickets and the user's settings (`plainWrite`). It takes
 * the same steps as `apply`, with the same SQL (src/writes/write-functions.ts `key_open` and
 * `key_keep`):
 *
 * 1. `IdempotencyKey.of`: the request's Idempotency-Key, checked, with its fingerprint
 *    (src/writes/idempotency.ts); `turnOf`, a turn among the user's writes in this process
 *    (src/writes/turns.ts).
 * 2. One transaction: `key_open` claims the key (409 while another request holds it), takes the
 *    user's lock and reads the key's record (a replay ends here); the work runs, and its
 *    outcome is kept under the key (`key_keep`): its answer, or a refusal it decided, after
 *    the work is rolled back to the savepoint before it.
 * 3. The answer, or the replay of a stored one.
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

/**
 * Kept under a key: what the work decided. Not a refusal before it ran, nor a failure of the
 * moment (429, 5xx), which a retry with the same key must run again.
 */
function decidedByWork(error: unknown): error is DomainError {
  return error instanceof DomainError && !error.beforeRun && error.status < 500 && error.status !== 429;
}

/**
 * A write of the user that is not of projects and tasks (a webhook's, a token's): it appends no events,
 * and otherwise takes the steps of every write (above); `work` runs under the user's lock, with
 * the transaction's entity manager.
 */
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
          // What the work did is undone; its refusal is kept (a top-level meta, such as 410
          // cursor_expired's last_event_id, is part of its answer).
          await em.execute('rollback to savepoint work');
          await keep(error.status, error.meta === undefined ? { errors: error.errors } : { errors: error.errors, meta: error.meta });
          return { kind: 'failed', error };
        }
      }),
    );
    if (key) pruneNowAndThen(ctx.em, ctx.clock.now());
    return deliver(ctx, outcome);
  } finally {
    release();
  }
}

/**
 * The first step of a write in its transaction (`key_open`): the key claimed, the user's lock,
 * and the key's record if there is one; a refusal (409 for a key in use, 401 for a user gone)
 * is thrown.
 */
async function openWrite(ctx: AuthedContext, em: SqlEntityManager, key: IdempotencyKey | undefined, now: Date): Promise<StoredOutcome | undefined> {
  const since = key ? new Date(now.getTime() - IDEMPOTENCY_KEY_TTL_MS) : null;
  const [row] = await em.execute<Array<{ opened: { refusal?: Refusal; replay?: StoredOutcome } }>>(
    `select ${ctx.writes.keyOpen}(?::bigint, ?::text, ?::bigint, ?::timestamptz) as opened`,
    [ctx.user.id, key?.key ?? null, key ? keyLock(ctx.user.id, key.key) : null, since],
  );
  if (row!.opened.refusal) throw refusalError(row!.opened.refusal);
  return row!.opened.replay;
}

function deliver<T>(ctx: AuthedContext, outcome: Outcome<T>): T {
  switch (outcome.kind) {
    case 'ran':
      return outcome.value;
    case 'failed':
      throw outcome.error;
    case 'replay':
      return replayed<T>(ctx, outcome.record);
  }
}
