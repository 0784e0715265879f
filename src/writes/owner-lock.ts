/**
 * The row lock that serialises a user's writes, written once: every write of a user takes it
 * first (one lock order, so writes of one user never deadlock each other), in its own
 * transaction's first statement or as the first CTE of a write made in one statement.
 *
 * `for no key update` excludes every other holder of this lock, but not the key-share locks
 * that inserts referencing the user take (a login's token, a task's foreign-key check). The
 * lock timeout is set in the same statement (set_config runs before the row is locked), so it
 * costs no round trip; an overrun is 503 with Retry-After, not a pool held hostage. A deadlock
 * or serialization failure with anything outside this scheme runs the write again (bounded,
 * logged at warn).
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../core/logger.js';
import { BATCHED } from '../db/batching.js';
import { busy } from './turns.js';

const LOCK_TIMEOUT_MS = 5_000;
const RETRIES = 3;

/**
 * The select that locks the owner's row (the user's id is its one parameter, after those of
 * `columns`): its `id`, and `columns`, further select-list columns read in the same snapshot.
 */
export function ownerLockSql(columns: { sql: string; params: unknown[] }[] = []): { sql: string; params: unknown[] } {
  return {
    sql: `select set_config('lock_timeout', '${LOCK_TIMEOUT_MS}ms', true), id${columns.map((c) => `, ${c.sql}`).join('')} from users where id = ? for no key update`,
    params: columns.flatMap((c) => c.params),
  };
}

/**
 * Takes the owner's lock in the caller's transaction. Without a column to read, nothing of its
 * answer is needed: it goes with the transaction's next statement (src/db/batching.ts), whose
 * snapshot is then taken after the lock, as here. Returns the row of the lock.
 */
export async function lockOwner(em: SqlEntityManager, userId: number, column?: { sql: string; params: unknown[] }): Promise<Record<string, unknown> | undefined> {
  const lock = ownerLockSql(column ? [column] : []);
  const rows = await em.execute<Array<Record<string, unknown>>>(`${column ? '' : BATCHED}${lock.sql}`, [...lock.params, userId]);
  return rows[0];
}

function sqlState(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 8; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Runs a write (whole) again after a deadlock or serialization failure; a lock timeout is 503. */
export async function retried<T>(log: Logger | undefined, run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      const state = sqlState(error);
      if (state === '55P03') throw busy(); // lock_timeout: another process holds the lock too long
      if ((state === '40P01' || state === '40001') && attempt < RETRIES) {
        log?.warn({ err: error, attempt }, 'write retried after a deadlock or serialization failure');
        continue;
      }
      throw error;
    }
  }
}
