/**
 * Turns: at most half the pool's connections, and at most WRITERS_PER_USER, are held by one
 * user's writes in this process; the others wait in memory, first come first served (up to
 * QUEUED_PER_USER, else 503), so one user's burst cannot fill the pool waiting for its lock.
 * Fewer turns bound one user's throughput: two gave 0.39–0.54 of the fewest floor, five 0.61.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { DomainError } from '../core/errors.js';
import { DEFAULT_POOL_SIZE } from '../db/pool-size.js';

export const WRITERS_PER_USER = 5;

/** One user's turns in a process whose pool has `poolSize` connections: half of them, 1 to WRITERS_PER_USER. */
export function writersFor(poolSize: number): number {
  return Math.max(1, Math.min(WRITERS_PER_USER, Math.floor(poolSize / 2)));
}
export const QUEUED_PER_USER = 200;

export function busy(): DomainError {
  return DomainError.of('unavailable', { detail: 'Too many writes of this user are waiting; retry shortly.' }).withRetryAfter(1);
}

/** A FIFO of turns per user: `writers` run, QUEUED_PER_USER wait, the rest are refused. */
class Turns {
  readonly #users = new Map<number, { running: number; waiting: Array<() => void> }>();

  /** Waits for one of the user's `writers` turns; the returned function gives it back (once). */
  async acquire(userId: number, writers: number): Promise<() => void> {
    let user = this.#users.get(userId);
    if (!user) this.#users.set(userId, (user = { running: 0, waiting: [] }));
    if (user.running >= writers) {
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

export const turns = new Turns();

/** Waits for a turn of the request's user, as many as its entity manager's pool allows. */
export function turnOf(ctx: { user: { id: number }; em: SqlEntityManager }): Promise<() => void> {
  return turns.acquire(ctx.user.id, writersFor(ctx.em.config.get('pool')?.max ?? DEFAULT_POOL_SIZE));
}
