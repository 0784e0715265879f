/**
 * `npm run migrate`: applies pending migrations to DATABASE_URL, or to the embedded database,
 * under the same lock as a starting service (a transaction's `pg_advisory_xact_lock` on
 * DATABASE_DIRECT_URL), so it may run while instances start.
 */
import { loadConfig } from './config.js';
import { createLogger } from './core/logger.js';
import { installWrites, openOrm } from './app/orm.js';
import { migrateLocked, openDatabase, preparedStatementsFor } from './db/database.js';

const config = loadConfig();
const logger = createLogger(config.logLevel);
const database = await openDatabase({ databaseUrl: config.databaseUrl, databaseDirectUrl: config.databaseDirectUrl, dataDir: config.dataDir, logger });
try {
  const orm = await openOrm(database.url, {
    migrate: false,
    behindPooler: database.behindPooler,
    preparedStatements: preparedStatementsFor(config.preparedStatements, database.behindPooler),
  });
  try {
    const applied = await migrateLocked(orm, database.directUrl, installWrites);
    logger.info({ applied }, `applied ${applied.length} migration(s) on ${database.description}`);
  } finally {
    await orm.close(true);
  }
} finally {
  await database.stop();
}
