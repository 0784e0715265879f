/**
 * Fewer round trips for the same statements: a transaction's `begin` is not sent on its own
 * but in one message with the transaction's first statement on the same connection
 * (PostgreSQL's simple query protocol runs a message of several statements in order and stops
 * at the first error), as Npgsql has done for years.
 *
 * What a caller sees:
 * - `begin` (or `start transaction …`) is answered at once with an empty result. Its real
 *   outcome is the next statement's: if it fails, that statement fails with its error.
 * - A `rollback` while nothing of the transaction was sent yet sends nothing.
 * - Every other statement goes out as before, with whatever was waiting in front of it; one
 *   sent with parameters (or as a cursor) first sends what is waiting, on its own.
 *
 * This sits on each pooled `pg` client (the pool's `connect` event); statements counted by
 * the ORM's query log are unchanged, only messages are fewer (`roundTrips` counts them).
 *
 * A `transactionPrelude` (behind a transaction-mode pooler: the statement timeout, see
 * src/db/orm-config.ts) opens every transaction in the message that opens it: after a leading
 * `begin`, or, for a message sent outside a transaction, at its head: PostgreSQL runs a
 * message of several statements as one implicit transaction, so a setting made there with
 * `set_config(name, value, true)` holds for the statements after it and ends with them. Such
 * a message cannot hold what refuses to run in a transaction block (CREATE DATABASE, VACUUM,
 * CREATE INDEX CONCURRENTLY); nothing the service sends through its pool does.
 */
import type pg from 'pg';

/**
 * A statement that opens a transaction: `begin`, or `start transaction` with its isolation
 * level and access mode (what Kysely sends for `em.begin({ isolationLevel, readOnly })`);
 * alone, not the head of a text of several statements, whose results the caller reads.
 */
const OPENS = /^(begin|start\s+transaction)\b[^;]*$/i;

type Query = (...args: unknown[]) => unknown;

interface Waiting {
  /** Statements of this connection not sent yet, in order. */
  statements: string[];
  /** Whether a `begin` among them: a rollback then has nothing to undo on the server. */
  begun: boolean;
}

export interface BatchOptions {
  /** One statement that opens every transaction, explicit or implicit (see above). */
  transactionPrelude?: string;
}

/** Messages sent to PostgreSQL through batching clients, for tests and metrics. */
export const roundTrips = { count: 0 };

function emptyResult(command: string): pg.QueryResult {
  return { command, rowCount: null, oid: 0, rows: [], fields: [] } as unknown as pg.QueryResult;
}

function isPlainText(config: unknown, values: unknown): config is string {
  return typeof config === 'string' && (values === undefined || (Array.isArray(values) && values.length === 0));
}

/** Makes one `pg` client batch as described above. */
export function batchStatements(client: pg.PoolClient | pg.Client, options: BatchOptions = {}): void {
  const send = client.query.bind(client) as Query;
  const waiting: Waiting = { statements: [], begun: false };
  const prelude = options.transactionPrelude;
  // The connection's transaction status, as PostgreSQL reports it after each message: `I`
  // outside a transaction, `T` in one, `E` in a failed one. Statements are sent one message
  // after another (each caller waits for its answer), so it is current when a message is made.
  //
  // `pg` fails a statement as soon as its error arrives, which may be before the message that
  // says the new status (ReadyForQuery, often in the same packet, not always): a caller that
  // sends its `rollback` at once would be composed with the status from before its failed
  // message. So a message with a prelude waits until every message sent before it has been
  // answered with its status (`unanswered`), which costs nothing but on that error path.
  let status = 'I';
  let unanswered = 0;
  let answered: Array<() => void> = [];
  const settle = () => {
    for (const resume of answered.splice(0)) resume();
  };
  const connection = (client as unknown as { connection?: { on(event: string, listener: (message: { status: string }) => void): void } }).connection;
  connection?.on('readyForQuery', (message) => {
    status = message.status;
    unanswered = Math.max(0, unanswered - 1);
    if (unanswered === 0) settle();
  });
  // A connection that ends answers nothing more: what waits goes on (and fails on it).
  connection?.on('end', () => {
    unanswered = 0;
    settle();
  });
  const statusKnown = (): Promise<void> | undefined =>
    prelude !== undefined && unanswered > 0 ? new Promise<void>((resolve) => answered.push(resolve)) : undefined;
  const sendCounted = (...args: unknown[]): unknown => {
    unanswered += 1;
    return send(...args);
  };

  /**
   * One message of `statements`, with the prelude where it opens a transaction; `lead` is how
   * many results come before the last statement's.
   */
  const compose = (statements: string[]): { text: string; lead: number } => {
    let all = statements;
    if (prelude !== undefined && status === 'I') {
      // After the statement that opens the transaction: `start transaction isolation level …`
      // must come before any query of its transaction.
      const at = OPENS.test(statements[0]!) ? 1 : 0;
      all = [...statements.slice(0, at), prelude, ...statements.slice(at)];
    }
    return { text: all.join(';\n'), lead: all.length - 1 };
  };

  /** Sends what waits, on its own; resolves when it ran (rejects with its error). */
  const sendWaiting = (): Promise<unknown> => {
    if (waiting.statements.length === 0) return Promise.resolve();
    const { text } = compose(waiting.statements);
    waiting.statements = [];
    waiting.begun = false;
    roundTrips.count++;
    return sendCounted(text) as Promise<unknown>;
  };

  const flush = (): void => {
    // An error also fails the statement `pg` sends behind it (the server has aborted the
    // transaction), so it is not lost; here it would be reported twice.
    sendWaiting().catch(() => undefined);
  };

  const query = (config: unknown, values?: unknown, callback?: unknown): unknown => {
    if (typeof callback === 'function' || typeof values === 'function' || typeof config !== 'string') {
      // A cursor or a callback: `pg` answers it synchronously with an object, so what waits
      // goes out first on its own (queued in order by `pg`).
      flush();
      roundTrips.count++;
      return sendCounted(config, values, callback);
    }
    if (!isPlainText(config, values)) {
      // Bind parameters need a message of their own: what waits goes first, and its failure
      // is this statement's failure.
      const before = sendWaiting();
      roundTrips.count++;
      return before.then(() => sendCounted(config, values));
    }
    const sql = config.trim();
    if (OPENS.test(sql)) {
      waiting.statements.push(sql);
      waiting.begun = true;
      return Promise.resolve(emptyResult('BEGIN'));
    }
    if (/^rollback$/i.test(sql) && waiting.begun) {
      waiting.statements = [];
      waiting.begun = false;
      return Promise.resolve(emptyResult('ROLLBACK'));
    }
    const statements = [...waiting.statements, sql];
    waiting.statements = [];
    waiting.begun = false;
    roundTrips.count++;
    const sendNow = () => {
      const { text, lead } = compose(statements);
      if (lead === 0) return sendCounted(config, values);
      return (sendCounted(text) as Promise<pg.QueryResult | pg.QueryResult[]>).then((result) => {
        // One result per statement: the caller gets its own statement's (or its several).
        const own = Array.isArray(result) ? result.slice(lead) : [result];
        return own.length === 1 ? own[0] : own;
      });
    };
    const known = statusKnown();
    return known ? known.then(sendNow) : sendNow();
  };
  (client as unknown as { query: typeof query }).query = query;
  (client as unknown as Discarding).discardWaiting = () => {
    const left = waiting.statements.length;
    waiting.statements = [];
    waiting.begun = false;
    return left;
  };
}

interface Discarding {
  /** Drops what waits, unsent; returns how many statements that was. */
  discardWaiting?: () => number;
}

/**
 * Makes every client of a pool batch, from its first statement on. A connection goes back to
 * the pool only after its commit or rollback, so nothing should wait on it then; if something
 * does (a bug), it is dropped, never sent ahead of the next borrower's statements, and logged.
 */
export function batchPool(pool: pg.Pool, onLeftover?: (statements: number) => void, options: BatchOptions = {}): void {
  pool.on('connect', (client) => batchStatements(client, options));
  pool.on('release', (_error: unknown, client: pg.PoolClient) => {
    const left = (client as unknown as Discarding).discardWaiting?.() ?? 0;
    if (left > 0) onLeftover?.(left);
  });
}
