/** `npm run migrate`: applies pending migrations to DATABASE_URL, or to the embedded database. */
import { loadConfig } from './config.js';
import { createLogger } from './core/logger.js';
import { openOrm } from './app/orm.js';
import { openDatabase, preparedStatementsFor } from './db/database.js';

const config = loadConfig();
const logger = createLogger(config.logLevel);
const database = await openDatabase({ databaseUrl: config.databaseUrl, databaseDirectUrl: config.databaseDirectUrl, dataDir: config.dataDir, logger });
try {
  const orm = await openOrm(database.url, {
    migrate: false,
    behindPooler: database.behindPooler,
    preparedStatements: preparedStatementsFor(config.preparedStatements, database.behindPooler),
  });
  const applied = await orm.migrator.up();
  logger.info({ applied: applied.map((m) => m.name) }, `applied ${applied.length} migration(s) on ${database.description}`);
  await orm.close(true);
} finally {
  await database.stop();
}
