/**
 * A connection that finishes opening after its pool began to end goes back to the pool (which
 * then closes it) instead of to its caller, who gets the error `pg-pool` gives a `connect()`
 * asked after `end()`. The pool hands out no connection once it ends: no caller can lose one.
 *
 * Without this, such a connection was lost for good, and with it the stop: `pg-pool` hands a
 * connection that was opening when `end()` was called to its caller, and `end()` waits until
 * it is released. The ORM's caller is kysely's `PostgresDriver.acquireConnection` (kysely
 * 0.29), which, for a connection it has not seen yet, reads `this.#pool.Client` and
 * `this.#pool.options` after `await pool.connect()`; its `destroy()` (the ORM's close) has set
 * `#pool` to undefined by then, so it throws a TypeError ("Cannot read properties of
 * undefined (reading 'Client')") and never releases the connection it holds. `pool.end()`,
 * and so `orm.close()` and a graceful stop, then wait forever, the connection idle on the
 * server after its on-connect `set statement_timeout` only. Any close that comes while
 * statements open connections hits it: streams, their leases and requests still running when
 * a stop begins, above all after a database outage, when the pool has no connection left and
 * every statement opens one.
 *
 * The fault is kysely's: `acquireConnection` releases nothing when what follows its
 * `pool.connect()` throws (this TypeError, or its `onCreateConnection` and
 * `onReserveConnection` hooks). No issue names it yet; kysely-org/kysely#459 reports the same
 * TypeError, closed without a cause found. This can go once kysely releases the connection.
 */
import type pg from 'pg';

type Done = (release?: unknown) => void;
type ConnectCallback = (error: Error | undefined, client: pg.PoolClient | undefined, done: Done) => void;

/** pg-pool's own words for a `connect()` after `end()`. */
const ENDED = 'Cannot use a pool after calling end on the pool';

export function releaseConnectionsOpenedWhileEnding(pool: pg.Pool): void {
  const connect = pool.connect.bind(pool) as unknown as (callback?: ConnectCallback) => Promise<pg.PoolClient> | undefined;
  const refused = (client: pg.PoolClient): Error => {
    // Released while the pool ends: pg-pool closes it, and `end()` stops waiting for it.
    client.release();
    return new Error(ENDED);
  };
  (pool as unknown as { connect: typeof connect }).connect = (callback) => {
    if (callback) {
      // The form `pool.query` uses.
      return connect((error, client, done) => {
        if (!error && client && pool.ending) callback(refused(client), undefined, () => undefined);
        else callback(error, client, done);
      });
    }
    return connect()!.then((client) => {
      if (pool.ending) throw refused(client);
      return client;
    });
  };
}
