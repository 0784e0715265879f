/**
 * GET /metrics on a port of its own (METRICS_PORT, on METRICS_HOST: the loopback unless
 * told otherwise), so that the figures never reach the public port. Nothing else is served.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AggregatorRegistry, type Registry } from 'prom-client';
import type { Logger } from '../core/logger.js';

/** Where a scrape's text comes from: one process's registry, or the workers' aggregated. */
export interface MetricsSource {
  render(): Promise<string>;
  readonly contentType: string;
}

export interface MetricsServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

export async function startMetricsServer(source: MetricsSource, port: number, host: string, logger: Logger): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics') {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('Not found: this port serves GET /metrics only.\n');
      return;
    }
    if (req.method !== 'GET') {
      res.writeHead(405, { 'Content-Type': 'text/plain; charset=utf-8', Allow: 'GET' }).end('Method not allowed.\n');
      return;
    }
    source.render().then(
      (text) => res.writeHead(200, { 'Content-Type': source.contentType, 'Cache-Control': 'no-store' }).end(text),
      (error: unknown) => {
        logger.error({ err: error }, 'metrics could not be collected');
        res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' }).end('Metrics could not be collected.\n');
      },
    );
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  const shownHost = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shownHost}:${bound}/metrics`,
    port: bound,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * With WEB_CONCURRENCY > 1 each worker counts in its own registry and the primary serves
 * the sum (prom-client's cluster aggregation over the IPC channel), so a scrape never sees
 * one random worker's counters.
 */
export function reportToPrimary(registry: Registry): void {
  AggregatorRegistry.setRegistries([registry]);
  new AggregatorRegistry(); // installs the worker's answer to the primary's requests
}

export function clusterMetricsSource(): MetricsSource {
  const aggregator = new AggregatorRegistry();
  return { render: () => aggregator.clusterMetrics(), contentType: aggregator.contentType };
}
