/**
 * The one MikroORM configuration, used by the service, the tests, and the MikroORM CLI
 * (through mikro-orm.config.ts at the root). The entities are handed in: the composition
 * root (src/app/orm.ts) lists them, so this layer imports no feature.
 */
import { DefaultLogger, defineConfig, type LogContext, type Options } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import { migrationsList } from './migrations/index.js';
import pg from 'pg';
import { usePreparedStatements } from './prepared.js';
import { releaseConnectionsOpenedWhileEnding } from './pool-ending.js';
import { stampStatements } from './stalled-statements.js';
import { timeoutEachTransaction } from './transaction-timeout.js';
import { discardUnfitConnections } from './unfit-connections.js';

export interface OrmSettings {
  clientUrl: string;
  /** The entity classes (src/app/orm.ts). */
  entities: NonNullable<Options['entities']>;
  /** Overrides the database named in clientUrl. */
  dbName?: string;
  /** Connections this process may hold. */
  poolSize?: number;
  /** Milliseconds a statement waits for a connection of the pool (or for a new one to connect); 5 s by default. */
  poolWaitMs?: number;
  /**
   * Whether clientUrl is a transaction-mode pooler (PgBouncer), where no setting may be left
   * on a session: the statement timeout is then set per transaction (see below).
   */
  behindPooler?: boolean;
  /** Named prepared statements for statements sent outside transactions (src/db/prepared.ts); default: not behind a pooler. */
  preparedStatements?: boolean;
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

/** No statement the service sends runs longer on the server than this (57014, answered 503). */
export const STATEMENT_TIMEOUT_MS = 15_000;

/** OIDs of PostgreSQL's int8 and int8[]. */
const INT8 = 20;
const INT8_ARRAY = 1016;
/** An int8[]'s text that is one dimension of integers, nothing else: `{1,-2,3}`. */
const FLAT_INT8_ARRAY = /^\{-?\d+(?:,-?\d+)*\}$/;

/**
 * An int8 as a JS number. Ids are bigint in the schema (Citus hands out an identity's values in
 * a range per node) and numbers everywhere in the service and its API, as they were when they
 * were integers; node-postgres reads int8 as a string, since a JS number holds every integer only
 * up to 2^53 − 1. Every int8 the service reads as a value is an id, a count or a sum of counts,
 * all far below that (a node's range of ids starts at its group number times 2^48); the
 * change log's numbers and the places in it, which the service handles as BigInt, it reads as
 * text (`::text`). So a value beyond it is not rounded, nor returned as a string where a number
 * is expected (a JSON answer of another type): it throws, and its statement fails.
 */
export function parseInt8(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new RangeError(`int8 ${text} is beyond the integers a JS number holds exactly`);
  return value;
}

/**
 * int8 and int8[] read as numbers (`parseInt8`) on the pool's connections: the service's reads.
 * Other clients (the LISTEN connection, which reads no rows; tools and tests) keep
 * node-postgres's strings: the process's own table of parsers is left as it is.
 */
function readInt8AsNumbers(pool: pg.Pool): void {
  // MikroORM gives its pool a parser set of its own (timestamps as text), which each connection consults.
  const types = (pool.options.types ??= new pg.TypeOverrides()) as pg.TypeOverrides;
  if (typeof types.setTypeParser !== 'function') throw new Error('the pool reads types through a parser set that cannot be extended');
  // Typed for the OIDs node-postgres names, which leave int8[] out.
  const int8Array = (pg.types.getTypeParser as (oid: number, format: 'text') => (text: string) => unknown)(INT8_ARRAY, 'text');
  const numbers = (value: unknown): unknown => (Array.isArray(value) ? value.map(numbers) : value === null ? null : parseInt8(String(value)));
  types.setTypeParser(INT8, 'text', parseInt8);
  // A one-dimensional array of integers without NULLs (a project's task ids) is split at its
  // commas: the general parser reads it a character at a time, which was a tenth of the CPU of
  // a page of projects. Anything else (NULLs, nesting, bounds) goes to the general parser.
  types.setTypeParser(INT8_ARRAY, 'text', (text: string) =>
    text === '{}' ? [] : FLAT_INT8_ARRAY.test(text) ? text.slice(1, -1).split(',').map(parseInt8) : numbers(int8Array(text)),
  );
}

/**
 * The statement timeout of the pool's connections, never sent as a start-up parameter (a
 * pooler refuses those: PgBouncer answers `unsupported startup parameter`, 08P01):
 * - on PostgreSQL itself, a session setting, sent once when a connection opens, ahead of its
 *   first statement (queued by `pg` before it: part of opening the connection, as the start-up
 *   parameter was, and not counted among the requests' round trips);
 * - behind a pooler, where a session setting would stay on a server connection that other
 *   clients borrow and be missing from the next one this service gets, a setting of each
 *   transaction, explicit or implicit, that travels in the message of its statements
 *   (transaction-timeout.ts): so also a statement sent on its own as text gets it, at no
 *   round trip. (`set_config` inside the statement itself would come too late for it:
 *   the timeout of a statement is armed when it starts.) A statement sent with parameters is
 *   a message of its own that no setting can head, and runs under the server's setting: a
 *   write's (the one call of `apply`) bounds its wait for its user's lock itself
 *   (`lock_timeout`, src/writes/write-functions.ts `key_open`).
 * The client's own `query_timeout` stays as the bound of last resort.
 */
function onPoolCreated(settings: OrmSettings) {
  const behindPooler = settings.behindPooler ?? false;
  return (pool: pg.Pool) => {
    readInt8AsNumbers(pool);
    // Else a connection opened while the ORM closes is lost, and the close waits for it forever.
    releaseConnectionsOpenedWhileEnding(pool);
    pool.on('connect', (client) => {
      if (behindPooler) timeoutEachTransaction(client, `select set_config('statement_timeout', '${STATEMENT_TIMEOUT_MS}', true)`);
      else client.query(`set statement_timeout = ${STATEMENT_TIMEOUT_MS}`).catch(() => undefined);
    });
    usePreparedStatements(pool, settings.preparedStatements ?? !behindPooler);
    // When each statement was sent: a database that stops answering is found by its stalls.
    stampStatements(pool);
    // Last, so that it sees every failure as the ORM does: a connection to a server gone or
    // read-only (a failover) is closed on release, never handed out again.
    discardUnfitConnections(pool);
  };
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
    // Requests share the root entity manager (src/http/app.ts): identity-map work on it is
    // refused, whatever MIKRO_ORM_ALLOW_GLOBAL_CONTEXT says, and a transaction's fork is never
    // merged back into it.
    allowGlobalContext: false,
    discovery: { checkDuplicateTableNames: true },
    pool: { min: 0, max: settings.poolSize ?? 10, idleTimeoutMillis: 30_000 },
    driverOptions: {
      connectionTimeoutMillis: settings.poolWaitMs ?? 5_000,
      // The client's own bound, past the statement timeout (15 s): a server that stops
      // answering is found sooner by src/db/stalled-statements.ts.
      query_timeout: 25_000,
      onPoolCreated: onPoolCreated(settings),
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
