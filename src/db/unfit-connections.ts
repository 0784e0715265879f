/**
 * A pooled connection that saw its server go, or found it read-only, is closed when it is
 * released instead of going back to the pool (API-CONTRACT.md §17). After a failover the old
 * primary may come back as a standby, and a proxy may still lead a connection made before the
 * switch to it (or, for a moment, a new one): each statement there fails with 25006, and a pool
 * that kept the connection would hand it to request after request, each one a 503, long after
 * a new primary took over. A connection whose server was shut down or crashed (57P01, 57P02,
 * a reset) is already unusable, and `pg` drops it itself; this covers the ones that still
 * answer.
 *
 * Each connection's `query` is watched (outermost, after the pooler's statement timeout and
 * prepared statements wrapped it): a failure that `isConnectionUnfit` names marks it, and on its release
 * (`pg-pool` emits `release` before it decides where the connection goes) a marked connection
 * is ended, which `pg-pool` sees (`client._ending`) and so removes it rather than keep it idle.
 */
import type pg from 'pg';
import { isConnectionUnfit } from '../core/failures.js';

const unfit = new WeakSet<object>();

type Callback = (error: unknown, result?: unknown) => void;

/** Whether this connection saw a failure that makes it unfit (for tests and the pool's own checks). */
export function isMarkedUnfit(client: object): boolean {
  return unfit.has(client);
}

export function discardUnfitConnections(pool: pg.Pool, onDiscard?: (error: unknown) => void): void {
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    const mark = (error: unknown) => {
      if (!unfit.has(client) && isConnectionUnfit(error)) {
        unfit.add(client);
        onDiscard?.(error);
      }
    };
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const last = args.length - 1;
      if (typeof args[last] === 'function') {
        const callback = args[last] as Callback;
        args[last] = (error: unknown, result?: unknown) => {
          if (error) mark(error);
          callback(error, result);
        };
      }
      const result = query(...args);
      if (result && typeof (result as Promise<unknown>).then === 'function') {
        // A branch of its own: the caller still gets the rejection.
        (result as Promise<unknown>).then(undefined, mark);
      }
      return result;
    };
  });
  pool.on('release', (_error: unknown, client: pg.PoolClient) => {
    if (unfit.has(client)) client.end().catch(() => undefined);
  });
}
