/**
 * GET /metrics (issue #15) of the service as `npm start` runs it, spawned: main.ts's wiring of
 * METRICS_PORT, one process and a cluster whose primary sums its workers. The figures of an
 * in-process service are in test/http/metrics.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { call, registerUser } from '../helpers/http.js';
import { CREATED, sample, scrape } from '../helpers/metrics.js';
import { freePort } from '../helpers/net.js';
import { spawnService } from '../helpers/spawn-service.js';
import { createTestDatabase } from '../helpers/test-app.js';

describe('metrics of the service as started by npm start', () => {
  it('serves GET /metrics on METRICS_PORT only when set, and closes it on stop', async () => {
    const databaseUrl = await createTestDatabase();
    const metricsPort = await freePort();
    const service = await spawnService({ DATABASE_URL: databaseUrl, METRICS_PORT: String(metricsPort), RATE_LIMIT_AUTH_PER_MINUTE: '0' });
    try {
      const line = service.output().split('\n').find((l) => l.includes('"metrics"'));
      expect(JSON.parse(line!).metrics).toBe(`http://127.0.0.1:${metricsPort}/metrics`);
      const { token } = await registerUser(service.url, 'spawned');
      await call(service.url, 'POST', '/api/users/me/tasks', { token, body: { task: { label: 'x' } } });
      const text = await scrape(`http://127.0.0.1:${metricsPort}/metrics`);
      expect(sample(text, 'planning_http_requests_total', CREATED)).toBe(1);
      expect(sample(text, 'process_cpu_seconds_total')).toBeGreaterThan(0);
    } finally {
      service.child.kill('SIGTERM');
      expect(await service.exited).toBe(0);
    }
    await expect(fetch(`http://127.0.0.1:${metricsPort}/metrics`)).rejects.toThrow();
  }, 60_000);

  it('sums the workers of a cluster on the primary', async () => {
    const databaseUrl = await createTestDatabase();
    const metricsPort = await freePort();
    const service = await spawnService({
      DATABASE_URL: databaseUrl,
      WEB_CONCURRENCY: '2',
      METRICS_PORT: String(metricsPort),
      RATE_LIMIT_AUTH_PER_MINUTE: '0',
    });
    try {
      const { token } = await registerUser(service.url, 'clustered');
      const N = 10;
      // New connections each, so the primary spreads them over both workers.
      await Promise.all(
        Array.from({ length: N }, (_, i) =>
          fetch(`${service.url}/api/users/me/tasks`, {
            method: 'POST',
            headers: { Authorization: token, 'Content-Type': 'application/json', Connection: 'close' },
            body: JSON.stringify({ task: { label: `c${i}` } }),
          }).then((r) => expect(r.status).toBe(201)),
        ),
      );
      const text = await scrape(`http://127.0.0.1:${metricsPort}/metrics`);
      expect(sample(text, 'planning_http_requests_total', CREATED)).toBe(N);
      expect(sample(text, 'planning_db_statements_per_request_count', { operation: 'tasks.create' })).toBe(N);
      // Both workers' pools are in the sum.
      const max = sample(text, 'planning_db_pool_max_connections')!;
      expect(max % 2).toBe(0);
    } finally {
      service.child.kill('SIGTERM');
      expect(await service.exited).toBe(0);
    }
  }, 90_000);
});
