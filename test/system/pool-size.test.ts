/**
 * Connection pools against the database's max_connections: WEB_CONCURRENCY processes each
 * hold a pool, and together they must leave room for superusers and operators. Too big a
 * DATABASE_POOL_SIZE is refused at start with a message saying what to change; no size is
 * sized to fit; the embedded PostgreSQL is started with the connections the service needs.
 * The test database server allows 300 connections (test/helpers/global-setup.ts).
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/core/logger.js';
import { startService } from '../../src/server.js';
import { spawnService } from '../helpers/spawn-service.js';
import { createTestDatabase } from '../helpers/test-app.js';

const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await fs.rm(dir, { recursive: true, force: true });
});

async function maxConnectionsOf(url: string): Promise<{ max: number; reserved: number }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query(
      "select current_setting('max_connections')::int as max, current_setting('superuser_reserved_connections')::int as reserved",
    );
    return rows[0];
  } finally {
    await client.end();
  }
}

async function nativePoolMax(service: Awaited<ReturnType<typeof startService>>): Promise<number> {
  const pool = (await (service.orm.em.getConnection() as any).getNativeClient()) as { options: { max: number } };
  return pool.options.max;
}

describe('pool size', () => {
  it('refuses to start when WEB_CONCURRENCY × DATABASE_POOL_SIZE does not fit in max_connections, saying what to change', async () => {
    const databaseUrl = await createTestDatabase();
    const { max } = await maxConnectionsOf(databaseUrl);
    const failed = await spawnService({ DATABASE_URL: databaseUrl, WEB_CONCURRENCY: '12', DATABASE_POOL_SIZE: String(Math.ceil(max / 12) + 1) }).then(
      (service) => {
        service.child.kill('SIGTERM');
        return 'started';
      },
      (error: Error) => error.message,
    );
    expect(failed).toMatch(/service exited with 1 before listening/);
    expect(failed).toContain(`max_connections ${max}`);
    expect(failed).toMatch(/lower DATABASE_POOL_SIZE or WEB_CONCURRENCY, or raise max_connections/);
  }, 60_000);

  it('without DATABASE_POOL_SIZE, gives each process its share of what the database allows', async () => {
    const databaseUrl = await createTestDatabase();
    const { max, reserved } = await maxConnectionsOf(databaseUrl);
    const workers = 64;
    const config = { ...loadConfig({}), databaseUrl, port: 0, host: '127.0.0.1', webConcurrency: workers };
    const service = await startService({ config, logger: createLogger('silent') });
    try {
      const share = await nativePoolMax(service);
      expect(service.poolSize).toBe(share);
      expect(share).toBeGreaterThanOrEqual(1);
      // All processes together leave room for superusers and an operator's psql.
      expect(share * workers).toBeLessThan(max - reserved);
    } finally {
      await service.stop();
    }
  });

  it('with DATABASE_POOL_SIZE, uses it when it fits', async () => {
    const databaseUrl = await createTestDatabase();
    const config = { ...loadConfig({}), databaseUrl, port: 0, host: '127.0.0.1', databasePoolSize: 7 };
    const service = await startService({ config, logger: createLogger('silent') });
    try {
      expect(await nativePoolMax(service)).toBe(7);
    } finally {
      await service.stop();
    }
  });

  it('starts the embedded PostgreSQL with room for every process of the service', async () => {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'planning-pool-'));
    dirs.push(dataDir);
    const workers = 12;
    const config = { ...loadConfig({}), dataDir, databaseUrl: undefined, port: 0, host: '127.0.0.1', webConcurrency: workers };
    const service = await startService({ config, logger: createLogger('silent') });
    try {
      const password = (await fs.readFile(path.join(dataDir, 'pg-password'), 'utf8')).trim();
      const port = Number(/127\.0\.0\.1:(\d+)\)/.exec(service.databaseDescription)![1]);
      const { max, reserved } = await maxConnectionsOf(`postgresql://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`);
      expect(service.poolSize).toBe(10);
      expect(max - reserved, 'max_connections leaves no room for every pool and an operator').toBeGreaterThan(workers * service.poolSize);
    } finally {
      await service.stop();
    }
  }, 60_000);
});
