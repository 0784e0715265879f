/**
 * The one way a user's projects and tasks are written. Every write procedure hands its use
 * case (a `UseCase`: src/tasks/change-task-state.ts is one) and input to `userWrite`, which
 * runs it in these named steps:
 *
 * 1. `IdempotencyKey.of`: the request's Idempotency-Key, checked, with its fingerprint
 *    (src/writes/idempotency.ts).
 * 2. `turns.acquire`: a turn among the user's writes in this process (src/writes/turns.ts).
 * 3. The write, in one of its forms:
 *    - `runOneStatement`: the usual request of a write that has a one-statement form, with no
 *      key and no If-Match: lock, change, events, NOTIFY in one statement (src/writes/one-statement.ts);
 *    - `runTransaction`: every other request, and the one statement's refusal when it could
 *      not tell why: one transaction that claims the key, takes the owner's lock (first, always:
 *      src/writes/owner-lock.ts) reading the key's record (a replay ends here), checks If-Match
 *      under that lock, makes the change (the one statement's change, under the lock, where the
 *      write has one and it applies; else the use case's transaction form), and appends its
 *      events with the key's record in the statement sent with the commit.
 * 4. `keepFailure`: a keyed request whose work was refused keeps that outcome under its key.
 * 5. `deliver`: the answer, its ETag, or the replay of a stored one.
 *
 * A write procedure called inside an open write (a batch's operation: `withSteps`) is a step
 * of that write instead: step 3 without its own transaction, lock, key or append.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { ifMatchHolds, sendEtag } from '../core/conditional.js';
import { DomainError } from '../core/errors.js';
import { MAX_ID } from '../core/fields.js';
import { BATCHED } from '../db/batching.js';
import type { AuthedContext } from '../core/context.js';
import type { ResourceReaders } from '../core/resource.js';
import { ChangeSet } from './change-set.js';
import { appendEvents, type NewEvent } from './event-append.js';
import { IdempotencyKey, pruneNowAndThen, type StoredOutcome } from './idempotency.js';
import { runOneStatement, runUnderHeldLock, type OneStatement } from './one-statement.js';
import { lockOwner, retried } from './owner-lock.js';
import { turns } from './turns.js';

export { ChangeSet } from './change-set.js';
export { FRESH, oneStatementSql, type OneStatement } from './one-statement.js';
export { QUEUED_PER_USER, WRITERS_PER_USER } from './turns.js';

export interface WriteScope {
  em: SqlEntityManager;
  userId: number;
  now: Date;
  /** The owner's time zone: the zone of the write's "today" rules (src/core/user-day.ts). */
  timeZone: string;
  changes: ChangeSet;
  /** The ETag of the resource the write answers with; called after the flush. */
  etag?: () => string;
  /**
   * The use case's one statement ran moments ago and changed nothing (a refusal, most likely):
   * the transaction should read before it writes, to say why.
   */
  oneStatementChangedNothing: boolean;
  /**
   * Events already settled, in order, before this step's `changes`: those of the steps this
   * write already ended (a batch's operations), or of its change made in one statement.
   */
  settled: NewEvent[];
}

/** What a write's one statement is built from besides its input. */
export interface StatementContext {
  now: Date;
  /** The owner's time zone: the zone of the write's "today" rules (src/core/user-day.ts). */
  timeZone: string;
  /** How other resources' documents are written in SQL (src/app/resources.ts). */
  resources: ResourceReaders;
}

/**
 * One write of the API (a use case: src/tasks/change-task-state.ts is one), in its forms:
 * - `oneStatement`, when the request can be made so (null when this one cannot): its change
 *   as one statement, with the owner's lock or under it (`OneStatement`);
 * - `transaction`, which can make every request of the write: it runs under the owner's lock
 *   in a transaction, when the one statement does not apply or changed nothing, and it is
 *   where every refusal is explained.
 */
export interface UseCase<I, T> {
  oneStatement?(input: I, at: StatementContext): OneStatement<T> | null | Promise<OneStatement<T> | null>;
  transaction(scope: WriteScope, input: I): Promise<T>;
}

type Outcome<T> =
  | { kind: 'ran'; value: T; etag?: string }
  | { kind: 'failed'; error: DomainError }
  | { kind: 'replay'; record: StoredOutcome };

/** Domain errors raised by a write's work: it ran, so with a key its outcome is kept. */
const ranInto = new WeakSet<DomainError>();

/** Runs one request of a use case, by the steps above. */
export async function userWrite<I, T>(ctx: AuthedContext, useCase: UseCase<I, T>, input: I): Promise<T> {
  const open = openWrites.get(ctx.em);
  if (open) return runStep(ctx, open, useCase, input);
  return keyedTurn(ctx, async (key) => {
    const now = ctx.clock.now();
    // A key or If-Match needs reads under the lock before the change: the transaction does them.
    const single = !key && ctx.header('If-Match') === undefined ? await useCase.oneStatement?.(input, { now, timeZone: ctx.user.timeZone, resources: ctx.resources }) : null;
    if (single) {
      const ran = await runOneStatement(ctx.em, ctx.log, ctx.user.id, single, now);
      if (ran) return { kind: 'ran', ...ran };
    }
    return runTransaction(ctx, key, useCase, input, Boolean(single));
  });
}

/**
 * The steps around a write's work (step 3, `work`): its Idempotency-Key (1), the user's turn
 * (2), a refusal of the work kept under the key (4), and the answer (5).
 */
async function keyedTurn<T>(ctx: AuthedContext, work: (key: IdempotencyKey | undefined) => Promise<Outcome<T>>): Promise<T> {
  const key = await IdempotencyKey.of(ctx);
  const release = await turns.acquire(ctx.user.id);
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
 * moment (429, 5xx: a batch's step turns a database outage into a 503), which a retry with the
 * same key must run again, as a single request's would.
 */
function noteRan(error: unknown): void {
  if (error instanceof DomainError && !error.beforeRun && error.status < 500 && error.status !== 429) ranInto.add(error);
}

async function runTransaction<I, T>(
  ctx: AuthedContext,
  key: IdempotencyKey | undefined,
  useCase: UseCase<I, T>,
  input: I,
  oneStatementChangedNothing: boolean,
): Promise<Outcome<T>> {
  return retried(ctx.log, () =>
    ctx.em.fork().transactional(async (em): Promise<Outcome<T>> => {
      const scope: WriteScope = {
        em, userId: ctx.user.id, now: ctx.clock.now(), timeZone: ctx.user.timeZone, changes: new ChangeSet(), oneStatementChangedNothing, settled: [],
      };
      if (key) await key.claim(em);
      const record = (await lockOwner(em, scope.userId, key?.recordColumn(scope.now)))?.record as StoredOutcome | null | undefined;
      if (record) return { kind: 'replay', record: key!.replayOf(record) };
      const value = await change(ctx, scope, useCase, input);
      const etag = scope.etag?.();
      const store = key?.storeSql({ status: successStatus(ctx), body: value ?? null, etag: etag ?? null }, scope.now);
      const appended = await appendEvents(em, scope.userId, scope.settled, scope.now, store);
      // Also the last statement: sent with the commit (src/db/batching.ts).
      if (store && !appended) await em.execute(BATCHED + store.sql, store.params);
      return { kind: 'ran', value, etag };
    }),
  );
}

/**
 * The change of a write under the owner's lock, in the scope's transaction: If-Match, then
 * the one statement's change (when the write has one, it applies to this request, and it
 * changes something), else the use case's transaction form and its flush. Its events are
 * settled into the scope, with their documents as of this change.
 */
async function change<I, T>(ctx: AuthedContext, scope: WriteScope, useCase: UseCase<I, T>, input: I): Promise<T> {
  await checkIfMatch(ctx, scope.em, scope.userId);
  try {
    const single = scope.oneStatementChangedNothing ? null : await useCase.oneStatement?.(input, { now: scope.now, timeZone: scope.timeZone, resources: ctx.resources });
    const made = single ? await runUnderHeldLock(scope.em, scope.userId, single, scope.now) : null;
    if (made) {
      scope.settled.push(...made.events);
      if (made.etag !== undefined) scope.etag = () => made.etag!;
      return made.value;
    }
    if (single) scope.oneStatementChangedNothing = true;
    const value = await useCase.transaction(scope, input);
    await scope.em.flush();
    scope.settled.push(...await scope.changes.events(ctx.resources, scope.em, scope.userId, scope.now));
    return value;
  } catch (error) {
    noteRan(error);
    throw error;
  }
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

/** The writes open for steps (`withSteps`), by the entity manager of their transaction. */
const openWrites = new WeakMap<SqlEntityManager, WriteScope>();

/**
 * Opens the write of `scope` to steps while `steps` runs: a write procedure called with the
 * entity manager it is handed (`userWrite` with a context whose `em` is that one) does not
 * open a write of its own but runs as the next step of this one (a batch's operations,
 * src/batch/). A step runs what its request runs alone, in the form it takes under the owner's
 * lock this write holds (`change`): If-Match against the resource as the steps before left it,
 * the change, its events settled with their documents as of that step (a later step may
 * change the same resource again, and has its own event). Its refusal ends the whole write
 * (nothing of it is kept). Idempotency and the answer's headers are the enclosing write's.
 */
export async function withSteps<T>(scope: WriteScope, steps: (em: SqlEntityManager) => Promise<T>): Promise<T> {
  openWrites.set(scope.em, scope);
  try {
    return await steps(scope.em);
  } finally {
    openWrites.delete(scope.em);
  }
}

/** The write open for steps on this entity manager, if any (a batch's transaction). */
export function openWriteOf(em: SqlEntityManager): WriteScope | undefined {
  return openWrites.get(em);
}

/** How a step made by a write function (src/writes/write.ts) ends in the open write. */
export const settleStep = {
  /** Its events join the write's, in order; the next step reads from the database. */
  done(em: SqlEntityManager, events: NewEvent[]): void {
    openWrites.get(em)!.settled.push(...events);
    em.clear();
  },
  /** Its refusal ran: kept under the batch's key like any step's. */
  refused(error: DomainError): DomainError {
    noteRan(error);
    return error;
  },
};

async function runStep<I, T>(ctx: AuthedContext, open: WriteScope, useCase: UseCase<I, T>, input: I): Promise<T> {
  const scope: WriteScope = { ...open, changes: new ChangeSet(), etag: undefined, oneStatementChangedNothing: false, settled: [] };
  const value = await change(ctx, scope, useCase, input);
  open.settled.push(...scope.settled);
  // The next step reads what it needs as a request alone would: from the database, not from
  // entities this step loaded.
  scope.em.clear();
  return value;
}

function successStatus(ctx: AuthedContext): number {
  return ctx.call.meta?.successStatus ?? 200;
}

function deliver<T>(ctx: AuthedContext, outcome: Outcome<T>): T {
  switch (outcome.kind) {
    case 'ran':
      if (outcome.etag) sendEtag(ctx, outcome.etag);
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

/**
 * If-Match on a write of one project or task (the procedure's `meta.resource`, its path id),
 * compared under the owner's lock (read through the resource readers the context hands in:
 * this layer imports no feature), which every writer of the user holds: no change can land
 * between the check and the write. A stale tag is 412 precondition_failed. An unknown id is
 * left to the work, which answers 404.
 */
async function checkIfMatch(ctx: AuthedContext, em: SqlEntityManager, userId: number): Promise<void> {
  const header = ctx.header('If-Match');
  const resource = ctx.call.meta?.resource;
  if (header === undefined || (resource !== 'project' && resource !== 'task')) return;
  const id = Number((await ctx.call.rawInput() as { id?: unknown }).id);
  const current = Number.isSafeInteger(id) && id >= 1 && id <= MAX_ID ? await ctx.resources[resource].currentEtag(em, userId, id) : null;
  if (current !== null && !ifMatchHolds(header, current)) {
    throw DomainError.of('precondition_failed', { parameter: 'If-Match' });
  }
}
