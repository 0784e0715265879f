/**
 * How failed requests reach the log. A 500 is our bug: one error line each, with the error
 * and its stack. A 503 is the database (or the machine) saying "not now": under load there
 * are hundreds a second and each says the same, so they go out at warn, without a stack, at
 * most one line per window carrying how many were left out. A pool-wait timeout says why:
 * every connection of this process was busy, or connecting itself took too long.
 */
import type { Logger } from './logger.js';

/** One 503 line per window of this length, per process. */
export const UNAVAILABLE_SAMPLE_MS = 10_000;

/** What a pg Pool shows of itself. */
export interface PoolState {
  max: number;
  total: number;
  idle: number;
  waiting: number;
}

/** The SQLSTATE or errno that made the database unavailable, from the error or its causes. */
function codeOf(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 8; depth++) {
    const { code } = e as { code?: unknown };
    if (typeof code === 'string' && /^([0-9A-Z]{5}|E[A-Z]+)$/.test(code)) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Why the database could not serve the request, in words an operator can act on. */
export function describeUnavailable(error: unknown, pool: PoolState | undefined): string {
  let root = error;
  while ((root as { cause?: unknown })?.cause !== undefined && (root as { name?: string }).name === 'DomainError') root = (root as { cause: unknown }).cause;
  const message = messageOf(root);
  if (/timeout exceeded when trying to connect/i.test(message)) {
    if (pool && pool.total >= pool.max) {
      return `waited too long for a database connection: all ${pool.max} of this process's pool were busy, ${pool.waiting} more requests waiting (raise DATABASE_POOL_SIZE or find what holds them)`;
    }
    return 'connecting to PostgreSQL took too long (the pool had room: the server is slow or unreachable)';
  }
  return message;
}

export type FailureLog = (error: unknown, status: number, fields?: Record<string, unknown>) => void;

/** The log call for failed requests of one app; `pool` reports its connection pool when known. */
export function failureLog(logger: Logger, message: string, pool?: () => PoolState | undefined): FailureLog {
  let windowStart = -Infinity;
  let suppressed = 0;
  return (error, status, fields = {}) => {
    if (status < 500) return;
    if (status !== 503) {
      logger.error({ ...fields, err: error }, message);
      return;
    }
    const now = Date.now();
    if (now - windowStart < UNAVAILABLE_SAMPLE_MS) {
      suppressed += 1;
      return;
    }
    logger.warn(
      { ...fields, code: codeOf(error), reason: describeUnavailable(error, pool?.()), ...(suppressed ? { suppressed } : {}) },
      'database unavailable: answered 503',
    );
    windowStart = now;
    suppressed = 0;
  };
}

/** Reads the counts of the ORM's pg pool, once the ORM has handed it over. */
export function poolStateOf(orm: { em: { getConnection(): unknown } }): () => PoolState | undefined {
  type PgPool = { options: { max?: number }; totalCount: number; idleCount: number; waitingCount: number };
  let pool: PgPool | undefined;
  const connection = orm.em.getConnection() as { getNativeClient?: () => Promise<PgPool> };
  connection.getNativeClient?.().then(
    (p) => (pool = p),
    () => undefined,
  );
  return () => pool && { max: pool.options.max ?? 10, total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount };
}
