/**
 * How many connections each server process may hold, from what the database allows.
 *
 * Every process has its own pool, so WEB_CONCURRENCY processes hold up to WEB_CONCURRENCY ×
 * pool size connections. Past max_connections PostgreSQL refuses new ones ("too many
 * clients"), also to the operator's psql. So the pool is sized to fit, with room left for
 * superusers and operators, or the service refuses to start and says what to change. The
 * embedded PostgreSQL is simply started with the max_connections the service needs.
 *
 * Behind a pooler, the pool's connections are the pooler's clients, not PostgreSQL's: what
 * bounds them is the pooler's `max_client_conn`, and what reaches PostgreSQL its
 * `default_pool_size` per database and user, neither of which the service can read
 * (max_connections read through a pooler is PostgreSQL's, and says nothing of them). So there
 * the size must be given (DATABASE_POOL_SIZE) and is taken as it is; README.md "Behind a
 * pooler" says how to size it.
 */
import pg from 'pg';

/** Connections per process when nothing says otherwise (pg's own default). */
export const DEFAULT_POOL_SIZE = 10;
/** Connections kept free for operators and tools (psql, a migration, a backup). */
export const OPERATOR_RESERVE = 5;

/** The max_connections an embedded PostgreSQL needs for `workers` processes of `poolSize`. */
export function embeddedMaxConnections(workers: number, poolSize: number | undefined): number {
  // Superusers' reserve (3 by default) comes on top, as PostgreSQL counts it inside max_connections.
  return Math.max(100, workers * (poolSize ?? DEFAULT_POOL_SIZE) + OPERATOR_RESERVE + 3);
}

export interface DatabaseLimits {
  maxConnections: number;
  /** superuser_reserved_connections + reserved_connections. */
  reserved: number;
}

export async function readDatabaseLimits(url: string): Promise<DatabaseLimits> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    const { rows } = await client.query<{ max: number; reserved: number }>(
      `select current_setting('max_connections')::int as max,
              current_setting('superuser_reserved_connections')::int
                + coalesce(current_setting('reserved_connections', true), '0')::int as reserved`,
    );
    return { maxConnections: rows[0]!.max, reserved: rows[0]!.reserved };
  } finally {
    await client.end();
  }
}

/** The pool size per process, or an error that says what to change. */
export function planPoolSize(limits: DatabaseLimits, workers: number, requested: number | undefined): number {
  const available = limits.maxConnections - limits.reserved - OPERATOR_RESERVE;
  const budget =
    `PostgreSQL allows this service ${Math.max(0, available)} connections (max_connections ${limits.maxConnections}, ` +
    `minus ${limits.reserved} reserved for superusers and ${OPERATOR_RESERVE} kept free for operators)`;
  if (requested !== undefined) {
    if (requested * workers <= available) return requested;
    throw new Error(
      `${budget}, but DATABASE_POOL_SIZE=${requested} × WEB_CONCURRENCY=${workers} processes would open up to ${requested * workers}: ` +
        'lower DATABASE_POOL_SIZE or WEB_CONCURRENCY, or raise max_connections.',
    );
  }
  const size = Math.min(DEFAULT_POOL_SIZE, Math.floor(available / workers));
  if (size >= 1) return size;
  throw new Error(`${budget}, not even one per process for WEB_CONCURRENCY=${workers}: lower WEB_CONCURRENCY, or raise max_connections.`);
}

export async function poolSizeFor(
  database: { url: string; behindPooler: boolean },
  workers: number,
  requested: number | undefined,
): Promise<number> {
  if (!database.behindPooler) return planPoolSize(await readDatabaseLimits(database.url), workers, requested);
  if (requested !== undefined) return requested;
  throw new Error(
    'DATABASE_URL is a pooler (DATABASE_DIRECT_URL differs from it), whose limits the service cannot read: ' +
      "set DATABASE_POOL_SIZE, so that every instance's WEB_CONCURRENCY × DATABASE_POOL_SIZE together stay within the pooler's max_client_conn " +
      '(README.md, "Behind a pooler").',
  );
}
