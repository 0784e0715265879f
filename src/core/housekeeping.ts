/**
 * Rows that only grow unless someone deletes them: rate-limit counters of past windows and
 * access tokens past their expiry (a row per login). Deleted once at start and then every
 * minute, off the request path; a failure (database down) waits for the next round.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Clock } from './clock.js';
import type { Logger } from './logger.js';
import { pruneRateLimits } from './rate-limit.js';

export const HOUSEKEEPING_INTERVAL_MS = 60_000;

export async function pruneExpiredTokens(orm: MikroORM, now: Date): Promise<number> {
  const result = await orm.em.fork().execute<{ affectedRows: number }>('delete from access_tokens where expires_at < ?', [now], 'run');
  return result.affectedRows;
}

/** Runs a first round, resolving when it is over, then one a minute until `stop()`. */
export async function startHousekeeping(orm: MikroORM, clock: Clock, logger: Logger): Promise<{ stop(): void }> {
  let running: Promise<void> | undefined;
  const round = () => {
    return (running ??= (async () => {
      try {
        const now = clock.now();
        await pruneRateLimits(orm.em.fork(), now);
        const tokens = await pruneExpiredTokens(orm, now);
        if (tokens) logger.debug({ tokens }, 'deleted expired access tokens');
      } catch (error) {
        logger.debug({ err: error }, 'housekeeping skipped a round');
      } finally {
        running = undefined;
      }
    })());
  };
  await round();
  const timer = setInterval(round, HOUSEKEEPING_INTERVAL_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
