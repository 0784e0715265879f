/**
 * Closing the ORM while a statement is still opening a new connection of the pool: the close
 * finishes, the statement fails instead of hanging, and no connection is left checked out.
 * (A stop or a test app's close used to wait forever here: the connection that finished
 * opening after `pool.end()` was handed to the ORM, which failed before using it and never
 * gave it back, so `pool.end()` waited for it; see src/db/pool-ending.ts.) Streams, their
 * leases and the requests of a client that hangs up all run into this when a stop comes while
 * they are opening connections, as after a database outage, when the pool has none left.
 */
import type pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

let app: TestApp | undefined;
// The test closes the ORM itself; this closes the rest (the ORM's close again is a no-op).
afterAll(() => app?.close());

/** The promise's outcome, or 'no answer' once `ms` have passed. */
function within<T>(ms: number, promise: Promise<T>): Promise<T | 'no answer'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'no answer'>((resolve) => (timer = setTimeout(() => resolve('no answer'), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

describe('closing the ORM while a statement opens a new connection', () => {
  it('finishes, fails the statement, and leaves no connection checked out', async () => {
    app = await startTestApp();
    const pool = (await (app.orm.em.getConnection() as unknown as { getNativeClient(): Promise<pg.Pool> }).getNativeClient());
    // Every open connection taken, so that the next statement has to open one of its own.
    const held: pg.PoolClient[] = [];
    while (pool.idleCount > 0) held.push(await pool.connect());
    const opened = pool.totalCount;
    const statement = app.orm.em.fork().execute('select 1').then(
      () => 'ran',
      (error: Error) => error.message,
    );
    await eventually(() => pool.totalCount > opened, { interval: 0, message: 'the statement is opening a connection' });
    for (const client of held) client.release();

    // The connection finishes opening after the pool began to end.
    const closing = app.orm.close(true);
    expect(await within(5_000, closing.then(() => 'closed')), 'the pool waited for a connection nobody gives back').toBe('closed');
    expect(await within(5_000, statement)).toMatch(/after calling end on the pool/);
    expect({ total: pool.totalCount, waiting: pool.waitingCount }).toEqual({ total: 0, waiting: 0 });
  });
});
