/**
 * The steps around a write of the user that runs in TypeScript (src/writes/write.ts is the one
 * path of the projects' and tasks' writes and of a batch of them, each one call of a write
 * function): the webhooks' writes and the account's (`plainWrite`). Each runs in these steps:
 *
 * 1. `IdempotencyKey.of`: the request's Idempotency-Key, checked, with its fingerprint
 *    (src/writes/idempotency.ts).
 * 2. `turnOf`: a turn among the user's writes in this process (src/writes/turns.ts).
 * 3. One transaction that claims the key, takes the owner's lock (first, always:
 *    src/writes/owner-lock.ts) reading the key's record (a replay ends here), runs the work,
 *    and stores the key's record.
 * 4. `keepFailure`: a keyed request whose work was refused keeps that outcome under its key.
 * 5. `deliver`: the answer, or the replay of a stored one.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { sendEtag } from '../core/conditional.js';
import { DomainError } from '../core/errors.js';
import { BATCHED } from '../db/batching.js';
import type { AuthedContext } from '../core/context.js';
import { IdempotencyKey, pruneNowAndThen, type StoredOutcome } from './idempotency.js';
import { lockOwner, retried } from './owner-lock.js';
import { turnOf } from './turns.js';

type Outcome<T> =
  | { kind: 'ran'; value: T }
  | { kind: 'failed'; error: DomainError }
  | { kind: 'replay'; record: StoredOutcome };

/** Domain errors raised by a write's work: it ran, so with a key its outcome is kept. */
const ranInto = new WeakSet<DomainError>();

/**
 * The steps around a write's work (step 3, `work`): its Idempotency-Key (1), the user's turn
 * (2), a refusal of the work kept under the key (4), and the answer (5).
 */
async function keyedTurn<T>(ctx: AuthedContext, work: (key: IdempotencyKey | undefined) => Promise<Outcome<T>>): Promise<T> {
  const key = await IdempotencyKey.of(ctx);
  const release = await turnOf(ctx);
  try {
    let outcome: Outcome<T>;
    try {
      outcome = await work(key);
    } catch (error) {
      if (!key || !(error instanceof DomainError) || !ranInto.has(error)) throw error;
      const record = await key.keepFailure(ctx.em, error, ctx.clock.now());
      outcome = record ? { kind: 'replay', record } : { kind: 'failed', error };
    }
    if (key) pruneNowAndThen(ctx.em, ctx.clock.now());
    return deliver(ctx, outcome);
  } finally {
    release();
  }
}

/**
 * Kept under a key: what the work decided. Not a refusal before it ran, nor a failure of the
 * moment (429, 5xx), which a retry with the same key must run again.
 */
function noteRan(error: unknown): void {
  if (error instanceof DomainError && !error.beforeRun && error.status < 500 && error.status !== 429) ranInto.add(error);
}

/**
 * A write of the user that is not of projects and tasks (a webhook's): it appends no events
 * and has no one-statement form, and otherwise goes through the steps of every write: the
 * Idempotency-Key (claimed, replayed, its outcome stored in the write's transaction), the
 * user's turn, the owner's lock first in the transaction (`work` runs under it, with the
 * transaction's entity manager), and a refusal kept under the key.
 */
export async function plainWrite<T>(ctx: AuthedContext, work: (em: SqlEntityManager) => Promise<T>): Promise<T> {
  return keyedTurn(ctx, (key) =>
    retried(ctx.log, () =>
      ctx.em.fork().transactional(async (em): Promise<Outcome<T>> => {
        const now = ctx.clock.now();
        if (key) await key.claim(em);
        const record = (await lockOwner(em, ctx.user.id, key?.recordColumn(now)))?.record as StoredOutcome | null | undefined;
        if (record) return { kind: 'replay', record: key!.replayOf(record) };
        let value: T;
        try {
          value = await work(em);
        } catch (error) {
          noteRan(error);
          throw error;
        }
        if (key) {
          const store = key.storeSql({ status: successStatus(ctx), body: value ?? null, etag: null }, now);
          await em.execute(BATCHED + store.sql, store.params);
        }
        return { kind: 'ran', value };
      }),
    ),
  );
}

function successStatus(ctx: AuthedContext): number {
  return ctx.call.meta?.successStatus ?? 200;
}

function deliver<T>(ctx: AuthedContext, outcome: Outcome<T>): T {
  switch (outcome.kind) {
    case 'ran':
      return outcome.value;
    case 'failed':
      throw outcome.error;
    case 'replay': {
      const { record } = outcome;
      ctx.setHeader('Idempotent-Replayed', 'true');
      if (record.status >= 400) {
        const stored = record.body as { errors: DomainError['errors']; meta?: Record<string, unknown> };
        const error = new DomainError(stored.errors);
        throw stored.meta ? error.withMeta(stored.meta) : error;
      }
      if (record.etag) sendEtag(ctx, record.etag);
      return (record.body ?? undefined) as T;
    }
  }
}
