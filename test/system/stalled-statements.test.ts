/**
 * src/db/stalled-statements.ts on a real PostgreSQL: a statement older than a second makes the
 * watch ask the database; an answer cuts nothing (a slow statement on a database that serves),
 * no answer cuts what is still stalled and starts the outage; the probe tells a database that
 * answers from one that is silent or gone. The service under a frozen database:
 * system/frozen-database.test.ts.
 */
import net, { type AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseProbe, stampStatements, watchStalls } from '../../src/db/stalled-statements.js';
import { createTestDatabase } from '../helpers/test-app.js';
import { freePort } from '../helpers/net.js';

let url: string;
const pools: pg.Pool[] = [];
beforeAll(async () => {
  url = await createTestDatabase();
});
afterAll(async () => {
  await Promise.all(pools.map((pool) => pool.end().catch(() => undefined)));
});

function stampedPool(): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 3 });
  pool.on('error', () => undefined);
  stampStatements(pool);
  pools.push(pool);
  return pool;
}

describe('the stall watch', () => {
  it('asks the database about a statement older than a second, and cuts nothing when it answers', async () => {
    const pool = stampedPool();
    let asked = 0;
    let unreachable = 0;
    const stop = watchStalls(pool, { answers: async () => (asked++, true), onUnreachable: () => unreachable++ });
    try {
      const slow = await pool.query('select pg_sleep(2.5) as slept');
      expect(slow.rows).toEqual([{ slept: '' }]);
    } finally {
      stop();
    }
    expect(asked).toBeGreaterThan(0);
    expect(unreachable).toBe(0);
  });

  it('cuts the stalled connection and starts the outage when the database does not answer, and only that connection', async () => {
    const pool = stampedPool();
    let unreachable = 0;
    const idle = await pool.connect();
    const stop = watchStalls(pool, { answers: async () => false, onUnreachable: () => unreachable++ });
    try {
      const started = performance.now();
      await expect(pool.query('select pg_sleep(10)')).rejects.toThrow(/Connection terminated/);
      expect(performance.now() - started).toBeLessThan(4_000);
      expect(unreachable).toBe(1);
      // The connection that had no statement under way was not cut.
      expect((await idle.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    } finally {
      idle.release();
      stop();
    }
  });
});

describe('the probe', () => {
  it('answers on a database that serves, on one connection kept open', async () => {
    const probe = databaseProbe(url);
    try {
      expect(await probe.answers()).toBe(true);
      expect(await probe.answers()).toBe(true);
    } finally {
      probe.close();
    }
  });

  it('does not answer for a server that accepts and stays silent, nor for a port nobody listens on', async () => {
    const silent = net.createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const target = new URL(url);
    try {
      target.host = `127.0.0.1:${(silent.address() as AddressInfo).port}`;
      const probe = databaseProbe(target.toString());
      const started = performance.now();
      expect(await probe.answers()).toBe(false);
      expect(performance.now() - started).toBeLessThan(2_000);
      probe.close();
      target.host = `127.0.0.1:${await freePort()}`;
      const nobody = databaseProbe(target.toString());
      expect(await nobody.answers()).toBe(false);
      nobody.close();
    } finally {
      silent.close();
    }
  });
});
