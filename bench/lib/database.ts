/**
 * The embedded PostgreSQL of a run (startEmbeddedDatabase, in the run's temp folder) and its
 * databases: created, migrated by this checkout's code, with a superuser client on each, and
 * login roles for the processes under test so that pg_stat_statements tells them apart.
 */
import path from 'node:path';
import pg from 'pg';
import { openOrm } from '../../src/app/orm.js';
import { startEmbeddedDatabase, type EmbeddedDatabase, type EmbeddedLogger } from '../../src/db/embedded.js';
import type { Session } from './session.js';

export const ROLE_PASSWORD = 'bench-role-password';

/** No durability: the bench measures the service, not the disk. */
const NO_DURABILITY = { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' };

/** pg_stat_statements loaded, counting top-level statements (openDatabase creates the extension). */
export const STATEMENT_STATS = { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': 'top' };

/** Starts PostgreSQL with durability off plus `settings`; stopped at the end of the run. */
export async function startDatabase(session: Session, options: { settings?: Record<string, string>; logger?: EmbeddedLogger } = {}): Promise<EmbeddedDatabase> {
  const db = await startEmbeddedDatabase({
    dataDir: path.join(session.dir, 'db'),
    settings: { ...NO_DURABILITY, ...options.settings },
    logger: options.logger,
  });
  session.defer(() => db.stop());
  return db;
}

export interface BenchDatabase {
  name: string;
  /** The superuser's URL of this database. */
  url: string;
  /** A superuser client on it, closed at the end of the run. */
  admin: pg.Client;
  q: pg.Client['query'];
  /** The URL of this database for a role of createRoles. */
  roleUrl(role: string): string;
}

/**
 * Creates database `name`, migrated by this checkout's code (`migrate: false` leaves it to the
 * service that will serve it), and with the pg_stat_statements extension if asked.
 */
export async function openDatabase(
  session: Session,
  db: EmbeddedDatabase,
  name: string,
  options: { migrate?: boolean; statementStats?: boolean } = {},
): Promise<BenchDatabase> {
  await db.ensureDatabase(name);
  const url = db.urlFor(name);
  if (options.migrate !== false) await (await openOrm(url, { migrate: true })).close(true);
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  session.defer(() => admin.end());
  const q = admin.query.bind(admin) as pg.Client['query'];
  if (options.statementStats) await q('create extension if not exists pg_stat_statements');
  return { name, url, admin, q, roleUrl: (role) => `postgresql://${role}:${ROLE_PASSWORD}@127.0.0.1:${db.port}/${name}` };
}

/** One login role per process under test; members of postgres, so they own what it owns. */
export async function createRoles(q: pg.Client['query'], roles: string[]): Promise<void> {
  for (const role of roles) {
    await q(`create role ${role} login password '${ROLE_PASSWORD}'`);
    await q(`grant postgres to ${role}`);
  }
}
