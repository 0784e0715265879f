/**
 * One running service: database (embedded or external), ORM with migrations applied,
 * and the HTTP server; `stop()` undoes all of it gracefully. Used by main.ts and by the
 * tests that start and stop real servers.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { MikroORM } from '@mikro-orm/postgresql';
import { systemClock, type Clock } from './core/clock.js';
import type { Config } from './config.js';
import type { Logger } from './core/logger.js';
import { openOrm } from './app/orm.js';
import { openDatabase, preparedStatementsFor, type DatabaseHandle } from './db/database.js';
import { embeddedMaxConnections, poolSizeFor } from './db/pool-size.js';
import { createApp, databaseRoleWatch } from './http/app.js';
import { closeQuietConnections, createHttpServer, maxConnectionsFor } from './http/http-server.js';
import { startHousekeeping } from './core/housekeeping.js';
import { pruneRateLimits } from './core/rate-limit.js';
import { pruneExpiredTokens } from './users/authentication.js';
import { pruneChangeLog, pruneStreamTickets } from './changes/event.store.js';
import { pruneStreamLeases } from './changes/stream-leases.js';
import { InFlight } from './http/in-flight.js';
import { EventHub } from './changes/event-hub.js';
import { Announcer } from './writes/announcer.js';
import type { ServiceMetrics } from './metrics/service-metrics.js';
import { databaseProbe, watchStalls } from './db/stalled-statements.js';
import type pg from 'pg';
import { countStatement } from './core/request-scope.js';
import type { MetricsServer } from './metrics/metrics-server.js';
import { WebhookDeliverer } from './webhooks/deliverer.js';
import { waitingEvents } from './webhooks/delivery.store.js';
import { pruneDeliveries } from './webhooks/webhook.store.js';
import type { Resolve } from './webhooks/address-guard.js';


/** The `pg` pool under the ORM. */
async function nativePool(orm: MikroORM): Promise<pg.Pool> {
  return (orm.em.getConnection() as unknown as { getNativeClient(): Promise<pg.Pool> }).getNativeClient();
}

export interface RunningService {
  url: string;
  port: number;
  databaseDescription: string;
  /** Database connections this process may hold. */
  poolSize: number;
  /** Whether statements outside transactions are named prepared statements (DATABASE_PREPARED_STATEMENTS). */
  preparedStatements: boolean;
  orm: MikroORM;
  server: Server;
  /** Requests and procedure runs not yet over. */
  inFlight: InFlight;
  /** Where GET /metrics is served, when METRICS_PORT is set and this process serves it. */
  metricsUrl: string | undefined;
  stop(): Promise<void>;
}

export interface ServiceOptions {
  config: Config;
  logger: Logger;
  clock?: Clock;
  /** Whether this process applies migrations (false in cluster workers). */
  migrate?: boolean;
  /** An already opened database (cluster workers get a URL from the primary). */
  database?: DatabaseHandle;
  /** Whether the primary's embedded PostgreSQL runs (cluster workers learn it by message). */
  databaseUp?: () => boolean;
  /** With METRICS_PORT set: serve them here (default), or hand them to the cluster's primary. */
  metricsExposure?: 'server' | 'primary';
  /** How webhook URLs' host names are resolved (tests); the system's resolver by default. */
  webhookResolve?: Resolve;
  /** Milliseconds between the webhook deliverer's rounds over every user (5 s by default). */
  webhookPollMs?: number;
  /** Milliseconds a request waits for a database connection before its 503 (tests; 5 s by default). */
  poolWaitMs?: number;
  /** Milliseconds before each restart of the embedded PostgreSQL in turn (tests; 1 s doubling to 30 s by default). */
  embeddedRestartDelaysMs?: readonly number[];
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** Stops accepting, lets in-flight requests finish (up to `timeoutMs`), then closes. */
function closeServer(server: Server, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => server.closeAllConnections(), timeoutMs);
    timer.unref();
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    closeQuietConnections(server);
  });
}

export async function startService(options: ServiceOptions): Promise<RunningService> {
  const { config, logger } = options;
  const database =
    options.database ??
    (await openDatabase({
      databaseUrl: config.databaseUrl,
      databaseDirectUrl: config.databaseDirectUrl,
      dataDir: config.dataDir,
      logger,
      maxConnections: embeddedMaxConnections(config.webConcurrency, config.databasePoolSize),
      restartDelaysMs: options.embeddedRestartDelaysMs,
    }));
  let orm: MikroORM;
  let poolSize: number;
  let metrics: ServiceMetrics | undefined;
  const preparedStatements = preparedStatementsFor(config.preparedStatements, database.behindPooler);
  try {
    // The metrics and their library (prom-client) are loaded only when they are asked for.
    if (config.metricsPort !== undefined) metrics = new (await import('./metrics/service-metrics.js')).ServiceMetrics();
    poolSize = await poolSizeFor(database, config.webConcurrency, config.databasePoolSize);
    orm = await openOrm(database.url, {
      migrate: options.migrate ?? true,
      poolSize,
      directUrl: database.directUrl,
      behindPooler: database.behindPooler,
      preparedStatements,
      poolWaitMs: options.poolWaitMs,
      ...(metrics ? { onStatement: countStatement } : {}),
    });
    if (metrics) metrics.watchPool(await nativePool(orm));
  } catch (error) {
    if (!options.database) await database.stop();
    throw error;
  }
  const inFlight = new InFlight();
  // LISTEN needs a session of its own: on PostgreSQL itself, never through a pooler.
  const events = new EventHub({ databaseUrl: database.directUrl, log: logger });
  metrics?.watchEventStreams(() => events.size);
  // Webhook delivery: woken by the change log's notifications, run beside the requests.
  const deliverer = new WebhookDeliverer({
    em: () => orm.em.fork(),
    notifications: events,
    config: config.webhooks,
    log: logger,
    resolve: options.webhookResolve,
    observer: metrics?.webhookObserver(),
    pollMs: options.webhookPollMs,
  });
  metrics?.watchWebhooks(() => waitingEvents(orm.em.fork()));
  // What the process sees of its database (primary, read-only, unreachable), on /healthz and /metrics.
  const databaseRole = databaseRoleWatch(orm);
  metrics?.watchDatabase(databaseRole);
  // A database that stops answering (a frozen host, a cut network) is an outage within about
  // two seconds, not when each statement times out (src/db/stalled-statements.ts).
  const probe = databaseProbe(database.directUrl);
  const stopWatchingStalls = watchStalls(await nativePool(orm), { answers: () => probe.answers(), onUnreachable: () => databaseRole.beginOutage() });
  const announcer = new Announcer(() => orm.em.fork());
  const app = createApp({
    events,
    announcer,
    inFlight,
    orm,
    clock: options.clock ?? systemClock,
    logger,
    trustProxy: config.trustProxy,
    passwordHashCost: config.passwordHashCost,
    rateLimits: { authPerMinute: config.rateLimitAuthPerMinute, perMinute: config.rateLimitPerMinute },
    corsOrigins: config.corsOrigins,
    databaseUp: options.databaseUp ?? (database.embedded ? () => database.embedded!.up : undefined),
    metrics,
    database: databaseRole,
    webhooks: { allowPrivateUrls: config.webhooks.allowPrivateUrls, resolve: options.webhookResolve, wake: (userId) => deliverer.wake(userId) },
  });
  const http = createHttpServer(inFlight.wrap(app));
  const maxConnections = maxConnectionsFor(poolSize);
  if (maxConnections !== undefined) http.maxConnections = maxConnections;
  // Before listening, so a start after a long pause serves without last month's rows.
  const em = () => orm.em.fork();
  const housekeeping = await startHousekeeping(
    [
      { name: 'rate limits', run: async (now) => (await pruneRateLimits(em(), now), 0) },
      { name: 'access tokens', run: (now) => pruneExpiredTokens(em(), now) },
      { name: 'change log', run: (now) => pruneChangeLog(em(), now, config.eventsRetentionDays) },
      { name: 'stream tickets', run: (now) => pruneStreamTickets(em(), now) },
      // On the database's clock, as the leases are (src/changes/stream-leases.ts).
      { name: 'stream leases', run: () => pruneStreamLeases(em()) },
      { name: 'webhook deliveries', run: (now) => pruneDeliveries(em(), now, config.eventsRetentionDays) },
    ],
    options.clock ?? systemClock,
    logger,
  );
  let metricsServer: MetricsServer | undefined;
  if (metrics) {
    const { reportToPrimary, startMetricsServer } = await import('./metrics/metrics-server.js');
    if (options.metricsExposure === 'primary') reportToPrimary(metrics.registry);
    else metricsServer = await startMetricsServer(metrics, config.metricsPort!, config.metricsHost, logger);
  }
  await listen(http, config.port, config.host).catch(async (error: unknown) => {
    await metricsServer?.close();
    throw error;
  });
  await deliverer.start();
  const { port } = http.address() as AddressInfo;
  const shownHost = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;

  let stopping: Promise<void> | undefined;
  return {
    url: `http://${shownHost}:${port}`,
    port,
    databaseDescription: database.description,
    poolSize,
    preparedStatements,
    orm,
    server: http,
    inFlight,
    metricsUrl: metricsServer?.url,
    stop() {
      stopping ??= (async () => {
        housekeeping.stop();
        stopWatchingStalls();
        probe.close();
        databaseRole.stop();
        const deadline = Date.now() + config.shutdownTimeoutMs;
        // Open event streams end first (clients reconnect elsewhere with their last id).
        await events.stop();
        // Webhook attempts under way end (or are cut off, to be made again elsewhere) and their
        // leases go back while requests finish.
        await Promise.all([closeServer(http, config.shutdownTimeoutMs), deliverer.stop()]);
        await metricsServer?.close();
        // Handlers of clients that hung up may still be running: the ORM closes after them.
        if (!(await inFlight.settled(Math.max(0, deadline - Date.now())))) {
          logger.warn({ running: inFlight.size }, 'stopping with request handlers still running');
        }
        // The last writes' NOTIFYs go out (src/writes/announcer.ts), within the stop's deadline, then the pool ends.
        const announced = Math.min(2_000, Math.max(0, deadline - Date.now()));
        await Promise.race([announcer.idle(), new Promise((resolve) => setTimeout(resolve, announced).unref())]);
        // Bounded too: a pool that cannot end (a connection stuck in the database) must not
        // keep the process from stopping.
        await Promise.race([orm.close(true), new Promise((resolve) => setTimeout(resolve, 5_000).unref())]);
        if (!options.database) await database.stop();
      })();
      return stopping;
    },
  };
}
