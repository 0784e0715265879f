/**
 * The leases of open event streams (the table and its function:
 * src/db/migrations/Migration20261124000000_event_stream_leases.ts), which make the limit of
 * streams per token hold across every process and instance on one database. Each call is one
 * statement on the pooled connections, outside any transaction, with no session state and no
 * named prepared statement: they work the same through a pooler in transaction mode.
 *
 * - `take`: a lease for a new stream, or false when the token already holds `max` live ones;
 * - `renew`: pushes back the expiry of a process's leases, all of them in one statement, and
 *   says which still existed (a lease pruned after expiring is gone: its stream must end);
 * - `release`: deletes the leases of closed streams;
 * - `pruneStreamLeases`: housekeeping, the expired leases of processes that died.
 *
 * Expiry is counted on the database's clock, which every instance shares. A modification of a
 * table sharded by user may not call the clock (each node it reaches would read its own), so
 * the renewal and the prune read it first, in a statement of their own, and pass it on: two
 * statements every few seconds per process, never on a request. The open reads it once inside
 * its function.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { idArray } from '../db/sql-fragments.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Lease ids as one PostgreSQL array literal (MikroORM would expand a JS array into a list of parameters). */
function uuidArray(leases: readonly Lease[]): string {
  for (const lease of leases) if (!UUID.test(lease.id)) throw new Error(`not a lease id: ${lease.id}`);
  return `{${leases.map((l) => l.id).join(',')}}`;
}

const userIds = (leases: readonly Lease[]) => idArray([...new Set(leases.map((l) => l.userId))]);

export interface Lease {
  /** A fresh UUID. */
  id: string;
  userId: number;
  tokenHash: string;
}

export interface StreamLeases {
  /** Takes a lease valid `ttlMs` unless the token holds `max` live ones already. */
  take(lease: Lease, max: number, ttlMs: number): Promise<boolean>;
  /** Renews the leases that still exist for `ttlMs`; resolves with their ids. */
  renew(leases: readonly Lease[], ttlMs: number): Promise<Set<string>>;
  release(leases: readonly Lease[]): Promise<void>;
}

/** The leases in the database `em()` reaches (a fresh entity manager for each statement). */
export function streamLeases(em: () => SqlEntityManager): StreamLeases {
  return {
    async take(lease, max, ttlMs) {
      const [row] = await em().execute<Array<{ taken: boolean }>>(
        'select take_event_stream_lease(?, ?::text, ?::uuid, ?::integer, ?::integer) as taken',
        [lease.userId, lease.tokenHash, lease.id, max, Math.ceil(ttlMs)],
      );
      return row?.taken === true;
    },

    async renew(leases, ttlMs) {
      if (leases.length === 0) return new Set();
      const now = await databaseNow(em());
      const rows = await em().execute<Array<{ id: string }>>(
        `update event_stream_leases set expires_at = ?::timestamptz
          where user_id = any(?::bigint[]) and id = any(?::uuid[])
          returning id`,
        [new Date(now.getTime() + Math.ceil(ttlMs)), userIds(leases), uuidArray(leases)],
      );
      return new Set(rows.map((r) => r.id));
    },

    async release(leases) {
      if (leases.length === 0) return;
      await em().execute('delete from event_stream_leases where user_id = any(?::bigint[]) and id = any(?::uuid[])', [
        userIds(leases),
        uuidArray(leases),
      ]);
    },
  };
}

/** Deletes the leases that expired (streams of processes that died without closing them). */
export async function pruneStreamLeases(em: SqlEntityManager): Promise<number> {
  const now = await databaseNow(em);
  const result = await em.execute<{ affectedRows: number }>('delete from event_stream_leases where expires_at < ?::timestamptz', [now], 'run');
  return result.affectedRows;
}

/** The database's clock, read by a statement that reads no table (the coordinator's, sharded). */
async function databaseNow(em: SqlEntityManager): Promise<Date> {
  const [row] = await em.execute<Array<{ ms: number }>>('select extract(epoch from clock_timestamp())::float8 * 1000 as ms');
  return new Date(row!.ms);
}
