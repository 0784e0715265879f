/**
 * Live delivery of the change log within one server process: one LISTEN connection per
 * process (not one per subscriber) on the channel the writes NOTIFY after their commits, and the open
 * streams of this process, by user. A notification carries its write's events when they fit
 * (event.store.ts); a stream takes them from there only when they follow its cursor without
 * a gap, and otherwise reads its user's events from the table after its cursor. So a
 * missed, late or duplicated notification can delay an event (until the next idle tick,
 * which always reads the table) but never lose, repeat or reorder one; and live delivery
 * costs no query per stream. A lost LISTEN connection wakes every stream, which reads the
 * table at once (and ends, with an error event, when the database is gone).
 *
 * It also enforces the streams' limit, MAX_STREAMS_PER_TOKEN open streams per access token
 * across every process and instance on the database (API-CONTRACT.md §10), with a lease per
 * stream in PostgreSQL (stream-leases.ts): opening a stream takes one (one statement; 429 when
 * the token holds 10 live ones, 503 when the database cannot say), the process renews the
 * leases of all its streams in one statement every `leaseRenewMs` (5 s, or the idle tick if
 * shorter), closing a stream deletes its lease, and the leases of a process that died expire
 * `leaseMs` (15 s) after their last renewal. A stream whose lease is found gone (the process
 * could not renew it in time and it was pruned) takes one again if its token has room, and
 * otherwise ends with a 503 telling its client to reconnect, so the limit holds even then.
 * `stop()` ends every stream and gives their leases back, so that a graceful stop lets
 * clients reconnect elsewhere at once. `size` counts this process's open streams.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { DomainError } from '../core/errors.js';
import { isDatabaseUnavailable } from '../core/failures.js';
import type { Logger } from '../core/logger.js';
import type { LiveEvents, LiveSubscription, LogEvent } from '../core/context.js';
import { noteRateLimitRefusal } from '../core/request-scope.js';
import { EVENTS_CHANNEL } from '../writes/announcer.js';
import { TOKEN_REVOCATIONS_CHANNEL, revokedHashes } from '../users/revocation.js';
import { parseNotification, type Notification } from './event.store.js';
import type { Lease, StreamLeases } from './stream-leases.js';

export const MAX_STREAMS_PER_TOKEN = 10;

/** What a watcher hears of a notification: the user and its events' ids; null when some may have been missed. */
export type Heard = { userId: number; first: bigint; last: bigint } | null;

export type WaitResult = 'wake' | 'idle' | 'closed';

/** Events a subscription keeps from notifications before it must read the table instead. */
const INBOX_LIMIT = 500;

/** One open stream: woken when its user's log grows, closed when the hub stops. */
export class Subscription implements LiveSubscription {
  #pending = false;
  #closed = false;
  /** Events that notifications carried, in order; `#gap` when one came without them. */
  #inbox: LogEvent[] = [];
  #gap = true;
  #resolve: ((result: WaitResult) => void) | undefined;
  constructor(
    readonly userId: number,
    readonly tokenHash: string,
    private readonly release: (subscription: Subscription) => void,
    /** Its lease among the token's streams (a fresh UUID). */
    readonly leaseId: string = randomUUID(),
  ) {}

  get lease(): Lease {
    return { id: this.leaseId, userId: this.userId, tokenHash: this.tokenHash };
  }

  get closed(): boolean {
    return this.#closed;
  }

  wake(): void {
    this.#pending = true;
    this.#settle('wake');
  }

  /** A notification of the user's log: its events, or only that there are some (`null`). */
  offer(events: LogEvent[] | null): void {
    if (events === null || this.#inbox.length + events.length > INBOX_LIMIT) {
      this.#gap = true;
      this.#inbox = [];
    } else if (!this.#gap) {
      this.#inbox.push(...events);
    }
    this.wake();
  }

  take(after: bigint): LogEvent[] | null {
    if (this.#gap) {
      // The table is read next: what notifications bring from now on follows that read.
      this.#gap = false;
      this.#inbox = [];
      return null;
    }
    const fresh = this.#inbox.filter((e) => BigInt(e.id) > after);
    this.#inbox = [];
    let expected = after + 1n;
    for (const event of fresh) {
      if (BigInt(event.id) !== expected) return null; // a gap: read the table (the inbox is empty now)
      expected++;
    }
    return fresh;
  }

  /** Resolves on a wake-up (also one that came before the call), after `idleMs`, or on close. */
  wait(idleMs: number, signal?: AbortSignal): Promise<WaitResult> {
    if (this.#closed || signal?.aborted) return Promise.resolve('closed');
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve('wake');
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.#settle('idle'), idleMs);
      const onAbort = () => this.#settle('closed');
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#resolve = (result) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (result === 'wake') this.#pending = false;
      // An idle tick reads the table, a safety net for a notification lost with its connection.
      if (result === 'idle') this.#gap = true;
        resolve(result);
      };
    });
  }

  /** Why the hub ended the stream (a revoked token), told to the client before it closes. */
  reason: Error | undefined;

  close(reason?: Error): void {
    if (this.#closed) return;
    this.#closed = true;
    this.reason = reason;
    this.release(this);
    this.#settle('closed');
  }

  #settle(result: WaitResult): void {
    const resolve = this.#resolve;
    this.#resolve = undefined;
    resolve?.(result);
  }
}

export interface EventHubOptions {
  /** The database to LISTEN on. */
  databaseUrl: string;
  /** Where the streams' leases are kept; the app hands the ORM's in (`useLeases`) when omitted. */
  leases?: StreamLeases;
  /** Milliseconds between a stream's idle ticks; 15 s by default. */
  idleMs?: number;
  /** Milliseconds a stream waits for a client to read what was written before it gives up; 30 s. */
  slowClientMs?: number;
  /** Milliseconds between renewals of this process's leases: the idle tick, at most 5 s. */
  leaseRenewMs?: number;
  /** Milliseconds a lease lives after its last renewal: three renewals, at least 10 s. */
  leaseMs?: number;
  log?: Logger;
}

/** Seconds a client refused for the number of its token's streams is told to wait. */
const STREAMS_RETRY_AFTER = 5;
/** How long a graceful stop waits for the leases of its streams to be deleted. */
const RELEASE_ON_STOP_MS = 5_000;
/** How long an open waits for the deletion of a lease its token's closed stream held (the take's own lock waits 2 s). */
const RELEASE_WAIT_MS = 2_000;

export class EventHub implements LiveEvents {
  readonly idleMs: number;
  readonly slowClientMs: number;
  readonly leaseRenewMs: number;
  readonly leaseMs: number;
  readonly #byUser = new Map<number, Set<Subscription>>();
  #leases: StreamLeases | undefined;
  #client: pg.Client | undefined;
  #connecting: Promise<void> | undefined;
  #stopped = false;
  #retry: NodeJS.Timeout | undefined;
  #renewTimer: NodeJS.Timeout | undefined;
  #renewing = false;
  /** Leases of closed streams not yet deleted (`#toRelease`), the deletion under way and the leases it deletes. */
  #toRelease: Lease[] = [];
  #releasing: Promise<void> | undefined;
  #inRelease: Lease[] = [];
  /** Listeners of every notification in this process (webhook delivery), besides the streams. */
  readonly #watchers = new Set<(heard: Heard) => void>();

  constructor(private readonly options: EventHubOptions) {
    this.idleMs = options.idleMs ?? 15_000;
    this.slowClientMs = options.slowClientMs ?? 30_000;
    this.leaseRenewMs = options.leaseRenewMs ?? Math.min(this.idleMs, 5_000);
    // Never so short that a process stalled by load (a long GC, a busy machine) loses its leases.
    this.leaseMs = options.leaseMs ?? Math.max(3 * this.leaseRenewMs, 10_000);
    this.#leases = options.leases;
  }

  /** Keeps the streams' leases in `leases`, unless the hub was given a place already. */
  useLeases(leases: StreamLeases): void {
    this.#leases ??= leases;
  }

  /** Open streams in this process. */
  get size(): number {
    let n = 0;
    for (const set of this.#byUser.values()) n += set.size;
    return n;
  }

  /**
   * Registers a stream of `userId` opened with the token `tokenHash`: 429 when the token holds
   * MAX_STREAMS_PER_TOKEN streams already, on any process; 503 when that cannot be checked.
   */
  async subscribe(userId: number, tokenHash: string): Promise<Subscription> {
    if (this.#stopped) throw stopping();
    const leases = this.#leases;
    if (!leases) throw new Error('EventHub: no place to keep the streams\' leases (useLeases)');
    const subscription = new Subscription(userId, tokenHash, (s) => this.#release(s));
    let taken: boolean;
    try {
      // A stream of this token closed here a moment ago may still hold its lease (its deletion
      // is batched, and may commit while the count runs): once that deletion is done, at most
      // RELEASE_WAIT_MS later, its slot is counted free.
      const pendingBefore = this.#releasePending(tokenHash);
      taken = await leases.take(subscription.lease, MAX_STREAMS_PER_TOKEN, this.leaseMs);
      if (!taken && (pendingBefore || this.#releasePending(tokenHash))) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([this.#flushReleases(), new Promise((resolve) => (timer = setTimeout(resolve, RELEASE_WAIT_MS)))]);
        clearTimeout(timer);
        // Nothing is taken yet: a hub that stopped meanwhile answers as it does to any open.
        if (this.#stopped) throw stopping();
        taken = await leases.take(subscription.lease, MAX_STREAMS_PER_TOKEN, this.leaseMs);
      }
    } catch (error) {
      throw limitUnchecked(error);
    }
    if (!taken) {
      noteRateLimitRefusal('streams');
      throw DomainError.of('rate_limited', {
        detail: `At most ${MAX_STREAMS_PER_TOKEN} event streams may be open per access token; close one first.`,
      }).withRetryAfter(STREAMS_RETRY_AFTER);
    }
    try {
      await this.#listen();
      if (this.#stopped) throw stopping();
    } catch (error) {
      this.#releaseLease(subscription.lease);
      throw error;
    }
    let set = this.#byUser.get(userId);
    if (!set) this.#byUser.set(userId, (set = new Set()));
    set.add(subscription);
    this.#renewTimer ??= setInterval(() => void this.#renew(), this.leaseRenewMs).unref();
    return subscription;
  }

  /**
   * Calls `listener` with the user and event ids of each notification of the change log, and with `null`
   * when notifications may have been missed (the LISTEN connection was lost, then again once it
   * is back): the listener then looks at every user. The connection is kept while any listener
   * remains. Resolves once listening; a database that cannot be reached is retried in the
   * background (the listener hears `null` when it comes back). Returns the way to stop.
   */
  async watch(listener: (heard: Heard) => void): Promise<() => void> {
    this.#watchers.add(listener);
    const unwatch = () => void this.#watchers.delete(listener);
    try {
      await this.#listen();
    } catch (error) {
      this.options.log?.warn({ err: error }, 'change log listener cannot connect yet; retrying');
      this.#retryListen(100);
    }
    return unwatch;
  }

  /**
   * Ends every stream of a token in this process (it was revoked): called by the revocation
   * itself, and by every process on hearing it announced (src/users/revocation.ts).
   */
  closeToken(tokenHash: string): void {
    const revoked = DomainError.unauthorized('The access token was revoked.');
    for (const set of [...this.#byUser.values()]) for (const s of [...set]) if (s.tokenHash === tokenHash) s.close(revoked);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#watchers.clear();
    clearTimeout(this.#retry);
    for (const set of [...this.#byUser.values()]) for (const s of [...set]) s.close();
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => undefined);
    // The leases go back now, not when they expire: clients reconnect elsewhere at once. A
    // database that does not answer does not hold the stop up; the leases then expire.
    const released = this.#flushReleases();
    await Promise.race([released, new Promise((resolve) => setTimeout(resolve, RELEASE_ON_STOP_MS).unref())]);
  }

  #release(subscription: Subscription): void {
    const set = this.#byUser.get(subscription.userId);
    set?.delete(subscription);
    if (set?.size === 0) this.#byUser.delete(subscription.userId);
    if (this.#byUser.size === 0) {
      clearInterval(this.#renewTimer);
      this.#renewTimer = undefined;
    }
    this.#releaseLease(subscription.lease);
  }

  /** Whether a closed stream of the token still has its lease to be deleted, or being deleted. */
  #releasePending(tokenHash: string): boolean {
    return this.#toRelease.some((lease) => lease.tokenHash === tokenHash) || this.#inRelease.some((lease) => lease.tokenHash === tokenHash);
  }

  /** Deletes a closed stream's lease soon, together with those of streams closed meanwhile. */
  #releaseLease(lease: Lease): void {
    this.#toRelease.push(lease);
    if (this.#toRelease.length === 1 && !this.#releasing) setImmediate(() => void this.#flushReleases());
  }

  #flushReleases(): Promise<void> {
    if (this.#releasing) return this.#releasing.then(() => this.#flushReleases());
    const batch = this.#toRelease.splice(0);
    if (batch.length === 0 || !this.#leases) return Promise.resolve();
    this.#inRelease = batch;
    this.#releasing = this.#leases
      .release(batch)
      .catch((error: unknown) => {
        // They expire by themselves (leaseMs).
        this.#logLeaseFailure(error, 'event stream leases not deleted; they will expire');
      })
      .finally(() => {
        this.#releasing = undefined;
        this.#inRelease = [];
        if (this.#toRelease.length > 0 && !this.#stopped) setImmediate(() => void this.#flushReleases());
      });
    return this.#releasing;
  }

  /**
   * Renews the leases of this process's streams, all in one statement. A stream whose lease is
   * gone (not renewed in time, then pruned) takes one again, or ends when its token has no room
   * left (its client reconnects and is counted again); a renewal that fails (database down)
   * waits for the next round, the streams meanwhile end by themselves when they cannot read
   * the log.
   */
  async #renew(): Promise<void> {
    if (this.#renewing || !this.#leases) return;
    this.#renewing = true;
    try {
      const open = [...this.#byUser.values()].flatMap((set) => [...set]);
      if (open.length === 0) return;
      const kept = await this.#leases.renew(open.map((s) => s.lease), this.leaseMs);
      for (const s of open) {
        if (kept.has(s.leaseId) || s.closed) continue;
        // Its lease lapsed and was pruned (this process stalled past leaseMs): it takes one
        // again if its token has room, and ends otherwise (its slot is another stream's now).
        const again = await this.#leases.take(s.lease, MAX_STREAMS_PER_TOKEN, this.leaseMs);
        if (!again && !s.closed) s.close(leaseLost());
      }
    } catch (error) {
      this.#logLeaseFailure(error, 'event stream leases not renewed this round');
    } finally {
      this.#renewing = false;
    }
  }

  /** An outage is the streams' own to report (they end); anything else is a fault to see. */
  #logLeaseFailure(error: unknown, message: string): void {
    if (isDatabaseUnavailable(error)) this.options.log?.debug({ err: error }, message);
    else this.options.log?.warn({ err: error }, message);
  }

  #notify(notification: Notification): void {
    for (const s of this.#byUser.get(notification.userId) ?? []) s.offer(notification.events ?? null);
    const heard = { userId: notification.userId, first: notification.first, last: notification.last };
    for (const watcher of this.#watchers) watcher(heard);
  }

  #wakeAll(): void {
    for (const set of this.#byUser.values()) for (const s of set) s.offer(null);
    for (const watcher of this.#watchers) watcher(null);
  }

  /** Connects the LISTEN connection once; a lost one is replaced, and every stream re-reads. */
  #listen(): Promise<void> {
    if (this.#client) return Promise.resolve();
    this.#connecting ??= (async () => {
      const client = new pg.Client({ connectionString: this.options.databaseUrl, connectionTimeoutMillis: 5_000 });
      client.on('notification', (message) => {
        if (message.channel === TOKEN_REVOCATIONS_CHANNEL) {
          for (const hash of revokedHashes(message.payload)) this.closeToken(hash);
          return;
        }
        const notification = parseNotification(message.payload, (userId) => this.#byUser.has(userId));
        if (notification) this.#notify(notification);
      });
      client.on('error', (error) => {
        this.options.log?.warn({ err: error }, 'change log listener lost its connection; reconnecting');
        this.#reconnectSoon(client);
      });
      client.on('end', () => this.#reconnectSoon(client));
      try {
        await client.connect();
        await client.query(`listen ${EVENTS_CHANNEL}; listen ${TOKEN_REVOCATIONS_CHANNEL}`);
      } catch (error) {
        await client.end().catch(() => undefined);
        throw error;
      }
      if (this.#stopped) {
        await client.end().catch(() => undefined);
        return;
      }
      this.#client = client;
    })().finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  #reconnectSoon(lost: pg.Client): void {
    if (this.#client !== lost) return;
    this.#client = undefined;
    lost.end().catch(() => undefined);
    if (this.#stopped) return;
    // Notifications may be lost with the connection: every stream reads the table now, not at
    // its next idle tick (15 s). When the database itself is gone that read fails, and the
    // stream ends at once with an error event, so its client retries instead of waiting.
    this.#wakeAll();
    this.#retryListen(100);
  }

  /** Connects the LISTEN connection again after `delay`, doubling it (up to 5 s) while it fails. */
  #retryListen(delay: number): void {
    clearTimeout(this.#retry);
    this.#retry = setTimeout(() => {
      if (this.#stopped || (this.#byUser.size === 0 && this.#watchers.size === 0)) return;
      this.#listen().then(
        () => this.#wakeAll(), // notifications may have been missed while it was down
        () => {
          // The database cannot be reached: the streams read again, fail, and end with an
          // error event. (The reads woken when the connection was lost may have come first,
          // from backends the shutdown had not ended yet, and succeeded.)
          this.#wakeAll();
          this.#retryListen(Math.min(delay * 2, 5_000));
        },
      );
    }, delay);
    this.#retry.unref();
  }
}

function stopping(): DomainError {
  return DomainError.of('unavailable', { detail: 'The server is stopping; reconnect.' }).withRetryAfter(1);
}

/** The limit could not be checked (database down, or the token's lock held too long): 503, never a 500. */
function limitUnchecked(error: unknown): unknown {
  let lockTimeout = false;
  for (let e: unknown = error, depth = 0; e && depth < 8; depth++, e = (e as { cause?: unknown }).cause) {
    if ((e as { code?: unknown }).code === '55P03') lockTimeout = true;
  }
  if (!lockTimeout && !isDatabaseUnavailable(error)) return error;
  const refusal = DomainError.of('unavailable', {
    detail: 'The number of your open event streams cannot be checked right now; try again shortly.',
  }).withRetryAfter(5); // as every 503 of a database that cannot be reached
  refusal.cause = error;
  return refusal;
}

function leaseLost(): DomainError {
  return DomainError.of('unavailable', {
    detail: 'This stream lost its place among your token\'s open streams (its server could not renew it in time); reconnect with Last-Event-ID.',
  }).withRetryAfter(1);
}
