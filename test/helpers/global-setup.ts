/**
 * Once per run, before any test file (the projects of a run share what it starts):
 *
 * - Starts one real PostgreSQL (embedded, in a temporary folder), or uses DATABASE_URL when
 *   given, and migrates one template database on it. Each test file then creates its own
 *   databases as copies of that template (test-app.ts, createTestDatabase), which costs a
 *   file copy instead of running every migration again.
 * - The pooled tier (the vitest project `pooled`, or TEST_POOLED=1) runs its tests behind a
 *   pooler instead: PostgreSQL 15 with PgBouncer in transaction mode in front of it
 *   (test/helpers/pooled-database.ts), its pool smaller than the apps' pools. Its URLs then
 *   lead through PgBouncer, and `directAdminDatabaseUrl` past it (test-app.ts `directUrlOf`).
 * - Compiles src/ to JavaScript as `npm run build` does (TypeScript, file by file), for the
 *   services the system tests spawn (spawn-service.ts): each process then starts from
 *   JavaScript, as `npm start` runs it, instead of compiling every module again through tsx.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import ts from 'typescript';
import type { TestProject } from 'vitest/node';
import { openOrm } from '../../src/app/orm.js';
import { startEmbeddedDatabase } from '../../src/db/embedded.js';
import { startPooledDatabase } from './pooled-database.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of a maintenance database on the test server; test files create their own. */
    adminDatabaseUrl: string;
    /** The same server without the pooler (the pooled tier); else the same URL. */
    directAdminDatabaseUrl: string;
    /** The migrated database that test databases are copied from (CREATE DATABASE … TEMPLATE). */
    templateDatabase: string;
    /** src/main.ts compiled to JavaScript, for the services the tests spawn. */
    serviceEntry: string;
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

const ROOT = path.resolve(import.meta.dirname, '../..');

/**
 * src/ compiled into a temporary folder (its JSON modules copied), with the package's
 * package.json (its module type) and a link to its node_modules beside it; returns the folder.
 */
async function compileSources(): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'planning-build-'));
  const { config } = ts.readConfigFile(path.join(ROOT, 'tsconfig.json'), ts.sys.readFile);
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, ROOT);
  // What tsc emits for this ES module package (isolatedModules: each file on its own).
  const compilerOptions = { ...options, module: ts.ModuleKind.ESNext, sourceMap: false, inlineSourceMap: false, declaration: false };
  const src = path.join(ROOT, 'src');
  for (const file of await fs.readdir(src, { recursive: true })) {
    // A JSON module (src/core/tz-names.json) goes beside the code that imports it, as tsc copies it.
    if (file.endsWith('.json')) {
      await fs.mkdir(path.join(dir, 'src', path.dirname(file)), { recursive: true });
      await fs.copyFile(path.join(src, file), path.join(dir, 'src', file));
      continue;
    }
    if (!file.endsWith('.ts')) continue;
    const { outputText } = ts.transpileModule(await fs.readFile(path.join(src, file), 'utf8'), { compilerOptions, fileName: file });
    const out = path.join(dir, 'src', file.replace(/\.ts$/, '.js'));
    await fs.mkdir(path.dirname(out), { recursive: true });
    await fs.writeFile(out, outputText);
  }
  await fs.copyFile(path.join(ROOT, 'package.json'), path.join(dir, 'package.json'));
  await fs.symlink(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  return dir;
}

/** The pooler's server connections per database: fewer than a test app's pool (20). */
export const POOLED_TIER_POOL_SIZE = 4;

interface RunDatabase {
  /** Where test files create their databases (through the pooler in the pooled tier). */
  url: string;
  /** The same server without the pooler; else the same URL. */
  directUrl: string;
  stop: () => Promise<void>;
}

/** The run's PostgreSQL with the template migrated on it; `stop` undoes both. */
async function startDatabase(template: string, pooledTier: boolean): Promise<RunDatabase> {
  if (pooledTier) {
    const pooled = await startPooledDatabase({ bouncer: { default_pool_size: POOLED_TIER_POOL_SIZE } });
    try {
      await createTemplate(pooled.directUrl(), template);
    } catch (error) {
      await pooled.stop();
      throw error;
    }
    return { url: pooled.pooledUrl(), directUrl: pooled.directUrl(), stop: () => pooled.stop() };
  }
  if (process.env.DATABASE_URL) {
    const url = process.env.DATABASE_URL;
    return { url, directUrl: url, stop: await createTemplate(url, template) };
  }
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'planning-test-'));
  const db = await startEmbeddedDatabase({
    dataDir,
    // Durability is not under test here (the restart tests run their own servers).
    settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', max_connections: '300' },
  });
  const stop = async () => {
    await db.stop();
    await fs.rm(dataDir, { recursive: true, force: true });
  };
  try {
    await createTemplate(db.url, template);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url: db.url, directUrl: db.url, stop };
}

/**
 * What the projects of one run share: the compiled sources, and one database server per kind
 * (direct, or behind the pooler). Each project's setup takes a share and gives it back in its
 * teardown; the last one gone stops it. Kept on globalThis, since vitest may evaluate this
 * module once per project.
 */
interface Shared<T> {
  value: Promise<T>;
  users: number;
  release: (value: T) => Promise<void>;
}
const SHARED = Symbol.for('planning.test-run.shared');
const shared: Map<string, Shared<unknown>> = ((globalThis as Record<symbol, unknown>)[SHARED] ??= new Map()) as Map<string, Shared<unknown>>;

function take<T>(key: string, start: () => Promise<T>, release: (value: T) => Promise<void>): { value: Promise<T>; give: () => Promise<void> } {
  let entry = shared.get(key) as Shared<T> | undefined;
  if (!entry) {
    entry = { value: start(), users: 0, release };
    shared.set(key, entry as Shared<unknown>);
    // A failed start is not shared with the next project: it tries again.
    entry.value.catch(() => shared.delete(key));
  }
  entry.users += 1;
  const held = entry;
  let given = false;
  return {
    value: held.value,
    async give() {
      if (given) return;
      given = true;
      held.users -= 1;
      if (held.users > 0) return;
      if (shared.get(key) === held) shared.delete(key);
      await held.value.then(held.release, () => undefined);
    },
  };
}

export default async function setup(project: TestProject) {
  // Per run, so that runs against one DATABASE_URL do not share (or drop) each other's.
  const template = `t_template_${process.pid}`;
  const pooledTier = project.name === 'pooled' || process.env.TEST_POOLED === '1';
  // The compiler works in this process while PostgreSQL starts in its own.
  const build = take('build', compileSources, (dir) => fs.rm(dir, { recursive: true, force: true }));
  const server = take(pooledTier ? 'pooled-database' : 'database', () => startDatabase(template, pooledTier), (db) => db.stop());
  const [built, database] = await Promise.allSettled([build.value, server.value]);
  if (built.status === 'rejected' || database.status === 'rejected') {
    await Promise.all([build.give(), server.give()]);
    throw built.status === 'rejected' ? built.reason : (database as PromiseRejectedResult).reason;
  }
  project.provide('serviceEntry', path.join(built.value, 'src', 'main.js'));
  project.provide('adminDatabaseUrl', database.value.url);
  project.provide('directAdminDatabaseUrl', database.value.directUrl);
  project.provide('templateDatabase', template);
  return async () => {
    await server.give();
    await build.give();
  };
}
