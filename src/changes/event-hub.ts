/**
 * Live delivery of the change log within one server process: one LISTEN connection per
 * process (not one per subscriber) on the channel the writes NOTIFY on commit, and the open
 * streams of this process, by user. A notification carries its write's events when they fit
 * (event.store.ts); a stream takes them from there only when they follow its cursor without
 * a gap, and otherwise reads its user's events from the table after its cursor. So a
 * missed, late or duplicated notification can delay an event (until the next idle tick,
 * which always reads the table) but never lose, repeat or reorder one; and live delivery
 * costs no query per stream.
 *
 * It also enforces the streams' limits: at most MAX_STREAMS_PER_TOKEN open streams per access
 * token in this process (API-CONTRACT.md §10), and `stop()` ends every stream so that a
 * graceful stop lets clients reconnect elsewhere.
 */
import pg from 'pg';
import { DomainError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { LiveEvents, LiveSubscription, LogEvent } from '../core/context.js';
import { noteRateLimitRefusal } from '../core/request-scope.js';
import { EVENTS_CHANNEL } from '../writes/event-append.js';
import { parseNotification, type Notification } from './event.store.js';

export const MAX_STREAMS_PER_TOKEN = 10;

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
  ) {}

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
  /** Milliseconds between a stream's idle ticks; 15 s by default. */
  idleMs?: number;
  /** Milliseconds a stream waits for a client to read what was written before it gives up; 30 s. */
  slowClientMs?: number;
  log?: Logger;
}

export class EventHub implements LiveEvents {
  readonly idleMs: number;
  readonly slowClientMs: number;
  readonly #byUser = new Map<number, Set<Subscription>>();
  readonly #byToken = new Map<string, number>();
  #client: pg.Client | undefined;
  #connecting: Promise<void> | undefined;
  #stopped = false;
  #retry: NodeJS.Timeout | undefined;

  constructor(private readonly options: EventHubOptions) {
    this.idleMs = options.idleMs ?? 15_000;
    this.slowClientMs = options.slowClientMs ?? 30_000;
  }

  /** Open streams in this process. */
  get size(): number {
    let n = 0;
    for (const set of this.#byUser.values()) n += set.size;
    return n;
  }

  /** Registers a stream of `userId` opened with the token `tokenHash`: 429 past the limit. */
  async subscribe(userId: number, tokenHash: string): Promise<Subscription> {
    if (this.#stopped) throw DomainError.of('service_unavailable', { detail: 'The server is stopping; reconnect.' }).withRetryAfter(1);
    const open = this.#byToken.get(tokenHash) ?? 0;
    if (open >= MAX_STREAMS_PER_TOKEN) {
      noteRateLimitRefusal('streams');
      throw DomainError.of('rate_limited', {
        detail: `At most ${MAX_STREAMS_PER_TOKEN} event streams may be open per access token; close one first.`,
      }).withRetryAfter(5);
    }
    // The slot is taken before waiting for the listener, so parallel opens cannot pass the limit.
    this.#byToken.set(tokenHash, open + 1);
    try {
      await this.#listen();
    } catch (error) {
      this.#releaseSlot(tokenHash);
      throw error;
    }
    const subscription = new Subscription(userId, tokenHash, (s) => this.#release(s));
    let set = this.#byUser.get(userId);
    if (!set) this.#byUser.set(userId, (set = new Set()));
    set.add(subscription);
    return subscription;
  }

  /** Ends every stream of a token in this process (it was revoked); other processes notice at their next check. */
  closeToken(tokenHash: string): void {
    const revoked = DomainError.unauthorized('The access token was revoked.');
    for (const set of [...this.#byUser.values()]) for (const s of [...set]) if (s.tokenHash === tokenHash) s.close(revoked);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#retry);
    for (const set of [...this.#byUser.values()]) for (const s of [...set]) s.close();
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => undefined);
  }

  #release(subscription: Subscription): void {
    const set = this.#byUser.get(subscription.userId);
    set?.delete(subscription);
    if (set?.size === 0) this.#byUser.delete(subscription.userId);
    this.#releaseSlot(subscription.tokenHash);
  }

  #releaseSlot(tokenHash: string): void {
    const open = (this.#byToken.get(tokenHash) ?? 1) - 1;
    if (open > 0) this.#byToken.set(tokenHash, open);
    else this.#byToken.delete(tokenHash);
  }

  #notify(notification: Notification): void {
    for (const s of this.#byUser.get(notification.userId) ?? []) s.offer(notification.events ?? null);
  }

  #wakeAll(): void {
    for (const set of this.#byUser.values()) for (const s of set) s.offer(null);
  }

  /** Connects the LISTEN connection once; a lost one is replaced, and every stream re-reads. */
  #listen(): Promise<void> {
    if (this.#client) return Promise.resolve();
    this.#connecting ??= (async () => {
      const client = new pg.Client({ connectionString: this.options.databaseUrl, connectionTimeoutMillis: 5_000 });
      client.on('notification', (message) => {
        const notification = parseNotification(message.payload);
        if (notification) this.#notify(notification);
      });
      client.on('error', (error) => {
        this.options.log?.warn({ err: error }, 'change log listener lost its connection; reconnecting');
        this.#reconnectSoon(client);
      });
      client.on('end', () => this.#reconnectSoon(client));
      try {
        await client.connect();
        await client.query(`listen ${EVENTS_CHANNEL}`);
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
    const attempt = (delay: number) => {
      this.#retry = setTimeout(() => {
        if (this.#stopped || this.#byUser.size === 0) return;
        this.#listen().then(
          () => this.#wakeAll(), // notifications may have been missed while it was down
          () => attempt(Math.min(delay * 2, 5_000)),
        );
      }, delay);
      this.#retry.unref();
    };
    attempt(100);
  }
}
