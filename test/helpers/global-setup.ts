/**
 * Starts one real PostgreSQL for the whole run (embedded, in a temporary folder), or uses
 * DATABASE_URL when given. Each test file then creates its own database on it.
 *
 * The pooled tier (the vitest project `pooled`, or TEST_POOLED=1) runs the same tests behind
 * a pooler instead: PostgreSQL 15 with PgBouncer in transaction mode in front of it
 * (test/helpers/pooled-database.ts), its pool smaller than the apps' pools. Its URLs then
 * lead through PgBouncer, and `directAdminDatabaseUrl` past it (test-app.ts `directUrlOf`).
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedDatabase } from '../../src/db/embedded.js';
import { startPooledDatabase } from './pooled-database.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of a maintenance database on the test server; test files create their own. */
    adminDatabaseUrl: string;
    /** The same server without the pooler (the pooled tier); else the same URL. */
    directAdminDatabaseUrl: string;
  }
}

/** The pooler's server connections per database: fewer than a test app's pool (20). */
export const POOLED_TIER_POOL_SIZE = 4;

export default async function setup(project: TestProject) {
  if (project.name === 'pooled' || process.env.TEST_POOLED === '1') {
    const pooled = await startPooledDatabase({ bouncer: { default_pool_size: POOLED_TIER_POOL_SIZE } });
    project.provide('adminDatabaseUrl', pooled.pooledUrl());
    project.provide('directAdminDatabaseUrl', pooled.directUrl());
    return () => pooled.stop();
  }
  if (process.env.DATABASE_URL) {
    project.provide('adminDatabaseUrl', process.env.DATABASE_URL);
    project.provide('directAdminDatabaseUrl', process.env.DATABASE_URL);
    return;
  }
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'planning-test-'));
  const db = await startEmbeddedDatabase({
    dataDir,
    // Durability is not under test here (the restart tests run their own servers).
    settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', max_connections: '300' },
  });
  project.provide('adminDatabaseUrl', db.url);
  project.provide('directAdminDatabaseUrl', db.url);
  return async () => {
    await db.stop();
    await fs.rm(dataDir, { recursive: true, force: true });
  };
}
