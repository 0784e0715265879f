/**
 * The one MikroORM configuration, used by the service, the tests, and the MikroORM CLI
 * (through mikro-orm.config.ts at the root). The entities are handed in: the composition
 * root (src/app/orm.ts) lists them, so this layer imports no feature.
 */
import { DefaultLogger, defineConfig, type LogContext, type Options } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import { migrationsList } from './migrations/index.js';
import type pg from 'pg';
import { batchPool } from './batching.js';

export interface OrmSettings {
  clientUrl: string;
  /** The entity classes (src/app/orm.ts). */
  entities: NonNullable<Options['entities']>;
  /** Overrides the database named in clientUrl. */
  dbName?: string;
  /** Connections this process may hold. */
  poolSize?: number;
  /** Called with every SQL statement the ORM sends (for query-count tests and benchmarks). */
  onQuery?: (sql: string) => void;
  /** Called once for every SQL statement the ORM sends, without formatting it (metrics). */
  onStatement?: () => void;
}

/** The ORM's own logger, also telling `onStatement` of every statement sent. */
function countingLogger(onStatement: () => void): NonNullable<Options['loggerFactory']> {
  class CountingLogger extends DefaultLogger {
    override logQuery(context: { query: string } & LogContext): void {
      if (context.namespace === undefined || context.namespace === 'query') onStatement();
      super.logQuery(context);
    }
  }
  return (options) => new CountingLogger(options);
}

export function ormConfig(settings: OrmSettings): Options {
  return defineConfig({
    clientUrl: settings.clientUrl,
    ...(settings.dbName ? { dbName: settings.dbName } : {}),
    entities: settings.entities,
    extensions: [Migrator],
    ...(settings.onQuery ? { debug: ['query' as const], logger: settings.onQuery, colors: false } : { debug: false }),
    ...(settings.onStatement ? { loggerFactory: countingLogger(settings.onStatement) } : {}),
    // The schema is owned by the migrations; never let the ORM guess it at run time.
    ensureDatabase: false,
    discovery: { checkDuplicateTableNames: true },
    pool: { min: 0, max: settings.poolSize ?? 10, idleTimeoutMillis: 30_000 },
    driverOptions: {
      connectionTimeoutMillis: 5_000,
      statement_timeout: 15_000,
      // The client's own bound covers a message of several statements: the owner's lock (at
      // most 5 s of lock_timeout) travels with the write's first statement (15 s).
      query_timeout: 25_000,
      // Every pooled connection sends a transaction's `begin` with its first statement (batching.ts).
      onPoolCreated: (pool: pg.Pool) =>
        batchPool(pool, (n) => process.emitWarning(`${n} batched statement(s) left on a released connection were dropped`, 'BatchingWarning')),
    },
    migrations: {
      migrationsList,
      path: 'src/db/migrations',
      pathTs: 'src/db/migrations',
      snapshot: false,
      transactional: true,
      allOrNothing: true,
      disableForeignKeys: false,
      silent: true,
    },
  });
}
