/**
 * The one way a user's projects and tasks are written. Every write procedure hands its use
 * case (a `UseCase`: src/tasks/change-task-state.ts is one) and input to `userWrite`, which
 * gives it, in this order:
 *
 * 1. A turn: at most WRITERS_PER_USER transactions of one user hold a database connection in
 *    this process at once; the others wait in memory (up to QUEUED_PER_USER of them, else
 *    503 at once), so one user's burst cannot fill the pool while its requests wait for
 *    that user's lock.
 * 2. One transaction that first takes the owner's row lock (always first: one lock order for
 *    every write of a user, so writes of one user never deadlock each other), bounded by
 *    LOCK_TIMEOUT (an overrun is 503 with Retry-After, not a pool held hostage).
 * 3. A ChangeSet the work fills with what it created, updated or deleted. Before commit the
 *    change log gets one event per entry, numbered under that same lock (so a user's event
 *    numbers commit in the order they were taken), and a NOTIFY that PostgreSQL delivers
 *    only on commit. A rolled-back write leaves no event; a committed one always has its
 *    events (API-CONTRACT.md §10).
 * 4. A retry of the whole transaction, bounded, on a deadlock or serialization failure with
 *    anything outside this scheme (logged at warn).
 *
 * And, for every write alike (API-CONTRACT.md §11):
 * - An Idempotency-Key claims the key first in the transaction, reads its record with the
 *   owner's lock, replays it or runs the work and stores its outcome with the events
 *   (src/writes/idempotency.ts says how, and why a failure is stored by a second transaction).
 * - If-Match is compared with the resource's current ETag under the owner's lock (read through
 *   the resource readers the context hands in: this layer imports no feature), which every
 *   writer of the user holds: no change can land between the check and the write. A stale
 *   tag is 412 precondition_failed, the transaction rolls back and nothing is stored.
 * - The ETag of the resource the write answers with (set by the work as `scope.etag`, read
 *   after the flush has moved its version) goes out as a header and into the record.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { toSeconds } from '../core/clock.js';
import { ifMatchHolds, sendEtag } from '../core/conditional.js';
import { DomainError } from '../core/errors.js';
import { BATCHED } from '../db/batching.js';
import { execute } from '../db/prepared.js';
import type { AuthedContext } from '../core/context.js';
import type { Resource, ResourceReaders } from '../core/resource.js';
import { appendEvents, appendSql, type NewEvent } from './event-append.js';
import {
  claim,
  fingerprintOf,
  idempotencyKey,
  keyedRequest,
  pruneNowAndThen,
  recordColumn,
  storeOutcome,
  storeSql,
  tryClaim,
  type Keyed,
  type StoredOutcome,
} from './idempotency.js';

export const WRITERS_PER_USER = 2;
export const QUEUED_PER_USER = 200;
const LOCK_TIMEOUT_MS = 5_000;
const RETRIES = 3;

type Kind = 'created' | 'updated' | 'deleted';

interface Entry {
  resource: Resource;
  id: number;
  kind: Kind;
  /** The resource's `data` document after the change, when the work already has it. */
  document?: unknown;
}

/** What one write changed, in the order it happened; each resource once, with its last document. */
export class ChangeSet {
  readonly #entries = new Map<string, Entry>();

  created(resource: Resource, id: number, document?: unknown): void {
    this.#record({ resource, id, kind: 'created', document });
  }

  updated(resource: Resource, id: number, document?: unknown): void {
    this.#record({ resource, id, kind: 'updated', document });
  }

  /** Only projects are deleted (API-CONTRACT.md §6); a task is abandoned, an update. */
  deleted(resource: 'project', id: number): void {
    this.#record({ resource, id, kind: 'deleted' });
  }

  #record(entry: Entry): void {
    const key = `${entry.resource}:${entry.id}`;
    const before = this.#entries.get(key);
    // A resource created in this write stays "created"; a deleted one stays deleted.
    if (before?.kind === 'deleted') return;
    const kind = before?.kind === 'created' && entry.kind === 'updated' ? 'created' : entry.kind;
    this.#entries.set(key, { ...entry, kind });
  }

  get entries(): readonly Entry[] {
    return [...this.#entries.values()];
  }
}

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
   * The events of the steps this write already ended (a batch's operations, `withSteps`), in
   * order, each with its document as that step left it; this step's `changes` come after them.
   */
  settled: NewEvent[];
}

/**
 * A write that can be made in one statement: `changed`, an INSERT or UPDATE of one resource
 * returning its whole row, which reads `owner` (the owner's row, locked first). Over that row,
 * aliased `changed`: `document`, the resource's `data` document in SQL (the change log's
 * event), and `returning`, the further columns `answer` needs (the ETag's). `answer` gets those
 * and `document`, that same document as the driver parsed it: built once, by PostgreSQL, for
 * the event and the response alike. No row means the write could not be made this way (not
 * found, a state that does not allow it, ...): the use case's transaction then runs, and decides.
 */
export interface OneStatement<T> {
  resource: Resource;
  kind: 'created' | 'updated';
  changed: { sql: string; params: unknown[] };
  document: string;
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
  refusal?: { current: { sql: string; params: unknown[] }; refuse: (current: unknown) => void };
}

/**
 * One write of the API (a use case: src/tasks/change-task-state.ts is one), in its forms:
 * - `oneStatement`, when the request can be made so: the owner's lock, the change, its event
 *   and the NOTIFY in one statement, lock to commit (null when this request cannot);
 * - `transaction`, which can make every request of the write: it runs under the owner's lock
 *   in a transaction, with an Idempotency-Key or If-Match, or when the one statement changed
 *   nothing, and it is where every refusal is explained.
 */
export interface UseCase<I, T> {
  oneStatement?(input: I, now: Date): OneStatement<T> | null;
  transaction(scope: WriteScope, input: I): Promise<T>;
}

/** A FIFO of turns per user: WRITERS_PER_USER run, QUEUED_PER_USER wait, the rest are refused. */
class Turns {
  readonly #users = new Map<number, { running: number; waiting: Array<() => void> }>();

  async acquire(userId: number): Promise<() => void> {
    let user = this.#users.get(userId);
    if (!user) this.#users.set(userId, (user = { running: 0, waiting: [] }));
    if (user.running >= WRITERS_PER_USER) {
      if (user.waiting.length >= QUEUED_PER_USER) throw busy();
      await new Promise<void>((resolve) => user.waiting.push(resolve));
    } else {
      user.running++;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = user.waiting.shift();
      if (next) next(); // the turn passes on: `running` stays
      else if (--user.running === 0) this.#users.delete(userId);
    };
  }
}

const turns = new Turns();

function busy(): DomainError {
  return DomainError.of('service_unavailable', { detail: 'Too many writes of this user are waiting; retry shortly.' }).withRetryAfter(1);
}

function sqlState(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 8; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

type Outcome<T> =
  | { kind: 'ran'; value: T; etag?: string }
  | { kind: 'failed'; error: DomainError }
  | { kind: 'replay'; record: StoredOutcome };

/** Domain errors raised by a write's work: it ran, so with a key its outcome is kept. */
const ranInto = new WeakSet<DomainError>();

/** Runs one request of a use case, by the rules above. */
export async function userWrite<I, T>(ctx: AuthedContext, useCase: UseCase<I, T>, input: I): Promise<T> {
  const open = openWrites.get(ctx.em);
  if (open) return runStep(ctx, open, useCase, input);
  const key = idempotencyKey(ctx.header('Idempotency-Key'));
  const keyed = key === undefined ? undefined : keyedRequest(ctx.user.id, key, await fingerprintOf(ctx.call));
  const release = await turns.acquire(ctx.user.id);
  try {
    let outcome: Outcome<T> | null = null;
    try {
      // A key or If-Match needs reads under the lock before the change: the transaction does them.
      const now = ctx.clock.now();
      const single = !keyed && ctx.header('If-Match') === undefined ? useCase.oneStatement?.(input, now) : null;
      if (single) outcome = await runOneStatement(ctx, single, now);
      outcome ??= await runWrite(ctx, keyed, (scope) => useCase.transaction(scope, input), Boolean(single));
    } catch (error) {
      if (!keyed || !(error instanceof DomainError) || !ranInto.has(error)) throw error;
      outcome = await keepFailure(ctx, keyed, error);
    }
    if (keyed) pruneNowAndThen(ctx.em, ctx.clock.now());
    return deliver(ctx, outcome);
  } finally {
    release();
  }
}

async function runWrite<T>(
  ctx: AuthedContext,
  keyed: Keyed | undefined,
  work: (scope: WriteScope) => Promise<T>,
  oneStatementChangedNothing: boolean,
): Promise<Outcome<T>> {
  return retried(ctx, () =>
    ctx.em.fork().transactional(async (em): Promise<Outcome<T>> => {
      const scope: WriteScope = {
        em, userId: ctx.user.id, now: ctx.clock.now(), timeZone: ctx.user.timeZone, changes: new ChangeSet(), oneStatementChangedNothing, settled: [],
      };
      if (keyed) await tryClaim(em, keyed);
      const record = await lockOwner(em, scope.userId, keyed && recordColumn(scope.userId, keyed, scope.now));
      if (record) return replayOf(keyed!, record);
      await checkIfMatch(ctx, em, scope.userId);
      let value: T;
      try {
        value = await work(scope);
      } catch (error) {
        if (error instanceof DomainError) ranInto.add(error);
        throw error;
      }
      await em.flush();
      const etag = scope.etag?.();
      const store = keyed && storeSql(scope.userId, keyed, { status: successStatus(ctx), body: value ?? null, etag: etag ?? null }, scope.now);
      const events = [...scope.settled, ...await eventsOf(ctx.resources, em, scope)];
      const appended = await appendEvents(em, scope.userId, events, scope.now, store);
      // Also the last statement: sent with the commit (src/db/batching.ts).
      if (store && !appended) await em.execute(BATCHED + store.sql, store.params);
      return { kind: 'ran', value, etag };
    }),
  );
}

/** The writes open for steps (`withSteps`), by the entity manager of their transaction. */
const openWrites = new WeakMap<SqlEntityManager, WriteScope>();

/**
 * Opens the write of `scope` to steps while `steps` runs: a write procedure called with the
 * entity manager it is handed (`userWrite` with a context whose `em` is that one) does not
 * open a write of its own but runs as the next step of this one (a batch's operations,
 * src/batch/). A step runs what its request runs alone, in its transaction form, under the
 * owner's lock this write holds: If-Match against the resource as the steps before left it,
 * the use case, its flush; then its events are settled with their documents as of that step
 * (a later step may change the same resource again, and has its own event). Its refusal ends
 * the whole write (nothing of it is kept). Idempotency and the answer's headers are the
 * enclosing write's.
 */
export async function withSteps<T>(scope: WriteScope, steps: (em: SqlEntityManager) => Promise<T>): Promise<T> {
  openWrites.set(scope.em, scope);
  try {
    return await steps(scope.em);
  } finally {
    openWrites.delete(scope.em);
  }
}

async function runStep<I, T>(ctx: AuthedContext, open: WriteScope, useCase: UseCase<I, T>, input: I): Promise<T> {
  const { em } = open;
  const scope: WriteScope = { ...open, changes: new ChangeSet(), etag: undefined, oneStatementChangedNothing: false, settled: [] };
  await checkIfMatch(ctx, em, scope.userId);
  const value = await useCase.transaction(scope, input);
  await em.flush();
  open.settled.push(...await eventsOf(ctx.resources, em, scope));
  // The next step reads what it needs as a request alone would: from the database, not from
  // entities this step loaded.
  em.clear();
  return value;
}

/**
 * A write in one statement, outside any explicit transaction: the owner's lock (taken first,
 * as by every write, with its timeout), the change, its event and the NOTIFY commit together.
 * So the lock is held for that one statement, not across round trips. Null when the change
 * returned no row (nothing was written, no event number taken).
 */
async function runOneStatement<T>(ctx: AuthedContext, write: OneStatement<T>, now: Date): Promise<Outcome<T> | null> {
  const { sql, params } = oneStatementSql(ctx.user.id, write, now);
  const [row] = await retried(ctx, () => execute(ctx.em.fork(), sql, params));
  // With `refusal` the statement answers a row whenever the owner exists: `document` is null
  // when nothing changed.
  if (!row || row.document === null) {
    if (row && write.refusal && row.fresh === true) write.refusal.refuse(row.current);
    return null;
  }
  const { value, etag } = write.answer(row);
  return { kind: 'ran', value, etag };
}

/** The one statement a `OneStatement` write sends, whole: lock, change, event, NOTIFY. */
export function oneStatementSql(userId: number, write: OneStatement<unknown>, now: Date): { sql: string; params: unknown[] } {
  const append = appendSql(userId, now, {
    sql: `select 1 as n, '${write.resource}.${write.kind}' as type, ${write.document} as data from changed`,
    params: [],
  }, { many: false });
  const { refusal } = write;
  // With `refusal`: the owner's mark as the lock returned it (the newest), against the snapshot's.
  const sql = `with owner as (
      select set_config('lock_timeout', '${LOCK_TIMEOUT_MS}ms', true), id${refusal ? ', last_event_seq' : ''} from users where id = ? for no key update
    ), changed as (${write.changed.sql}), ${append.ctes}
    select ${write.returning}, (select data from evs) as document, (select count(*) from notified) as notified${
      refusal
        ? `, ${refusal.current.sql} as current,
             owner.last_event_seq = (select u.last_event_seq from users u where u.id = owner.id) as fresh
           from owner left join changed on true`
        : ' from changed'
    }`;
  return { sql, params: [userId, ...write.changed.params, ...append.params, ...(refusal?.current.params ?? [])] };
}

/**
 * Runs a write again, whole, after a deadlock or serialization failure with anything outside
 * the one lock order (bounded; logged at warn). A lock timeout is 503 with Retry-After.
 */
async function retried<T>(ctx: AuthedContext, run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      const state = sqlState(error);
      if (state === '55P03') throw busy(); // lock_timeout: another process holds the lock too long
      if ((state === '40P01' || state === '40001') && attempt < RETRIES) {
        ctx.log?.warn({ err: error, attempt }, 'write retried after a deadlock or serialization failure');
        continue;
      }
      throw error;
    }
  }
}

/**
 * A keyed write failed with a domain error and rolled back: its outcome is stored now, under
 * the key's lock (waited for, before the owner's lock, as every keyed write takes them). A
 * request with the same key may have run in between (the first transaction had let go of
 * the key): then that one's record stands and is what this request answers too.
 */
async function keepFailure(ctx: AuthedContext, keyed: Keyed, error: DomainError): Promise<Outcome<never>> {
  return ctx.em.fork().transactional(async (em): Promise<Outcome<never>> => {
    const now = ctx.clock.now();
    await claim(em, keyed);
    const record = await lockOwner(em, ctx.user.id, recordColumn(ctx.user.id, keyed, now));
    if (record) return replayOf(keyed, record);
    await storeOutcome(em, ctx.user.id, keyed, { status: error.status, body: { errors: error.errors }, etag: null }, now);
    return { kind: 'failed', error };
  });
}

function replayOf(keyed: Keyed, record: StoredOutcome): Outcome<never> {
  if (record.fingerprint !== keyed.fingerprint) {
    throw DomainError.of('idempotency_key_reused', {
      parameter: 'Idempotency-Key',
      detail: 'This Idempotency-Key was already used with a different request (method, path or body).',
    });
  }
  return { kind: 'replay', record };
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
      if (record.status >= 400) throw new DomainError((record.body as { errors: DomainError['errors'] }).errors);
      if (record.etag) sendEtag(ctx, record.etag);
      return (record.body ?? undefined) as T;
    }
  }
}

/**
 * If-Match on a write of one project or task (the procedure's `meta.resource`, its path id),
 * compared under the owner's lock. An unknown id is left to the work, which answers 404.
 */
async function checkIfMatch(ctx: AuthedContext, em: SqlEntityManager, userId: number): Promise<void> {
  const header = ctx.header('If-Match');
  const resource = ctx.call.meta?.resource;
  if (header === undefined || !resource) return;
  const id = Number((await ctx.call.rawInput() as { id?: unknown }).id);
  const current = Number.isSafeInteger(id) && id >= 1 && id <= 2_147_483_647 ? await ctx.resources[resource].currentEtag(em, userId, id) : null;
  if (current !== null && !ifMatchHolds(header, current)) {
    throw DomainError.of('precondition_failed', { parameter: 'If-Match' });
  }
}

/**
 * The row lock that serialises a user's writes. `no key update`: excludes every other
 * holder of this lock, but not the key-share locks that inserts referencing the user take
 * (a login's token, a task's foreign-key check). The lock timeout is set in the same
 * statement (set_config runs before the row is locked), so it costs no round trip. With an
 * Idempotency-Key, the same statement reads the key's record: its snapshot is taken after
 * the key was claimed, so every earlier request with that key is in it.
 */
async function lockOwner(
  em: SqlEntityManager,
  userId: number,
  record?: { sql: string; params: unknown[] },
): Promise<StoredOutcome | null> {
  // Without a record to read, nothing of its answer is needed: it goes with the work's first
  // statement (src/db/batching.ts), whose snapshot is then taken after the lock, as here.
  const rows = await em.execute<Array<{ record?: StoredOutcome | null }>>(
    `${record ? '' : BATCHED}select set_config('lock_timeout', '${LOCK_TIMEOUT_MS}ms', true), id${record ? `, ${record.sql}` : ''}
       from users where id = ? for no key update`,
    [...(record?.params ?? []), userId],
  );
  return rows[0]?.record ?? null;
}

/**
 * The change set as events, each carrying its resource's document after the change: the
 * work's own, or read back through the resource's reader (one statement per kind).
 */
async function eventsOf(readers: ResourceReaders, em: SqlEntityManager, scope: WriteScope): Promise<NewEvent[]> {
  const entries = scope.changes.entries;
  if (entries.length === 0) return [];
  const documents = new Map<string, unknown>();
  for (const resource of ['task', 'project'] as const) {
    const ids = entries.filter((e) => e.resource === resource && e.kind !== 'deleted' && e.document === undefined).map((e) => e.id);
    if (ids.length === 0) continue;
    for (const [id, document] of await readers[resource].documents(em, scope.userId, ids)) documents.set(`${resource}:${id}`, document);
  }
  const at = toSeconds(scope.now);
  return entries.flatMap((e): NewEvent[] => {
    const type = `${e.resource}.${e.kind}`;
    if (e.kind === 'deleted') return [{ type, data: { type: e.resource, id: e.id }, at }];
    const data = e.document ?? documents.get(`${e.resource}:${e.id}`);
    // A change whose resource is gone would commit without its event: refuse the whole write.
    if (data === undefined) throw new Error(`${e.resource} ${e.id} changed in this write but cannot be read back`);
    return [{ type, data, at }];
  });
}
