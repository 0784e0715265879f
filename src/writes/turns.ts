/**
 * Turns: at most WRITERS_PER_USER transactions of one user hold a database connection in this
 * process at once; the others wait in memory, first come first served (up to QUEUED_PER_USER
 * of them, else 503 at once), so one user's burst cannot fill the pool while its requests wait
 * for that user's lock. Five is half the default pool (DATABASE_POOL_SIZE 10): the other half
 * stays for everyone else. Fewer bound one user's throughput (its writes serialise on its lock
 * in PostgreSQL, where the next waiter starts the moment the lock is free, while a turn passes
 * on only when this process next runs): 2 gave 0.54 of the fewest floor for one user's state
 * changes, 6 gave 0.79 (bench/README.md, "Writes as fast as reads").
 */
import { DomainError } from '../core/errors.js';

export const WRITERS_PER_USER = 5;
export const QUEUED_PER_USER = 200;

export function busy(): DomainError {
  return DomainError.of('service_unavailable', { detail: 'Too many writes of this user are waiting; retry shortly.' }).withRetryAfter(1);
}

/** A FIFO of turns per user: WRITERS_PER_USER run, QUEUED_PER_USER wait, the rest are refused. */
class Turns {
  readonly #users = new Map<number, { running: number; waiting: Array<() => void> }>();

  /** Waits for a turn of the user's; the returned function gives it back (once). */
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

export const turns = new Turns();
