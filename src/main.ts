/**
 * `npm start`: configuration → database → app → listen; SIGTERM/SIGINT stop it gracefully
 * (stop accepting, finish in-flight requests, close the ORM, stop the embedded PostgreSQL).
 */
import { loadConfig } from './config.js';
import { createLogger } from './core/logger.js';
import { startService } from './server.js';

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  const service = await startService({ config, logger });
  logger.info(
    { url: service.url, docs: `${service.url}/docs`, database: service.databaseDescription },
    `listening on ${service.url} (docs at ${service.url}/docs), database: ${service.databaseDescription}`,
  );

  let signals = 0;
  const shutdown = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    logger.info({ signal }, 'shutting down');
    service.stop().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
