import { defineConfig } from 'vitest/config';
import { pooledTierSkip } from './test/helpers/pooled-database.js';

/**
 * The pooled tier: these tests (about 480, 21 files) run a second time with every database
 * URL leading through PgBouncer in transaction mode (test/helpers/global-setup.ts), its pool
 * per database (4) smaller than the apps' pools (20), LISTEN and the migration lock going to
 * PostgreSQL directly: every kind of write and read over HTTP, both doors, the change log's
 * delivery, idempotency, If-Match, and statements batched into one message. Left out for
 * time: access.test.ts and change-log.test.ts (they wait on clocks and idle ticks, not on the
 * database). README.md "Behind a pooler" names them too.
 */
export const POOLED_TIER = [
  'test/projects-*.test.ts',
  'test/tasks-*.test.ts',
  'test/parity.test.ts',
  'test/conditional.test.ts',
  'test/idempotency.test.ts',
  'test/users.test.ts',
  'test/change-log-delivery.test.ts',
  'test/http-errors.test.ts',
  'test/trpc-door.test.ts',
  'test/batching.test.ts',
];

export default defineConfig({
  test: {
    globalSetup: ['test/helpers/global-setup.ts'],
    setupFiles: ['test/helpers/fast-check-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    env: { LOG_LEVEL: 'silent' },
    projects: [
      { extends: true, test: { name: 'direct', include: ['test/**/*.test.ts'] } },
      // Skipped only on a machine without PostgreSQL 15 and PgBouncer that is not CI.
      ...(pooledTierSkip ? [] : [{ extends: true, test: { name: 'pooled', include: POOLED_TIER } }]),
    ],
  },
});
