/**
 * `npm start`: configuration → database → app → listen; SIGTERM/SIGINT stop it gracefully
 * (stop accepting, finish in-flight requests, close the ORM, stop the embedded PostgreSQL).
 *
 * With WEB_CONCURRENCY > 1 the primary process owns the database (starts the embedded
 * PostgreSQL, applies migrations) and forks that many workers sharing the port; the
 * invariants hold across them because they are enforced in PostgreSQL.
 */
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import { concurrencyWarning, loadConfig, type Config } from './config.js';
import { createLogger, type Logger } from './core/logger.js';
import { openOrm } from './app/orm.js';
import { openDatabase, preparedStatementsFor } from './db/database.js';
import { embeddedMaxConnections, poolSizeFor } from './db/pool-size.js';

function listeningMessage(url: string, database: string, workers: number) {
  const where = workers > 1 ? `${url} with ${workers} workers` : url;
  return `listening on ${where} (docs at ${url}/docs), database: ${database}`;
}

function onSignals(handler: (signal: NodeJS.Signals) => void, logger: Logger): void {
  let signals = 0;
  const handle = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    handler(signal);
  };
  process.on('SIGTERM', handle);
  process.on('SIGINT', handle);
}

/** Exits 0 once the stop has finished, 1 if it failed. */
function exitWhenDone(stop: Promise<unknown>, logger: Logger): void {
  stop.then(
    () => {
      logger.info('stopped');
      process.exit(0);
    },
    (error: unknown) => {
      logger.error({ err: error }, 'shutdown failed');
      process.exit(1);
    },
  );
}

/** One process serving requests: the whole service, or a cluster worker. */
async function runServer(config: Config, logger: Logger, worker: boolean): Promise<void> {
  // A worker's /healthz follows the primary's embedded PostgreSQL, which the primary reports.
  let databaseUp = true;
  if (worker) {
    process.on('message', (message: { type?: string; up?: boolean }) => {
      if (message?.type === 'embedded-postgres' && typeof message.up === 'boolean') databaseUp = message.up;
    });
  }
  // Loaded here, not with this module: a cluster's primary serves no request and needs none
  // of the app (express, tRPC, the routers and their schemas), only the database and the ORM.
  const { startService } = await import('./server.js');
  const service = await startService({
    config,
    logger,
    migrate: !worker,
    ...(worker ? { databaseUp: () => databaseUp, metricsExposure: 'primary' as const } : {}),
  });
  const message = listeningMessage(service.url, service.databaseDescription, 1);
  if (worker) logger.debug({ url: service.url }, `worker ${message}`);
  else {
    const limits = {
      poolSize: service.poolSize,
      preparedStatements: service.preparedStatements,
      maxConnections: service.server.maxConnections,
      ...(service.metricsUrl ? { metrics: service.metricsUrl } : {}),
    };
    logger.info({ url: service.url, docs: `${service.url}/docs`, database: service.databaseDescription, ...limits }, message);
  }

  onSignals((signal) => {
    logger.info({ signal }, 'shutting down');
    exitWhenDone(service.stop(), logger);
  }, logger);
}

async function runPrimary(config: Config, logger: Logger): Promise<void> {
  const cores = availableParallelism();
  const tooMany = concurrencyWarning(config.webConcurrency, cores);
  if (tooMany) logger.warn({ workers: config.webConcurrency, cores }, tooMany);
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    databaseDirectUrl: config.databaseDirectUrl,
    dataDir: config.dataDir,
    logger,
    maxConnections: embeddedMaxConnections(config.webConcurrency, config.databasePoolSize),
  });
  // Refuse before forking when the workers' pools cannot fit in the database.
  const poolSize = await poolSizeFor(database, config.webConcurrency, config.databasePoolSize).catch(async (error: unknown) => {
    await database.stop();
    throw error;
  });
  const preparedStatements = preparedStatementsFor(config.preparedStatements, database.behindPooler);
  const orm = await openOrm(database.url, { migrate: true, poolSize: 1, directUrl: database.directUrl, behindPooler: database.behindPooler, preparedStatements });
  await orm.close(true);
  // The workers count; the primary serves their sum.
  const metricsServer =
    config.metricsPort === undefined
      ? undefined
      : await import('./metrics/metrics-server.js')
          .then(({ clusterMetricsSource, startMetricsServer }) => startMetricsServer(clusterMetricsSource(), config.metricsPort!, config.metricsHost, logger))
          .catch(async (error: unknown) => {
            await database.stop();
            throw error;
          });

  let stopping = false;
  let listening = 0;
  const report = (worker: Worker) => {
    if (database.embedded && worker.isConnected()) worker.send({ type: 'embedded-postgres', up: database.embedded.up }, () => undefined);
  };
  database.embedded?.onStatusChange(() => Object.values(cluster.workers ?? {}).forEach((w) => w && report(w)));
  const fork = (): Worker => {
    const worker = cluster.fork({ DATABASE_URL: database.url, DATABASE_DIRECT_URL: database.directUrl, DATABASE_POOL_SIZE: String(poolSize) });
    worker.once('online', () => report(worker));
    return worker;
  };
  cluster.on('listening', (_worker, address) => {
    listening += 1;
    if (listening !== config.webConcurrency) return;
    const host = !address.address || address.address === '0.0.0.0' || address.address === '::' ? 'localhost' : address.address;
    const url = `http://${host}:${address.port}`;
    logger.info(
      {
        url,
        docs: `${url}/docs`,
        database: database.description,
        workers: config.webConcurrency,
        cores,
        poolSize,
        preparedStatements,
        ...(metricsServer ? { metrics: metricsServer.url } : {}),
      },
      listeningMessage(url, database.description, config.webConcurrency),
    );
  });
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return;
    // `pid` is the primary's own (every line has it); the dead worker's is `workerPid`.
    logger.error({ workerPid: worker.process.pid, code, signal }, 'worker died; starting another');
    fork();
  });
  for (let i = 0; i < config.webConcurrency; i++) fork();

  onSignals((signal) => {
    stopping = true;
    logger.info({ signal }, 'shutting down workers');
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w && !w.isDead());
    const exits = workers.map((w) => new Promise<void>((resolve) => (w.isDead() ? resolve() : w.once('exit', () => resolve()))));
    for (const w of workers) w.process.kill('SIGTERM');
    const force = setTimeout(() => workers.forEach((w) => w.process.kill('SIGKILL')), config.shutdownTimeoutMs + 5_000);
    force.unref();
    exitWhenDone(Promise.all(exits).then(async () => {
      await metricsServer?.close();
      await database.stop();
    }), logger);
  }, logger);
}

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  if (cluster.isWorker) return runServer(config, logger, true);
  if (config.webConcurrency > 1) return runPrimary(config, logger);
  return runServer(config, logger, false);
}

main().catch((error: unknown) => {
  // A refused configuration says what to change, and a system call that failed (a folder, a host
  // name, a port, a database out of reach) what it was: their stacks would say nothing more.
  const message = error instanceof Error ? error.message : '';
  // A host name of several addresses fails as an AggregateError of each address's error.
  const failed = (error instanceof AggregateError ? error.errors[0] : error) as NodeJS.ErrnoException | undefined;
  const systemCall = typeof failed?.syscall === 'string';
  console.error(message.startsWith('Invalid configuration:') ? message : systemCall ? `Could not start: ${failed!.message}` : error);
  process.exit(1);
});
