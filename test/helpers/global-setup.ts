/**
 * Starts one real PostgreSQL for the whole run (embedded, in a temporary folder), or uses
 * DATABASE_URL when given. Each test file then creates its own database on it.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedDatabase } from '../../src/db/embedded.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of a maintenance database on the test server; test files create their own. */
    adminDatabaseUrl: string;
  }
}

export default async function setup(project: TestProject) {
  if (process.env.DATABASE_URL) {
    project.provide('adminDatabaseUrl', process.env.DATABASE_URL);
    return;
  }
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'planning-test-'));
  const db = await startEmbeddedDatabase({
    dataDir,
    // Durability is not under test here (the restart tests run their own servers).
    settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', max_connections: '300' },
  });
  project.provide('adminDatabaseUrl', db.url);
  return async () => {
    await db.stop();
    await fs.rm(dataDir, { recursive: true, force: true });
  };
}
