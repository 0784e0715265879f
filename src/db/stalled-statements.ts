/**
 * A database that stops answering without going away (its host frozen, the network cut with
 * no reset) fails no statement: each waits for the client's `query_timeout` (25 s), each new
 * connection for its connect timeout (5 s). API-CONTRACT.md §17 wants 503 fast instead.
 *
 * So every statement of a pooled connection is stamped when it is sent (`stampStatements`,
 * on every pool), and a watch (`watchStalls`) looks every STALL_CHECK_MS for one older than
 * STALLED_MS, or a connection that has been opening that long. Then it asks the database
 * itself, on a connection of its own kept open for this (no log-in, no pool, no pooler: the
 * direct URL): no answer within PROBE_TIMEOUT_MS, or no server there, and the database is
 * unreachable. The connections that are still stalled then are cut (their statements fail as
 * a server gone does: 503), and `onUnreachable` starts the outage (src/db/database-role.ts:
 * requests are answered 503 at once until a probe reaches the database again). An answer
 * means a slow statement (a lock wait, a long read) on a database that serves: nothing is cut.
 *
 * It sees the database, not a pooler in front of it: a pooler that stops answering is not
 * found this way (its own timeouts apply). The probe is one more connection per process.
 */
import pg from 'pg';
import { answeredByServer } from '../core/failures.js';

export const STALLED_MS = 1_000;
const STALL_CHECK_MS = 250;
const PROBE_TIMEOUT_MS = 1_000;

type Client = pg.Client & { _connecting?: boolean; connection?: { stream?: { destroy(): void } } };

/** When each connection's oldest unanswered statement was sent, and how many it has. */
const pending = new WeakMap<pg.ClientBase, { since: number; count: number }>();

type Query = (...args: unknown[]) => unknown;

/** Stamps the statements of every connection of `pool` (see above). */
export function stampStatements(pool: pg.Pool): void {
  pool.on('connect', (client) => {
    const send = client.query.bind(client) as Query;
    (client as unknown as { query: Query }).query = (...args: unknown[]) => {
      const entry = pending.get(client) ?? { since: performance.now(), count: 0 };
      let settled = false;
      const settle = () => {
        if (settled) return;
        settled = true;
        entry.count -= 1;
        // The next statement queued on this connection is sent now.
        if (entry.count === 0) pending.delete(client);
        else entry.since = performance.now();
      };
      // A statement answered through a callback (pg-pool's `query`), or as a promise.
      const last = args.length - 1;
      const callback = args[last];
      if (typeof callback === 'function') args[last] = (...results: unknown[]) => (settle(), callback(...results));
      const sent = send(...args);
      if (sent instanceof Promise) sent.then(settle, settle);
      else if (typeof callback !== 'function') return sent; // a cursor or a stream: its own reads
      entry.count += 1;
      pending.set(client, entry);
      return sent;
    };
  });
}

/** A connection of its own to `url`, kept open: `answers()` says whether a statement on it is answered within PROBE_TIMEOUT_MS. */
export function databaseProbe(url: string): { answers(): Promise<boolean>; close(): void } {
  let open: { client: Client; connected: Promise<unknown> } | undefined;
  const drop = (client: Client | undefined) => {
    if (!client || open?.client !== client) return;
    open = undefined;
    client.connection?.stream?.destroy();
    client.end().catch(() => undefined);
  };
  return {
    async answers() {
      if (!open) {
        const client = new pg.Client({ connectionString: url }) as Client;
        client.on('error', () => drop(client));
        // Never what keeps the process alive.
        open = { client, connected: client.connect().then(() => (client.connection as unknown as { stream?: { unref?(): void } }).stream?.unref?.()) };
      }
      const { client, connected } = open;
      const asked = connected.then(() => client.query('select 1')).then(
        () => true,
        // Refused with a SQLSTATE of its own (too many clients, a password): it is there, and answers.
        (error: unknown) => answeredByServer(error),
      );
      let timer: NodeJS.Timeout | undefined;
      // The answer may be read in the same turn of the event loop as the timer fires (a busy
      // process): it is looked for once more, after the loop has read its sockets.
      const late = new Promise<false>((resolve) => (timer = setTimeout(() => setImmediate(() => resolve(false)), PROBE_TIMEOUT_MS)));
      const answered = await Promise.race([asked, late]);
      clearTimeout(timer);
      if (!answered) drop(client);
      return answered;
    },
    close: () => drop(open?.client),
  };
}

/** Watches `pool` for stalled statements (see above) until the returned function is called. */
export function watchStalls(pool: pg.Pool, options: { answers: () => Promise<boolean>; onUnreachable: () => void }): () => void {
  let asking = false;
  let stopped = false;
  let answeredAt = Number.NEGATIVE_INFINITY;
  /** Connections seen opening, since when. */
  const opening = new WeakMap<Client, number>();
  const stalled = (now: number): Client[] => {
    // Read again at every look: the pool replaces its list when it removes a connection.
    const clients = (pool as unknown as { _clients: Client[] })._clients;
    return clients.filter((client) => {
      if (client._connecting && !opening.has(client)) opening.set(client, now);
      const since = client._connecting ? opening.get(client)! : pending.get(client)?.since;
      return since !== undefined && now - since > STALLED_MS;
    });
  };
  const timer = setInterval(() => {
    const now = performance.now();
    if (asking || stopped || now - answeredAt < STALLED_MS || stalled(now).length === 0) return;
    asking = true;
    options
      .answers()
      .then((answered) => {
        if (answered) {
          answeredAt = performance.now();
          return;
        }
        if (stopped) return;
        // What is still stalled now: a connection that moved on to another statement is not cut.
        for (const client of stalled(performance.now())) client.connection?.stream?.destroy();
        options.onUnreachable();
      })
      .catch(() => undefined)
      .finally(() => {
        asking = false;
      });
  }, STALL_CHECK_MS);
  timer.unref();
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
