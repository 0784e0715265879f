/**
 * The figures an operator needs to run the service (issue #15), in Prometheus' text format
 * through prom-client: requests by operation, door, method and status with their latency;
 * SQL statements per request; the database pool's connections and the wait for one; open
 * event streams; idempotent replays; rate-limit refusals; and prom-client's process metrics
 * (memory, CPU, event-loop delay, GC).
 *
 * Every label value comes from a fixed set: an operation is a procedure path of the router
 * or one of FIXED_OPERATIONS, never a URL (ids, queries and tokens stay out). Nothing a user
 * sent or owns ever becomes a label. One registry per service, so that several services in
 * one process (tests) keep their own counts.
 */
import { performance } from 'node:perf_hooks';
import type { RequestHandler, Request, Response } from 'express';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { EVENTS_PATH } from '../changes/events.router.js';
import { appRouter } from '../app/router.js';
import { notedRestMatch, restRoutes } from '../core/rest-routes.js';
import { requestScope, type RateLimitKind, type RequestScope } from '../core/request-scope.js';
import type { DeliveryObserver } from '../webhooks/deliverer.js';
import type { DatabaseRoleWatch } from '../db/database-role.js';

/** The roles `planning_db_role` has a series for. */
const DATABASE_ROLES = ['primary', 'read-only', 'unreachable', 'unknown'] as const;

/** Operations that are not procedures of the router. */
export const FIXED_OPERATIONS = ['healthz', 'readyz', 'openapi', 'docs', 'events.stream', 'batch', 'unmatched'] as const;

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** Seconds; prom-client's defaults, which cover a 5 ms read to a 10 s pool timeout. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Statements; the heaviest write sends 11 (test/http/query-count.test.ts). */
const STATEMENT_BUCKETS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 30, 50];
/** Seconds; an idle connection is handed over in well under a millisecond, a new one takes a few. */
const ACQUIRE_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** What the metrics read of a pg Pool. */
export interface PgPoolLike {
  totalCount: number;
  idleCount: number;
  waitingCount: number;
  options: { max?: number };
  connect(...args: unknown[]): unknown;
}

const procedures = appRouter._def.procedures as Record<string, unknown>;
const procedureNames = new Set(Object.keys(procedures));
const findRestProcedure = restRoutes(appRouter);

function pathOf(req: Request): string {
  const url = req.originalUrl ?? req.url ?? '/';
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

/** The operation a request addressed, from the fixed set of labels. */
export function operationOf(req: Request): string {
  const path = pathOf(req);
  if (path.startsWith('/trpc/')) {
    const names = path.slice('/trpc/'.length);
    if (names.includes(',')) return 'batch';
    return procedureNames.has(names) ? names : 'unmatched';
  }
  if (path === EVENTS_PATH && req.method === 'GET' && (req.headers.accept ?? '').toLowerCase().includes('text/event-stream')) {
    return 'events.stream';
  }
  if (path.startsWith('/api/')) {
    // The route the REST door matched (src/http/rest.ts); matched here only for a request
    // refused before it reached the door (a bad Host, a transfer coding), once either way.
    const noted = notedRestMatch(req);
    if (noted !== undefined) return noted?.procedure.path ?? 'unmatched';
    try {
      return findRestProcedure(req.method, path)?.procedure.path ?? 'unmatched';
    } catch {
      return 'unmatched';
    }
  }
  if (path === '/healthz') return 'healthz';
  if (path === '/readyz') return 'readyz';
  if (path === '/openapi.json') return 'openapi';
  if (path === '/docs' || path.startsWith('/docs/')) return 'docs';
  return 'unmatched';
}

export interface ServiceMetricsOptions {
  /** Process metrics (memory, CPU, event-loop delay, GC) from prom-client; on by default. */
  processMetrics?: boolean;
}

export class ServiceMetrics {
  readonly registry = new Registry();
  readonly #requests: Counter<'operation' | 'door' | 'method' | 'status'>;
  readonly #duration: Histogram<'operation' | 'door' | 'method' | 'status'>;
  readonly #statements: Histogram<'operation'>;
  readonly #replays: Counter<'operation'>;
  readonly #refusals: Counter<'limit'>;
  readonly #acquire: Histogram;
  #pool: PgPoolLike | undefined;
  #openStreams: (() => number) | undefined;
  readonly #deliveries: Counter;
  readonly #firstAttempt: Histogram;
  #waiting: (() => Promise<Record<'enabled' | 'disabled', number>>) | undefined;
  #database: DatabaseRoleWatch | undefined;
  readonly #failovers: Counter;
  readonly #unavailable: Counter;

  constructor(options: ServiceMetricsOptions = {}) {
    const registers = [this.registry];
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    this.#requests = new Counter({
      name: 'planning_http_requests_total',
      help: 'HTTP requests answered, by operation (procedure path or fixed route name), door (rest, trpc), method and status.',
      labelNames: ['operation', 'door', 'method', 'status'],
      registers,
    });
    this.#duration = new Histogram({
      name: 'planning_http_request_duration_seconds',
      help: 'Time from a request arriving to its response ending (for event streams: how long they stayed open).',
      labelNames: ['operation', 'door', 'method', 'status'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.#statements = new Histogram({
      name: 'planning_db_statements_per_request',
      help: 'SQL statements the ORM sent for one request (begin and commit included), by operation.',
      labelNames: ['operation'],
      buckets: STATEMENT_BUCKETS,
      registers,
    });
    this.#replays = new Counter({
      name: 'planning_idempotent_replays_total',
      help: 'Writes answered from a stored outcome because their Idempotency-Key was seen before.',
      labelNames: ['operation'],
      registers,
    });
    this.#refusals = new Counter({
      name: 'planning_rate_limit_refusals_total',
      help: 'Requests refused with 429 by a rate limit: auth (register/login), unknown_token, token (requests per token), streams (open event streams per token).',
      labelNames: ['limit'],
      registers,
    });
    this.#acquire = new Histogram({
      name: 'planning_db_pool_acquire_seconds',
      help: 'Time a statement waited for a connection from the pool (failed waits, such as timeouts, included).',
      buckets: ACQUIRE_BUCKETS,
      registers,
    });
    const pool = () => this.#pool;
    new Gauge({
      name: 'planning_db_pool_connections',
      help: "Connections of this process's database pool, by state: in_use (handed to a request) or idle.",
      labelNames: ['state'],
      registers,
      collect() {
        const p = pool();
        if (!p) return;
        this.set({ state: 'in_use' }, p.totalCount - p.idleCount);
        this.set({ state: 'idle' }, p.idleCount);
      },
    });
    new Gauge({
      name: 'planning_db_pool_waiting',
      help: 'Requests waiting for a connection from the pool.',
      registers,
      collect() {
        const p = pool();
        if (p) this.set(p.waitingCount);
      },
    });
    new Gauge({
      name: 'planning_db_pool_max_connections',
      help: 'Most connections the pool may hold (DATABASE_POOL_SIZE or the size derived from the database).',
      registers,
      collect() {
        const p = pool();
        if (p) this.set(p.options.max ?? 10);
      },
    });
    const openStreams = () => this.#openStreams?.() ?? 0;
    new Gauge({
      name: 'planning_event_streams_open',
      help: 'Change-log streams open in this process (REST Server-Sent Events and tRPC subscriptions).',
      registers,
      collect() {
        this.set(openStreams());
      },
    });
    for (const kind of ['auth', 'unknown_token', 'token', 'streams'] satisfies RateLimitKind[]) this.#refusals.inc({ limit: kind }, 0);
    this.#deliveries = new Counter({
      name: 'planning_webhook_deliveries_total',
      help: 'Webhook delivery attempts made by this process, by outcome: delivered (2xx in time), failed, blocked (the URL resolved to a refused address).',
      labelNames: ['outcome'],
      registers,
    });
    for (const outcome of ['delivered', 'failed', 'blocked']) this.#deliveries.inc({ outcome }, 0);
    this.#firstAttempt = new Histogram({
      name: 'planning_webhook_first_attempt_seconds',
      help: "Time from an event's commit to the first attempt to deliver it to a webhook.",
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    const database = () => this.#database;
    new Gauge({
      name: 'planning_db_role',
      help: 'What this process sees of its database, 1 for the role it has now: primary (takes writes), read-only (a standby or a demoted primary: writes are 503), unreachable, unknown (not looked at yet).',
      labelNames: ['role'],
      registers,
      collect() {
        const watch = database();
        if (!watch) return;
        const { role } = watch.state;
        for (const r of DATABASE_ROLES) this.set({ role: r }, r === role ? 1 : 0);
      },
    });
    this.#failovers = new Counter({
      name: 'planning_db_failovers_total',
      help: "Failovers this process saw: each time the primary's timeline rose (a standby was promoted).",
      registers,
    });
    this.#unavailable = new Counter({
      name: 'planning_unavailable_answers_total',
      help: 'Requests this process answered 503 unavailable (the database out of reach or read-only, or the process stopping).',
      registers,
    });
    const waiting = () => this.#waiting;
    new Gauge({
      name: 'planning_webhook_events_waiting',
      help: "Events of the change log after each webhook's place, summed by the webhook's state (enabled: on their way; disabled: held). Read from the database, the same in every process.",
      labelNames: ['state'],
      registers,
      aggregator: 'max',
      async collect() {
        const read = waiting();
        if (!read) return;
        try {
          const counts = await read();
          this.set({ state: 'enabled' }, counts.enabled);
          this.set({ state: 'disabled' }, counts.disabled);
        } catch {
          // The database cannot say right now: the gauge keeps its last values.
        }
      },
    });
  }

  /** What the webhook deliverer reports (src/webhooks/deliverer.ts). */
  webhookObserver(): DeliveryObserver {
    return {
      attempted: (outcome) => this.#deliveries.inc({ outcome }),
      firstAttempt: (seconds) => this.#firstAttempt.observe(seconds),
    };
  }

  /** What the process sees of its database: its role on every scrape, failovers and 503s as they come. */
  watchDatabase(watch: DatabaseRoleWatch): void {
    this.#database = watch;
    watch.observe({ failover: () => this.#failovers.inc(), unavailable: () => this.#unavailable.inc() });
  }

  /** Where the events waiting for webhooks are counted (a query, on every scrape). */
  watchWebhooks(waiting: () => Promise<Record<'enabled' | 'disabled', number>>): void {
    this.#waiting = waiting;
  }

  /** Reads the pool's counts on every scrape and times each wait for one of its connections. */
  watchPool(pool: PgPoolLike): void {
    this.#pool = pool;
    const acquire = this.#acquire;
    const connect = pool.connect;
    pool.connect = function (this: PgPoolLike, ...args: unknown[]) {
      const start = performance.now();
      const done = () => acquire.observe((performance.now() - start) / 1000);
      const callback = args[0];
      if (typeof callback === 'function') {
        return connect.call(this, (...results: unknown[]) => {
          done();
          return (callback as (...a: unknown[]) => unknown)(...results);
        });
      }
      const pending = connect.apply(this, args) as Promise<unknown>;
      pending.then(done, done);
      return pending;
    };
  }

  /** Where the number of open event streams comes from (the process's EventHub). */
  watchEventStreams(count: () => number): void {
    this.#openStreams = count;
  }

  /**
   * The first middleware of the app: times and counts every request, and opens the scope
   * in which its statements and rate-limit refusals are counted.
   */
  requests(): RequestHandler {
    const refusals = this.#refusals;
    const onRateLimitRefusal = (kind: RateLimitKind) => refusals.inc({ limit: kind });
    return (req, res, next) => {
      const start = performance.now();
      const scope: RequestScope = { statements: 0, onRateLimitRefusal };
      res.once('close', () => this.#record(req, res, start, scope));
      requestScope.run(scope, next);
    };
  }

  #record(req: Request, res: Response, start: number, scope: RequestScope): void {
    const operation = operationOf(req);
    const path = pathOf(req);
    const labels = {
      operation,
      door: path === '/trpc' || path.startsWith('/trpc/') ? 'trpc' : 'rest',
      method: METHODS.has(req.method) ? req.method : 'other',
      // A client gone before any answer: no status was sent.
      status: res.headersSent ? String(res.statusCode) : 'aborted',
    };
    this.#requests.inc(labels);
    this.#duration.observe(labels, (performance.now() - start) / 1000);
    this.#statements.observe({ operation }, scope.statements);
    if (res.getHeader('idempotent-replayed') === 'true') this.#replays.inc({ operation });
  }

  /** The exposition, as GET /metrics answers it. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
