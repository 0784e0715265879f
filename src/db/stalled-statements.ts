/**
 * A database that stops answering without going away (its host frozen, the network cut with
 * no reset) fails no statement: each waits for the client's `query_timeout` (25 s), each new
 * connection for its connect timeout (5 s). API-CONTRACT.md §17 wants 503 fast instead.
 *
 * So every statement of a pooled connection is stamped when it is sent (`stampStatements`,
 * on every pool), and a watch (`watchStalls`) looks every STALL_CHECK_MS for one older than
 * STALLED_MS. Then it asks the database itself, on a connection of its own, past the pool and
 * past a pooler (the direct URL): no answer within PROBE_TIMEOUT_MS, or the server gone, and
 * the database is unreachable: the connections whose statement is older than STALLED_MS, and
 * those still connecting, are cut (their statements fail as a server gone does: 503), and
 * `onUnreachable` starts the outage (src/db/database-role.ts: requests are answered 503 at
 * once until a probe reaches the database again). An answer means a slow statement (a lock
 * wait, a long read) on a database that serves, and nothing is cut.
 */
import pg from 'pg';
import { isServerGone } from '../core/failures.js';

export const STALLED_MS = 1_000;
const STALL_CHECK_MS = 250;
const PROBE_TIMEOUT_MS = 1_000;

/** When each connection's oldest unanswered statement was sent, and how many it has. */
const pending = new WeakMap<pg.ClientBase, { since: number; count: number }>();

type Query = (...args: unknown[]) => unknown;

/** Stamps the statements of every connection of `pool` (see above). */
export function stampStatements(pool: pg.Pool): void {
  pool.on('connect', (client) => {
    const send = client.query.bind(client) as Query;
    (client as unknown as { query: Query }).query = (...args: unknown[]) => {
      const sent = send(...args);
      if (!(sent instanceof Promise)) return sent;
      const entry = pending.get(client) ?? { since: performance.now(), count: 0 };
      entry.count += 1;
      pending.set(client, entry);
      const settle = () => {
        entry.count -= 1;
        if (entry.count === 0) pending.delete(client);
      };
      sent.then(settle, settle);
      return sent;
    };
  });
}

interface PoolInternals {
  _clients: Array<pg.ClientBase & { _connecting?: boolean; connection?: { stream?: { destroy(): void } } }>;
}

/** Whether the database answers a statement on a new connection of its own within PROBE_TIMEOUT_MS. */
export async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url });
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), PROBE_TIMEOUT_MS)));
  const asked = client
    .connect()
    .then(() => client.query('select 1'))
    .then(
      () => true,
      // Refused for another reason (too many clients, a password): it is there, and answers.
      (error: unknown) => !isServerGone(error),
    );
  try {
    return await Promise.race([asked, late]);
  } finally {
    clearTimeout(timer);
    (client as unknown as PoolInternals['_clients'][number]).connection?.stream?.destroy();
    client.end().catch(() => undefined);
  }
}

/** Watches `pool` for stalled statements (see above) until the returned function is called. */
export function watchStalls(pool: pg.Pool, options: { probeUrl: string; onUnreachable: () => void; probe?: (url: string) => Promise<boolean> }): () => void {
  const probe = options.probe ?? answers;
  let asking = false;
  let answeredAt = Number.NEGATIVE_INFINITY;
  const timer = setInterval(() => {
    const now = performance.now();
    const clients = (pool as unknown as PoolInternals)._clients;
    const stalled = clients.filter((client) => now - (pending.get(client)?.since ?? now) > STALLED_MS);
    if (asking || stalled.length === 0 || now - answeredAt < STALLED_MS) return;
    asking = true;
    void probe(options.probeUrl).then((answered) => {
      asking = false;
      if (answered) {
        answeredAt = performance.now();
        return;
      }
      for (const client of clients) {
        if (stalled.includes(client) || client._connecting) client.connection?.stream?.destroy();
      }
      options.onUnreachable();
    });
  }, STALL_CHECK_MS);
  timer.unref();
  return () => clearInterval(timer);
}
