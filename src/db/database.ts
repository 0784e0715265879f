/**
 * Where the service's data lives: the PostgreSQL named by DATABASE_URL, or else an
 * embedded one under DATA_DIR. Opens the ORM on it and brings the schema up to date.
 *
 * DATABASE_URL may be a transaction-mode pooler (PgBouncer): each transaction, and each
 * statement outside one, may then run on another server connection, so nothing may rely on a
 * session. What needs one goes to DATABASE_DIRECT_URL (PostgreSQL itself): the LISTEN
 * connection of each process (src/changes/event-hub.ts) and the migration lock (here).
 */
import { MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import type { Logger } from '../core/logger.js';
import { startEmbeddedDatabase, type EmbeddedDatabase } from './embedded.js';
import { ormConfig, type OrmSettings } from './orm-config.js';

export const EMBEDDED_DATABASE_NAME = 'planning';

export interface DatabaseHandle {
  /** Where the pool connects: PostgreSQL, or a pooler in front of it. */
  url: string;
  /** PostgreSQL itself: the LISTEN connection and the migration lock. */
  directUrl: string;
  /** Whether `url` is a pooler (it differs from `directUrl`): no session state, no named prepared statements by default. */
  behindPooler: boolean;
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
  /** DATABASE_DIRECT_URL; defaults to `databaseUrl`. */
  databaseDirectUrl?: string;
  dataDir: string;
  logger: Logger;
  /** max_connections of the embedded PostgreSQL (src/db/pool-size.ts). */
  maxConnections?: number;
  /** The embedded PostgreSQL's delays before its restarts (tests); see src/db/embedded.ts. */
  restartDelaysMs?: readonly number[];
}): Promise<DatabaseHandle> {
  if (options.databaseUrl) {
    const directUrl = options.databaseDirectUrl ?? options.databaseUrl;
    const behindPooler = directUrl !== options.databaseUrl;
    return {
      url: options.databaseUrl,
      directUrl,
      behindPooler,
      description: behindPooler
        ? `PostgreSQL through the pooler at ${redactUrl(options.databaseUrl)}, direct at ${redactUrl(directUrl)}`
        : `PostgreSQL at ${redactUrl(options.databaseUrl)}`,
      embedded: null,
      stop: async () => undefined,
    };
  }
  const embedded = await startEmbeddedDatabase({
    dataDir: options.dataDir,
    logger: options.logger,
    restartDelaysMs: options.restartDelaysMs,
    ...(options.maxConnections ? { settings: { max_connections: String(options.maxConnections) } } : {}),
  });
  await embedded.ensureDatabase(EMBEDDED_DATABASE_NAME);
  const url = embedded.urlFor(EMBEDDED_DATABASE_NAME);
  return {
    url,
    directUrl: url,
    behindPooler: false,
    description: `embedded PostgreSQL in ${options.dataDir} (127.0.0.1:${embedded.port})`,
    embedded,
    stop: () => embedded.stop(),
  };
}

/** Whether named prepared statements are used: DATABASE_PREPARED_STATEMENTS, `auto` meaning "not behind a pooler". */
export function preparedStatementsFor(setting: 'auto' | 'on' | 'off', behindPooler: boolean): boolean {
  return setting === 'auto' ? !behindPooler : setting === 'on';
}

export type OpenOrmOptions = Omit<OrmSettings, 'clientUrl' | 'dbName'> & {
  migrate: boolean;
  /** PostgreSQL itself, for the migration lock; defaults to `clientUrl`. */
  directUrl?: string;
  /** What the service installs besides its migrations (src/app/orm.ts: the write functions). */
  install?: Installer;
};

/** Runs after the migrations, under their lock, with statements run by the lock's transaction. */
export type Installer = (run: (sql: string) => Promise<Array<Record<string, unknown>>>) => Promise<unknown>;

/** The ORM on `clientUrl`, migrated first when asked (src/app/orm.ts hands in the entities). */
export async function openOrm(clientUrl: string, options: OpenOrmOptions): Promise<MikroORM> {
  const { migrate, directUrl, install, ...settings } = options;
  const behindPooler = settings.behindPooler ?? (directUrl !== undefined && directUrl !== clientUrl);
  const orm = await MikroORM.init(ormConfig({ clientUrl, ...settings, behindPooler }));
  if (migrate) {
    try {
      await migrateLocked(orm, directUrl ?? clientUrl, install);
    } catch (error) {
      await orm.close(true);
      throw error;
    }
  }
  return orm;
}

/**
 * Applies the pending migrations under the migration lock, taken on `directUrl` (PostgreSQL
 * itself): what every start does, and `npm run migrate`. Returns the names of those applied.
 */
export async function migrateLocked(orm: MikroORM, directUrl: string, install?: Installer): Promise<string[]> {
  const applied = await whileMigrationLocked(directUrl, async (client) => {
    const done = await orm.migrator.up();
    await install?.(async (sql) => (await client.query(sql)).rows);
    return done;
  });
  return applied.map((m) => m.name);
}

/** Any constant: the advisory lock key all processes of the service take before migrating. */
export const MIGRATION_LOCK = 7_314_052_611;

/**
 * Runs the migrations while holding a database-wide advisory lock, so that services started
 * at the same time on a new database migrate one after the other (the second finds nothing
 * pending) instead of both creating the same tables.
 *
 * The lock is held by a transaction of its own connection, opened on PostgreSQL directly, for
 * the whole of `migrate` (which also creates the migrations' own table, before its
 * transaction, so a lock taken inside that transaction would come too late). A transaction's
 * lock (`pg_advisory_xact_lock`) ends with the transaction, or with the connection: also
 * through a pooler (when no direct URL is given) it never stays on a server connection that
 * the next client borrows, as a session's `pg_advisory_lock` would. Neither the wait nor the
 * idle lock transaction has a timeout: the other process, or this one, may take long to migrate.
 */
async function whileMigrationLocked<T>(url: string, migrate: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined); // a lost connection fails the commit below
  await client.connect();
  try {
    await client.query(`begin; set local statement_timeout = 0; set local idle_in_transaction_session_timeout = 0; select pg_advisory_xact_lock(${MIGRATION_LOCK})`);
    const result = await migrate(client);
    await client.query('commit');
    return result;
  } finally {
    await client.end().catch(() => undefined); // ending the connection ends the transaction, and the lock
  }
}
