/**
 * Announces committed writes to every process on the database: the NOTIFY that wakes event
 * streams and webhook deliverers (src/changes/event-hub.ts). A write hands its payload over after
 * its commit and answers; what has been handed over meanwhile goes in one statement. A payload
 * that cannot be sent is dropped: listeners read the log from their cursors, and their
 * safety-net rounds make up a wake-up that never came (docs/design/writes.md).
 */
import { AsyncResource } from 'node:async_hooks';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { Announcements } from '../core/context.js';
import { run, sql } from '../db/sql-builder.js';

/**
 * The change log's channel. A payload is `<user id>:<first seq>:<last seq>[:<the events as JSON>]`,
 * made by `apply` and read by src/changes/event.store.ts `parseNotification`.
 */
export const EVENTS_CHANNEL = 'user_events';

/** Payloads sent in one statement at most (each at most PostgreSQL's 8,000 bytes). */
const PER_STATEMENT = 200;
/** Payloads that may wait while a statement is under way; more are dropped. */
const MAX_WAITING = 10_000;

export class Announcer implements Announcements {
  #waiting: Array<{ payload: string; sent: () => void }> = [];
  #sending: Promise<void> | undefined;

  /** Sends in the context the announcer was made in: the statement is no request's (metrics, logs). */
  readonly #start = AsyncResource.bind(() => this.#send());

  /** `em` gives an entity manager whose pool the statements use. */
  constructor(private readonly em: () => SqlEntityManager) {}

  /** Hands over a committed write's payload; resolves when it is sent or dropped, never rejects. */
  announce(payload: string): Promise<void> {
    if (this.#waiting.length >= MAX_WAITING) return Promise.resolve();
    const sent = new Promise<void>((resolve) => this.#waiting.push({ payload, sent: resolve }));
    if (!this.#sending) this.#sending = this.#start();
    return sent;
  }

  /** Resolves when nothing is waiting or under way (a graceful stop sends what it has). */
  async idle(): Promise<void> {
    while (this.#sending) await this.#sending;
  }

  /** Sends until nothing waits; never rejects (a payload not sent is dropped, see above). */
  async #send(): Promise<void> {
    // Yields first: `#sending` is set before the loop can end (its end and the reset below are
    // one synchronous step, so nothing handed over is left waiting), and what the same tick
    // hands over goes in the first statement.
    await Promise.resolve();
    while (this.#waiting.length > 0) {
      const taken = this.#waiting.splice(0, PER_STATEMENT);
      const payloads = taken.map((t) => t.payload);
      try {
        await run(this.em(), sql<Record<string, unknown>>`select pg_notify(${EVENTS_CHANNEL}, payload) from unnest(${payloads}::text[]) as payload`);
      } catch {
        // dropped: the listeners' own rounds read the log
      }
      for (const t of taken) t.sent();
    }
    this.#sending = undefined;
  }
}
