/**
 * Prepared statements for what requests send outside a transaction (the token's lookup, reads, a
 * write's call and its NOTIFY): the ORM sends text with values written in, which PostgreSQL plans
 * every time (the token's lookup: 0.11–0.18 ms of planning for 0.02 ms of execution). Prepared
 * once per connection under a name from their text, they are only bound and run. Inside a
 * transaction a statement goes through the ORM; either way it is logged, counted and its errors
 * converted as the ORM's. A statement here has `?` only as placeholders (none in comments, `$$`
 * bodies, strings or operators).
 *
 * Behind a transaction-mode pooler a prepared statement may be missing (26000) or already there
 * (42P05): a pool may go without them (`usePreparedStatements(pool, false)`,
 * DATABASE_PREPARED_STATEMENTS), and with them on, a connection that answers either is closed and
 * the statement, which did not run, is sent again through the ORM.
 */
import { createHash } from 'node:crypto';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type pg from 'pg';
import { answeredByServer } from '../core/failures.js';

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

/** Whether the statements sent through `pool` outside transactions are prepared (the default). */
export function usePreparedStatements(pool: object, on: boolean): void {
  if (on) unprepared.delete(pool);
  else unprepared.add(pool);
}

/** The prepared form of a statement (kept by text: the set of texts is small and fixed). */
export function prepared(sql: string): Prepared {
  let statement = cache.get(sql);
  if (!statement) {
    let n = 0;
    // Placeholders are the `?` outside quoted literals and identifiers.
    const text = sql.replace(/'(?:[^']|'')*'|"(?:[^"]|"")*"|\?/g, (match) => (match === '?' ? `$${++n}` : match));
    statement = named(text, sql);
    cache.set(sql, statement);
  }
  return statement;
}

const byText = new Map<string, Prepared>();

/** A statement already written with `$1`, `$2`, … (as Kysely compiles them), under its name (kept by text, as above). */
export function named(text: string, sql = text): Prepared {
  let statement = byText.get(text);
  if (!statement) {
    statement = { sql, text, name: `s_${createHash('sha256').update(text).digest('hex').slice(0, 24)}` };
    byText.set(text, statement);
  }
  return statement;
}

interface ConnectionInternals {
  getNativeClient(): Promise<pg.Pool>;
  executeQuery<T>(query: string, run: () => Promise<T>, context?: Record<string, unknown>): Promise<T>;
}

/** Runs a statement, prepared when outside a transaction (and the pool prepares); returns its rows. */
export async function execute<T extends object = Record<string, unknown>>(em: SqlEntityManager, sql: string, params: unknown[] = []): Promise<T[]> {
  return executePrepared<T>(em, prepared(sql), params, () => em.execute<T[]>(sql, params));
}

/**
 * Runs `statement` as a prepared statement on a connection of the entity manager's pool, or,
 * inside a transaction or when the pool does not prepare, by `otherwise` (the same statement,
 * sent as the caller sends it in a transaction).
 */
export async function executePrepared<T extends object>(em: SqlEntityManager, statement: Prepared, params: readonly unknown[], otherwise: () => Promise<T[]>): Promise<T[]> {
  if (em.isInTransaction()) return otherwise();
  const connection = em.getConnection() as unknown as ConnectionInternals;
  const pool = await connection.getNativeClient();
  if (unprepared.has(pool)) return otherwise();
  try {
    return await connection.executeQuery(statement.sql, async () => {
      // Not `pool.query`: it hands a client back with the error of its statement, and the pool
      // then closes the connection (and its prepared statements) on every lock timeout or
      // refused write. A connection is dropped only when the error is the connection's.
      const client = await pool.connect();
      let broken: Error | undefined;
      try {
        return (await client.query<T & pg.QueryResultRow>({ name: statement.name, text: statement.text, values: params as unknown[] })).rows;
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
      return otherwise();
    }
    throw em.getDriver().convertException(error as Error);
  }
}

/** A pooler's server connection lacks the statement (26000) or has one of its name (42P05); neither ran it. */
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
