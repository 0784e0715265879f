/**
 * A write's statement is prepared in SQL (`PREPARE`, then `EXECUTE` in one message with its
 * `begin`: src/db/prepared.ts `executeAndCommit`). A pooler in transaction mode hands the next
 * transaction another server connection, which does not hold that statement (26000) or holds
 * one of its name already (42P05): behind a pooler the service does not prepare in SQL, and a
 * pool that does (a pooler not declared as one) closes the connection, warns once, stops
 * preparing in SQL, and runs the write through the ORM: every write is answered.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MikroORM } from '@mikro-orm/postgresql';
import { openOrm } from '../../src/app/orm.js';
import { executeAndCommit, usePreparedStatements } from '../../src/db/prepared.js';
import { pooledTierSkip, startPooledDatabase, type PooledDatabase } from '../helpers/pooled-database.js';

const STATEMENTS = ['select ?::int as n', 'select ?::int + 0 as n', 'select ?::int * 1 as n'];

async function writeMany(orm: MikroORM, count: number): Promise<PromiseSettledResult<number>[]> {
  return Promise.allSettled(
    Array.from({ length: count }, async (_, i) => (await executeAndCommit<{ n: number }>(orm.em.fork(), STATEMENTS[i % 3]!, [i], () => null))[0]!.n),
  );
}

describe.skipIf(pooledTierSkip)('statements prepared in SQL behind PgBouncer in transaction mode', () => {
  let pooled: PooledDatabase;
  let urls: { pooledUrl: string; directUrl: string };
  beforeAll(async () => {
    pooled = await startPooledDatabase({ bouncer: { default_pool_size: 2 } });
    urls = await pooled.createDatabase();
  });
  afterAll(async () => {
    await pooled?.stop();
  });

  it('are not used behind a declared pooler, even with prepared statements forced on: 300 writes, all answered', async () => {
    const orm = await openOrm(urls.pooledUrl, { migrate: false, poolSize: 8, directUrl: urls.directUrl, preparedStatements: true });
    try {
      const results = await writeMany(orm, 300);
      expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
      expect(results.map((r) => (r as PromiseFulfilledResult<number>).value)).toEqual(Array.from({ length: 300 }, (_, i) => i));
    } finally {
      await orm.close(true);
    }
  });

  it('on a pool that prepares in SQL through the pooler, fall back to the ORM: 300 writes, all answered, one warning', async () => {
    const orm = await openOrm(urls.pooledUrl, { migrate: false, poolSize: 8, directUrl: urls.directUrl, preparedStatements: true });
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on('warning', onWarning);
    try {
      const pool = await (orm.em.getConnection() as unknown as { getNativeClient(): Promise<object> }).getNativeClient();
      usePreparedStatements(pool, true, { inSql: true }); // as if the pooler were PostgreSQL itself
      const results = await writeMany(orm, 300);
      expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
      expect(results.map((r) => (r as PromiseFulfilledResult<number>).value)).toEqual(Array.from({ length: 300 }, (_, i) => i));
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((name) => name === 'PreparedStatementWarning').length).toBeLessThanOrEqual(1);
    } finally {
      process.off('warning', onWarning);
      await orm.close(true);
    }
  });
});
