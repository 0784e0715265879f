/**
 * Starts one real PostgreSQL for the whole run (embedded, in a temporary folder), or uses
 * DATABASE_URL when given, and migrates one template database on it. Each test file then
 * creates its own databases as copies of that template (test-app.ts, createTestDatabase),
 * which costs a file copy instead of running every migration again.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { openOrm } from '../../src/app/orm.js';
import { startEmbeddedDatabase } from '../../src/db/embedded.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of a maintenance database on the test server; test files create their own. */
    adminDatabaseUrl: string;
    /** The migrated database that test databases are copied from (CREATE DATABASE … TEMPLATE). */
    templateDatabase: string;
  }
}

async function admin<T>(url: string, run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

/** Creates and migrates the template; returns how to drop it. */
async function createTemplate(adminUrl: string, name: string): Promise<() => Promise<void>> {
  await admin(adminUrl, (c) => c.query(`create database "${name}"`));
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const orm = await openOrm(url.toString(), { migrate: true, poolSize: 1 });
  await orm.close(true);
  // No session may stay on a template while it is copied: refuse them all from now on.
  await admin(adminUrl, (c) => c.query(`alter database "${name}" with is_template true allow_connections false`));
  return () =>
    admin(adminUrl, async (c) => {
      await c.query(`alter database "${name}" with is_template false`);
      await c.query(`drop database if exists "${name}"`);
    });
}

export default async function setup(project: TestProject) {
  // Per run, so that runs against one DATABASE_URL do not share (or drop) each other's.
  const template = `t_template_${process.pid}`;
  project.provide('templateDatabase', template);
  if (process.env.DATABASE_URL) {
    project.provide('adminDatabaseUrl', process.env.DATABASE_URL);
    return createTemplate(process.env.DATABASE_URL, template);
  }
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'planning-test-'));
  const db = await startEmbeddedDatabase({
    dataDir,
    // Durability is not under test here (the restart tests run their own servers).
    settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', max_connections: '300' },
  });
  project.provide('adminDatabaseUrl', db.url);
  await createTemplate(db.url, template);
  return async () => {
    await db.stop();
    await fs.rm(dataDir, { recursive: true, force: true });
  };
}
