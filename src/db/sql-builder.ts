/**
 * Kysely, for composing SQL as values: statements built here are compiled, never executed, by
 * this instance (the write functions are installed as text: src/writes/write-functions.ts).
 * Tables and columns come typed from the entities (`InferKyselyDB`), so a renamed column fails
 * the typecheck, not a request.
 *
 * A statement of a write function references the function's arguments and variables by name
 * (`v('p_user')`), never a value: `compileStatement` refuses one that would carry a parameter,
 * so no value is ever written into the text of SQL.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { executePrepared, named } from './prepared.js';
import { DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler, sql, type Compilable, type RawBuilder } from 'kysely';

export { sql, type Kysely, type RawBuilder } from 'kysely';

/** A Kysely that only compiles (PostgreSQL's dialect, no connection). */
export function compileOnly<DB>(): Kysely<DB> {
  return new Kysely<DB>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (db) => new PostgresIntrospector(db),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  });
}

/** A PL/pgSQL argument or variable, by name (`p_user`, `v_task.state`), as an expression of type T. */
export function v<T = unknown>(name: string): RawBuilder<T> {
  if (!/^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$/.test(name)) throw new Error(`not a variable name: ${name}`);
  return sql.raw<T>(name);
}

/** A statement's text, for a function body: refused if it would bind any value. */
export function compileStatement(
  query: Compilable<unknown> | RawBuilder<unknown>,
  compiler: Kysely<any>): string {
  // A query builder compiles itself; a raw builder needs the instance (an argument the other ignores).
  const compiled = (query as RawBuilder<unknown>).compile(compiler);
  if (compiled.parameters.length > 0) {
    throw new Error(`a write function's statement binds values (${compiled.parameters.length}); reference arguments by name: ${compiled.sql}`);
  }
  return compiled.sql;
}

/**
 * Runs a query composed with Kysely, its values bound as parameters: outside a transaction as
 * a prepared statement (src/db/prepared.ts; the write path's call and its NOTIFY run on every
 * write), else on the entity manager's connection (its transaction, when one is open) or on
 * `on` (one connection held for several queries), logged as MikroORM logs its own statements
 * (the text with its placeholders), so every statement of a request is seen in one log.
 */
export async function run<R extends object>(em: SqlEntityManager, query: RawBuilder<R> | Compilable<R>, on?: Kysely<any>): Promise<R[]> {
  const kysely = on ?? em.getKysely();
  const compiled = (query as RawBuilder<R>).compile(kysely);
  const unnamed = async () => {
    const started = Date.now();
    try {
      const { rows } = await kysely.executeQuery(compiled);
      em.config.getLogger().logQuery({ query: compiled.sql, took: Date.now() - started, level: 'info' });
      return rows;
    } catch (error) {
      em.config.getLogger().logQuery({ query: compiled.sql, took: Date.now() - started, level: 'error' });
      throw error;
    }
  };
  return on ? unnamed() : executePrepared<R>(em, named(compiled.sql), compiled.parameters, unnamed);
}
