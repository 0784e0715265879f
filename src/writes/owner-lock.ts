/**
 * Every write of a user takes the user's row lock first (`key_open`: one lock order, so one user's
 * writes never deadlock each other), with a lock timeout of 5 s: an overrun is 503 with
 * Retry-After. A deadlock or serialization failure with anything else runs the write again.
 */
import type { Logger } from '../core/logger.js';
import { sqlStateOf } from '../core/failures.js';
import { busy } from './turns.js';

const RETRIES = 3;

/** Runs a write (whole) again after a deadlock or serialization failure; a lock timeout is 503. */
export async function retried<T>(log: Logger | undefined, run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      const state = sqlStateOf(error);
      if (state === '55P03') throw busy(); // lock_timeout: another process holds the lock too long
      if ((state === '40P01' || state === '40001') && attempt < RETRIES) {
        log?.warn({ err: error, attempt }, 'write retried after a deadlock or serialization failure');
        continue;
      }
      throw error;
    }
  }
}
