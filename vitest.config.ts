import { defineConfig } from 'vitest/config';
import { pooledTierSkip } from './test/helpers/pooled-database.js';
import { TieredSequencer } from './test/helpers/sequencer.js';

/**
 * The pooled tier: these tests (386 in 18 files) run a second time with every database
 * URL leading through PgBouncer in transaction mode (test/helpers/global-setup.ts), its pool
 * per database (4) smaller than the apps' pools (20), LISTEN and the migration lock going to
 * PostgreSQL directly: every kind of write and read over HTTP, both doors, the change log's
 * delivery, idempotency, If-Match, and the statement timeout sent with each statement. Left out for
 * time: http/access.test.ts and http/change-log.test.ts (they wait on clocks and idle ticks,
 * not on the database), and files whose statements the tier already sends through the pooler
 * in another file:
 *
 * - projects-list-queries, tasks-list-queries: a list with filters, search and sort is the
 *   same one read statement, sent alone, as a list without (projects-listing,
 *   tasks-listing-and-order; parity lists with state, sort and page_size, conditional
 *   with If-None-Match); only its predicates differ, which the pooler does not see. They
 *   were the tier's two longest files (their properties load hundreds of rows).
 * - tasks-counts: task writes that move a task in and out of the open set (tasks-create-and-
 *   edit, tasks-listing-and-order, tasks-concurrency, projects-and-their-tasks), then list
 *   reads of its count (tasks-listing-and-order).
 * - projects-access, tasks-access: another user's ids and no token are the same get and write
 *   statements with the owner in them, refused (http-errors and parity on both doors); 401
 *   and 415 are answered before any statement.
 * - projects-edit-form: the project update of projects-create-and-edit, with a due_at equal
 *   to the stored one.
 * - tasks-state: the state change of tasks-trpc and parity; what it adds (status, content
 *   type, wrapper, a __proto__ member) is decided before any statement.
 *
 * docs/operations.md "Behind a pooler" names them too.
 */
export const POOLED_TIER = [
  'test/http/projects-and-their-tasks.test.ts',
  'test/http/projects-create-and-edit.test.ts',
  'test/http/projects-listing.test.ts',
  'test/http/projects-state.test.ts',
  'test/http/projects-trpc.test.ts',
  'test/http/tasks-concurrency.test.ts',
  'test/http/tasks-create-and-edit.test.ts',
  'test/http/tasks-listing-and-order.test.ts',
  'test/http/tasks-trpc.test.ts',
  'test/http/parity.test.ts',
  'test/http/conditional.test.ts',
  'test/http/idempotency.test.ts',
  'test/http/users.test.ts',
  'test/http/change-log-delivery.test.ts',
  'test/http/http-errors.test.ts',
  'test/http/trpc-door.test.ts',
  'test/system/transaction-timeout.test.ts',
  'test/http/database-tier.test.ts',
];

/**
 * Each project names the global setup itself: vitest runs a root config's `globalSetup` once,
 * for the root, and does not pass it on to the projects that extend it, so the setup would
 * never learn that a project is the pooled tier (it starts PgBouncer for that project's name).
 * test/http/database-tier.test.ts checks which server each project's files reach.
 */
const GLOBAL_SETUP = ['test/helpers/global-setup.ts'];

/** Tests that measure the process they run in (its heap after full collections): a fresh worker each. */
const OWN_PROCESS = ['test/system/memory.test.ts'];

/**
 * Four projects share one pool of workers (same groupOrder, so they run side by side):
 *
 * - `own-process` (OWN_PROCESS): tests that measure their own process, each in a fresh worker.
 * - `main`: every tier, test/{rules,procedures,http,hostile,system}/. A system file spawns
 *   services and PostgreSQLs and spends most of its time waiting on them; the others start
 *   an app in the worker itself. Each file gets its own app and database.
 * - `pooled`: the pooled tier above, behind PgBouncer.
 * - `failover`: the failover tier (below), handed out between `main` and `pooled`.
 *
 * In `main` and `pooled` a worker runs file after file and keeps the modules it has evaluated
 * (isolate: false), so src/ and its libraries are loaded once per worker instead of once per
 * file; the sequencer (test/helpers/sequencer.ts) hands out each project's files together so
 * that workers are kept. Nothing of a file outlives it but those modules: each file starts
 * and closes what it uses.
 *
 * maxWorkers is explicit: vitest's default (available cores - 1) is a single worker on a
 * 2-core machine, while most of a file's time is spent waiting on PostgreSQL or on a
 * spawned process.
 */
export default defineConfig({
  test: {
    maxWorkers: 3,
    setupFiles: ['test/helpers/fast-check-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    env: { LOG_LEVEL: 'silent' },
    sequence: { sequencer: TieredSequencer },
    projects: [
      {
        extends: true,
        test: { name: 'own-process', include: OWN_PROCESS, isolate: true, globalSetup: GLOBAL_SETUP },
      },
      {
        extends: true,
        test: {
          name: 'main',
          include: ['test/{rules,procedures,http,hostile,system}/**/*.test.ts'],
          exclude: OWN_PROCESS,
          isolate: false,
          globalSetup: GLOBAL_SETUP,
        },
      },
      // The failover tier (test/failover/): the high-availability deployment of docs/operations.md
      // (Patroni, etcd, HAProxy, PgBouncer, two instances) under load while its primary is
      // killed; it skips without root or the packages, unless CI is set.
      // It runs beside the end of the others (the sequencer hands it out after the main
      // project, before the pooled tier) instead of alone after them: its minute and a half
      // is mostly Patroni's timers and the deployment's start, which leave part of the two
      // cores idle. Its failover windows stay the deployment's: the file raises the
      // scheduling priority of everything it starts above the rest of the suite's
      // (test/failover/failover.test.ts).
      { extends: true, test: { name: 'failover', include: ['test/failover/**/*.test.ts'], isolate: false, globalSetup: GLOBAL_SETUP } },
      // Skipped only on a machine without PostgreSQL 15 and PgBouncer that is not CI.
      ...(pooledTierSkip ? [] : [{ extends: true, test: { name: 'pooled', include: POOLED_TIER, isolate: false, globalSetup: GLOBAL_SETUP } }]),
    ],
  },
});
