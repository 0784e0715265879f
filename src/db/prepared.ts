/**
 * Prepared statements for the statements every request sends outside a transaction: the
 * token's lookup, the lists and single reads, the one-statement writes. The ORM sends each
 * statement as text with its values written in, which PostgreSQL parses and plans every time;
 * for these statements that was most of their cost (the token's lookup: 0.11–0.18 ms of
 * planning for 0.02 ms of execution; a one-statement write: 0.4 ms of 0.9 ms). Prepared once
 * per connection under a name derived from their text, they are only bound and run.
 *
 * A statement is written once, with `?` for its values as everywhere else. Inside a
 * transaction (whose connection only the ORM knows) it goes through the ORM as before. Either
 * way it is logged and counted as the ORM's statements are, and its errors are the ORM's.
 *
 * So that a text means the same both ways, a statement given here has `?` only as
 * placeholders: none in comments, `$$` bodies or escaped strings, no `??` or `?|` operators.
 * A prepared statement outlives a migration on its connection: one that changes the type of
 * a column such a statement returns needs the service restarted (it migrates on start).
 *
 * Behind a transaction-mode pooler, a statement prepared on one server connection is missing
 * from the next (26000) or already there (42P05): PgBouncer carries protocol-level prepared
 * statements only from 1.21 (`max_prepared_statements`). So a pool may go without them
 * (`usePreparedStatements(pool, false)`: DATABASE_PREPARED_STATEMENTS, off by default behind
 * a pooler), and its statements then go through the ORM as in a transaction. With them on, a
 * connection that answers 26000 or 42P05 is closed, never reused, and the statement (which
 * did not run: both come before execution) is sent again through the ORM.
 */
import { createHash } from 'node:crypto';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type pg from 'pg';
import { BATCHED } from './batching.js';
import { escapeLiteral } from './literals.js';

export interface Prepared {
  /** The statement as the ORM takes it, with `?` placeholders. */
  sql: string;
  /** The same with `$1`, `$2`, … */
  text: string;
  name: string;
}

const cache = new Map<string, Prepared>();

/** Pools whose statements are not prepared (behind a pooler). */
const unprepared = new WeakSet<object>();

/** Pools whose one-statement writes are not prepared in SQL (`executeAndCommit`): behind a pooler. */
const notSqlPrepared = new WeakSet<object>();

/**
 * Whether the statements sent through `pool` outside transactions are prepared (the default),
 * and whether a write's statement may be prepared in SQL (`PREPARE`, which a pooler carries to
 * no other server connection, not even PgBouncer's `max_prepared_statements`): by default
 * only where protocol-level statements are prepared and no pooler stands between.
 */
export function usePreparedStatements(pool: object, on: boolean, options: { inSql?: boolean } = {}): void {
  if (on) unprepared.delete(pool);
  else unprepared.add(pool);
  if (options.inSql ?? on) notSqlPrepared.delete(pool);
  else notSqlPrepared.add(pool);
}

/** The prepared form of a statement (kept by text: the set of texts is small and fixed). */
export function prepared(sql: string): Prepared {
  let statement = cache.get(sql);
  if (!statement) {
    let n = 0;
    // Placeholders are the `?` outside quoted literals and identifiers.
    const text = sql.replace(/'(?:[^']|'')*'|"(?:[^"]|"")*"|\?/g, (match) => (match === '?' ? `$${++n}` : match));
    statement = { sql, text, name: `s_${createHash('sha256').update(sql).digest('hex').slice(0, 24)}` };
    cache.set(sql, statement);
  }
  return statement;
}

interface ConnectionInternals {
  getNativeClient(): Promise<pg.Pool>;
  executeQuery<T>(query: string, run: () => Promise<T>, context?: Record<string, unknown>): Promise<T>;
}

/** Runs a statement, prepared when outside a transaction (and the pool prepares); returns its rows. */
export async function execute<T extends object = Record<string, unknown>>(em: SqlEntityManager, sql: string, params: unknown[] = []): Promise<T[]> {
  if (em.isInTransaction()) return em.execute<T[]>(sql, params);
  const connection = em.getConnection() as unknown as ConnectionInternals;
  const pool = await connection.getNativeClient();
  if (unprepared.has(pool)) return em.execute<T[]>(sql, params);
  const statement = prepared(sql);
  try {
    return await connection.executeQuery(statement.sql, async () => {
      // Not `pool.query`: it hands a client back with the error of its statement, and the pool
      // then closes the connection (and its prepared statements) on every lock timeout or
      // refused write. A connection is dropped only when the error is the connection's.
      const client = await pool.connect();
      let broken: Error | undefined;
      try {
        return (await client.query<T & pg.QueryResultRow>({ name: statement.name, text: statement.text, values: params })).rows;
      } catch (error) {
        if (!answeredByServer(error) || preparedElsewhere(error)) broken = error as Error;
        throw error;
      } finally {
        client.release(broken);
      }
    });
  } catch (error) {
    if (preparedElsewhere(error)) {
      warnPreparedElsewhere(error as Error);
      return em.execute<T[]>(sql, params);
    }
    throw em.getDriver().convertException(error as Error);
  }
}

/**
 * Runs a statement in a transaction of its own, prepared, then the statement `after` makes of
 * its rows (plain text, its result unread: a NOTIFY) sent with the `commit`, so that it
 * commits with the statement or not at all.
 *
 * Two messages: `begin` and the statement, then `after` and the commit (src/db/batching.ts).
 * A statement sent with parameters cannot share a message with `begin` (the extended protocol
 * is a message of its own), so this one is prepared in SQL (`PREPARE`, once per connection,
 * sent in front of its first use) and run by an `EXECUTE` with its values written in as
 * literals: planned once per connection like `execute`'s, and sent as text like the ORM's.
 * `first`, a statement whose result is not read (a lock; its values written in as literals),
 * goes in the first message too, between the `begin` and the statement, so that the statement's snapshot is
 * taken once it holds. Without prepared statements (behind a pooler) it is the ORM's
 * transaction, in two messages too. Each statement is logged and counted as the ORM's are
 * (the statement as written, not its EXECUTE).
 */
export async function executeAndCommit<T extends object = Record<string, unknown>>(
  em: SqlEntityManager,
  sql: string,
  params: unknown[],
  after: (rows: T[]) => string | null,
  first?: { sql: string; params: unknown[] },
): Promise<T[]> {
  const connection = em.getConnection() as unknown as ConnectionInternals;
  const pool = await connection.getNativeClient();
  const viaOrm = () =>
    em.fork().transactional(async (tx) => {
      if (first) await tx.execute(BATCHED + first.sql, first.params);
      const rows = await tx.execute<T[]>(sql, params);
      const then = after(rows);
      if (then) await tx.execute(BATCHED + then);
      return rows;
    });
  if (unprepared.has(pool) || notSqlPrepared.has(pool)) return viaOrm();
  const statement = prepared(sql);
  const name = `q${statement.name.slice(1)}`;
  // Written out before anything is queued on the connection: a value with no literal throws here.
  const execute = params.length ? `execute ${name}(${params.map(literalOf).join(', ')})` : `execute ${name}`;
  const firstText = first && withLiterals(first.sql, first.params);
  const client = await pool.connect();
  const names = sqlPrepared.get(client) ?? new Set<string>();
  sqlPrepared.set(client, names);
  const preparing = !names.has(name);
  let begun = false;
  let rows: T[];
  try {
    if (preparing) await client.query(`${BATCHED}prepare ${name} as ${statement.text}`);
    names.add(name);
    await connection.executeQuery('begin', () => client.query('begin'));
    begun = true;
    if (first) await connection.executeQuery(first.sql, () => client.query(BATCHED + firstText));
    rows = await connection.executeQuery(statement.sql, async () =>
      (await client.query<T & pg.QueryResultRow>(execute)).rows);
    const then = after(rows);
    if (then) await connection.executeQuery(then, () => client.query(BATCHED + then));
    await connection.executeQuery('commit', () => client.query('commit'));
  } catch (error) {
    // As in `execute`: the connection is dropped only when the error is the connection's, or
    // when the statement is missing from it or already there (a pooler gave another server
    // connection: the pool then stops preparing in SQL, and this write goes through the ORM).
    let broken = answeredByServer(error) && !preparedElsewhere(error) ? undefined : (error as Error);
    if (begun && !broken) {
      try {
        await client.query('rollback');
        // The PREPARE went in the message that failed: whether it ran is the server's to say.
        if (preparing && (await client.query('select 1 from pg_prepared_statements where name = $1', [name])).rowCount === 0) names.delete(name);
      } catch (rollbackError) {
        broken = rollbackError as Error;
      }
    }
    client.release(broken);
    if (preparedElsewhere(error)) {
      notSqlPrepared.add(pool);
      warnPreparedElsewhere(error as Error);
      return viaOrm();
    }
    throw em.getDriver().convertException(error as Error);
  }
  client.release();
  return rows;
}

/** `sql` with each `?` (outside quotes, as `prepared` finds them) replaced by its value's literal. */
function withLiterals(sql: string, params: readonly unknown[]): string {
  let n = 0;
  const text = sql.replace(/'(?:[^']|'')*'|"(?:[^"]|"")*"|\?/g, (match) => (match === '?' ? literalOf(params[n++]) : match));
  if (n !== params.length) throw new Error(`a statement has ${n} \`?\` for ${params.length} values`);
  return text;
}

/** The statements each connection holds from `PREPARE` (`executeAndCommit`). */
const sqlPrepared = new WeakMap<object, Set<string>>();

/**
 * A value written into an EXECUTE as a literal of no type, which PostgreSQL reads as the
 * parameter's type, as it reads a value sent apart (node-postgres sends them all as text).
 * Timestamps are timestamptz everywhere in the schema: an instant, in UTC.
 */
function literalOf(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (value instanceof Date) return escapeLiteral(value.toISOString());
  if (typeof value === 'string') return escapeLiteral(value);
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return escapeLiteral(String(value));
  throw new Error(`a statement's value of type ${Array.isArray(value) ? 'array' : typeof value} has no literal here: pass arrays as PostgreSQL array literals`);
}

/**
 * The server connection does not hold the statements `pg` prepared on this client (26000), or
 * holds one of that name already (42P05): a pooler hands out server connections per
 * transaction. Neither ran the statement.
 */
function preparedElsewhere(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return code === '26000' || code === '42P05';
}

let warned = false;

function warnPreparedElsewhere(error: Error): void {
  if (warned) return;
  warned = true;
  process.emitWarning(
    `A prepared statement was missing from its connection or already on it (${(error as { code?: string }).code}: ${error.message}): ` +
      'is DATABASE_URL a pooler in transaction mode? Set DATABASE_DIRECT_URL to PostgreSQL itself, or DATABASE_PREPARED_STATEMENTS=off. ' +
      'The connection was closed and the statement sent again unprepared.',
    'PreparedStatementWarning',
  );
}

/**
 * Whether PostgreSQL answered with an error and the connection is still usable: an error with
 * a SQLSTATE, other than those that end the session (class 08, connection exceptions; 57P0x,
 * the server shutting down or the session terminated).
 */
function answeredByServer(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !code.startsWith('08') && !/^57P0/.test(code);
}
