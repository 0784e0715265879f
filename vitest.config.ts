import { defineConfig } from 'vitest/config';
import { TieredSequencer } from './test/helpers/sequencer.js';

/**
 * Two projects share one pool of workers (same groupOrder, so they run side by side):
 *
 * - `system` (test/system/): spawned processes, crashes, outages, memory. Each file gets a
 *   fresh worker (isolate), as they measure or signal their own process.
 * - `in-process` (rules, procedures, http, hostile): a worker runs file after file and keeps
 *   the modules it has evaluated (isolate: false), so src/ and its libraries are loaded once
 *   per worker instead of once per file. Each file still gets its own app and database.
 *
 * maxWorkers is explicit: vitest's default (available cores - 1) is a single worker on a
 * 2-core machine, while most of a file's time is spent waiting on PostgreSQL or on a
 * spawned process.
 */
export default defineConfig({
  test: {
    maxWorkers: 3,
    globalSetup: ['test/helpers/global-setup.ts'],
    setupFiles: ['test/helpers/fast-check-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    env: { LOG_LEVEL: 'silent' },
    sequence: { sequencer: TieredSequencer },
    projects: [
      {
        extends: true,
        test: { name: 'system', include: ['test/system/**/*.test.ts'], isolate: true },
      },
      {
        extends: true,
        test: { name: 'in-process', include: ['test/{rules,procedures,http,hostile}/**/*.test.ts'], isolate: false },
      },
    ],
  },
});
