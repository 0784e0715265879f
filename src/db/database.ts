/**
 * Where the service's data lives: the PostgreSQL named by DATABASE_URL, or else an
 * embedded one under DATA_DIR. Opens the ORM on it and brings the schema up to date.
 */
import { MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import type { Logger } from '../core/logger.js';
import { startEmbeddedDatabase, type EmbeddedDatabase } from './embedded.js';
import { ormConfig, type OrmSettings } from './orm-config.js';

export const EMBEDDED_DATABASE_NAME = 'planning';

export interface DatabaseHandle {
  url: string;
  /** Human description for the start-up log line, without secrets. */
  description: string;
  embedded: EmbeddedDatabase | null;
  stop(): Promise<void>;
}

export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable DATABASE_URL)';
  }
}

export async function openDatabase(options: {
  databaseUrl?: string;
  dataDir: string;
  logger: Logger;
  /** max_connections of the embedded PostgreSQL (src/db/pool-size.ts). */
  maxConnections?: number;
}): Promise<DatabaseHandle> {
  if (options.databaseUrl) {
    return {
      url: options.databaseUrl,
      description: `PostgreSQL at ${redactUrl(options.databaseUrl)}`,
      embedded: null,
      stop: async () => undefined,
    };
  }
  const embedded = await startEmbeddedDatabase({
    dataDir: options.dataDir,
    logger: options.logger,
    ...(options.maxConnections ? { settings: { max_connections: String(options.maxConnections) } } : {}),
  });
  await embedded.ensureDatabase(EMBEDDED_DATABASE_NAME);
  return {
    url: embedded.urlFor(EMBEDDED_DATABASE_NAME),
    description: `embedded PostgreSQL in ${options.dataDir} (127.0.0.1:${embedded.port})`,
    embedded,
    stop: () => embedded.stop(),
  };
}

export type OpenOrmOptions = Omit<OrmSettings, 'clientUrl' | 'dbName'> & { migrate: boolean };

/** The ORM on `clientUrl`, migrated first when asked (src/app/orm.ts hands in the entities). */
export async function openOrm(clientUrl: string, options: OpenOrmOptions): Promise<MikroORM> {
  const { migrate, ...settings } = options;
  const orm = await MikroORM.init(ormConfig({ clientUrl, ...settings }));
  if (migrate) {
    try {
      await whileMigrationLocked(clientUrl, () => orm.migrator.up());
    } catch (error) {
      await orm.close(true);
      throw error;
    }
  }
  return orm;
}

/** Any constant: the advisory lock key all processes of the service take before migrating. */
const MIGRATION_LOCK = 7_314_052_611;

/**
 * Runs the migrations while holding a database-wide advisory lock, so that services started
 * at the same time on a new database migrate one after the other (the second finds nothing
 * pending) instead of both creating the same tables.
 */
async function whileMigrationLocked<T>(clientUrl: string, migrate: () => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: clientUrl });
  await client.connect();
  try {
    await client.query('select pg_advisory_lock($1)', [MIGRATION_LOCK]);
    return await migrate();
  } finally {
    await client.end().catch(() => undefined); // ending the session releases the lock
  }
}
