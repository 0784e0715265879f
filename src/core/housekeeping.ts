/**
 * Rows that only grow unless someone deletes them (rate-limit counters of past windows,
 * access tokens past their expiry, change-log events past their retention, used or expired
 * stream tickets, the expired leases of event streams whose process died). Each owner supplies its job; they run once at start and then every
 * minute, off the request path; a failure (database down) waits for the next round.
 */
import type { Clock } from './clock.js';
import type { Logger } from './logger.js';

export const HOUSEKEEPING_INTERVAL_MS = 60_000;

/** One kind of pruning; resolves with how many rows it removed. */
export type HousekeepingJob = { name: string; run: (now: Date) => Promise<number> };

/** Runs a first round, resolving when it is over, then one a minute until `stop()`. */
export async function startHousekeeping(jobs: readonly HousekeepingJob[], clock: Clock, logger: Logger): Promise<{ stop(): void }> {
  let running: Promise<void> | undefined;
  const round = () => {
    return (running ??= (async () => {
      const now = clock.now();
      for (const job of jobs) {
        try {
          const removed = await job.run(now);
          if (removed) logger.debug({ job: job.name, removed }, 'housekeeping removed rows');
        } catch (error) {
          logger.debug({ err: error, job: job.name }, 'housekeeping skipped a job this round');
        }
      }
      running = undefined;
    })());
  };
  await round();
  const timer = setInterval(round, HOUSEKEEPING_INTERVAL_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
