/**
 * The statement timeout behind a transaction-mode pooler (src/db/orm-config.ts): a setting of
 * each transaction, explicit or implicit, sent in the message of a statement that runs in it,
 * `select set_config('statement_timeout', …, true)`. PostgreSQL runs a message of several
 * statements as one implicit transaction, so the setting holds for the statement after it and
 * ends with it; after a `begin`, for the whole transaction. Nothing stays on the pooler's
 * server connections for the next client that borrows them.
 *
 * Only statements sent as plain text are headed (a statement with bind parameters is a message
 * of its own); a statement that ends a transaction or moves within one (commit, rollback,
 * savepoints) goes alone: in a failed transaction the setting would fail, and the rollback
 * with it. A message of several statements cannot hold what refuses to run in a transaction
 * block (CREATE DATABASE, VACUUM); nothing the service sends through its pool does.
 */
import type pg from 'pg';

/** Opens a transaction: the setting goes after it (`start transaction isolation level …` must come first). */
const OPENS = /^(begin|start\s+transaction)\b[^;]*$/i;
const CONTROLS = /^(commit|end|rollback|abort|savepoint|release|prepare\s+transaction)\b/i;

type Query = (config: unknown, values?: unknown, callback?: unknown) => unknown;

/** Makes `client` send `setting` in the message of every plain-text statement, as above. */
export function timeoutEachTransaction(client: pg.ClientBase, setting: string): void {
  const send = client.query.bind(client) as Query;
  const query: Query = (config, values, callback) => {
    const plain = typeof config === 'string' && callback === undefined && (values === undefined || (Array.isArray(values) && values.length === 0));
    if (!plain || CONTROLS.test(config.trim())) return send(config, values, callback);
    const opens = OPENS.test(config.trim());
    return (send(opens ? `${config};\n${setting}` : `${setting};\n${config}`) as Promise<pg.QueryResult | pg.QueryResult[]>).then((result) => {
      // One result per statement: the caller gets its own (or its several), not the setting's.
      const own = (Array.isArray(result) ? result : [result]).slice(opens ? 0 : 1, opens ? -1 : undefined);
      return own.length === 1 ? own[0] : own;
    });
  };
  (client as unknown as { query: Query }).query = query;
}
