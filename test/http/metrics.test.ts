/**
 * GET /metrics (issue #15) of an in-process service (startService): served on METRICS_PORT
 * only, in Prometheus' text format, with counters that move with what the service does, and
 * nothing of its users in it. The service as `npm start` runs it (one process, and a cluster
 * whose primary sums its workers) is in test/system/metrics.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/core/logger.js';
import { startService, type RunningService } from '../../src/server.js';
import { call, registerUser } from '../helpers/http.js';
import { CREATED, sample, scrape, scrapeUntil } from '../helpers/metrics.js';
import { openStream } from '../helpers/sse.js';
import { createTestDatabase } from '../helpers/test-app.js';

/** An in-process service with its metrics server, 10 logins or registrations a minute. */
async function startMetricsService(): Promise<RunningService> {
  const databaseUrl = await createTestDatabase();
  const config = {
    ...loadConfig({}),
    databaseUrl,
    port: 0,
    host: '127.0.0.1',
    passwordHashCost: 1024,
    rateLimitAuthPerMinute: 10,
    rateLimitPerMinute: 0,
    metricsPort: 0,
  };
  return startService({ config, logger: createLogger('silent') });
}

describe('metrics of an in-process service', () => {
  let service: RunningService;
  let metricsUrl: string;

  beforeAll(async () => {
    service = await startMetricsService();
    metricsUrl = service.metricsUrl!;
  });

  afterAll(async () => {
    await service?.stop();
  });

  it('serves the exposition on its own loopback port, and nothing else there', async () => {
    expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    expect(new URL(metricsUrl).port).not.toBe(String(service.port));
    const other = await fetch(new URL('/healthz', metricsUrl));
    expect(other.status).toBe(404);
    const post = await fetch(metricsUrl, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET');
  });

  it('is not served on the public port', async () => {
    const res = await fetch(`${service.url}/metrics`);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({
      errors: [expect.objectContaining({ status: '404', code: 'missing_endpoint' })],
    });
  });

  it('counts N task creations under tasks.create 201, with their statements', async () => {
    const { token } = await registerUser(service.url, 'counted');
    const before = await scrape(metricsUrl);
    const N = 4;
    for (let i = 0; i < N; i++) {
      expect((await call(service.url, 'POST', '/api/users/me/tasks', { token, body: { task: { label: `t${i}` } } })).status).toBe(201);
    }
    // One over /trpc: the same operation through the other door.
    const trpc = await fetch(`${service.url}/trpc/tasks.create`, {
      method: 'POST',
      headers: { Authorization: token, 'Content-Type': 'application/json' },
      body: JSON.stringify({ json: { task: { label: 'by trpc' } } }),
    });
    expect(trpc.status).toBe(200);
    const after = await scrape(metricsUrl);

    const delta = (name: string, labels: Record<string, string>) => (sample(after, name, labels) ?? 0) - (sample(before, name, labels) ?? 0);
    expect(delta('planning_http_requests_total', CREATED)).toBe(N);
    expect(delta('planning_http_request_duration_seconds_count', CREATED)).toBe(N);
    expect(delta('planning_http_request_duration_seconds_bucket', { ...CREATED, le: '+Inf' })).toBe(N);
    expect(delta('planning_http_requests_total', { operation: 'tasks.create', door: 'trpc', method: 'POST', status: '200' })).toBe(1);
    // Statements are counted per request: a creation sends two (the token's lookup, the call of
    // its write function, which locks, inserts and appends its event); its NOTIFY goes after the
    // answer, outside every request (src/writes/announcer.ts).
    expect(delta('planning_db_statements_per_request_count', { operation: 'tasks.create' })).toBe(N + 1);
    expect(delta('planning_db_statements_per_request_sum', { operation: 'tasks.create' })).toBe(2 * (N + 1));
    // No request waits for its connection forever: each statement's acquisition was timed.
    expect(delta('planning_db_pool_acquire_seconds_count', {})).toBeGreaterThanOrEqual(N + 1);
  });

  it('labels requests with an operation from a fixed set, never a URL', async () => {
    const { token } = await registerUser(service.url, 'labels');
    const task = await call(service.url, 'POST', '/api/users/me/tasks', { token, body: { task: { label: 'x' } } });
    await call(service.url, 'GET', `/api/tasks/${task.body.data.id}?fields=secret`, { token });
    await call(service.url, 'GET', '/api/tasks/99999999', { token });
    await fetch(`${service.url}/no/such/path/12345`);
    await fetch(`${service.url}/healthz`);
    const text = await scrape(metricsUrl);
    expect(sample(text, 'planning_http_requests_total', { operation: 'tasks.get', door: 'rest', method: 'GET', status: '200' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'planning_http_requests_total', { operation: 'tasks.get', status: '404' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'planning_http_requests_total', { operation: 'unmatched', method: 'GET', status: '404' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'planning_http_requests_total', { operation: 'healthz', status: '200' })).toBeGreaterThanOrEqual(1);
    const operations = new Set([...text.matchAll(/operation="([^"]*)"/g)].map((m) => m[1]));
    for (const operation of operations) expect(operation).toMatch(/^[a-z]+(\.[a-zA-Z]+)?$/);
  });

  it('counts an idempotent replay', async () => {
    const { token } = await registerUser(service.url, 'replayer');
    const before = sample(await scrape(metricsUrl), 'planning_idempotent_replays_total', { operation: 'tasks.create' }) ?? 0;
    const send = () =>
      fetch(`${service.url}/api/users/me/tasks`, {
        method: 'POST',
        headers: { Authorization: token, 'Content-Type': 'application/json', 'Idempotency-Key': 'metrics-replay-1' },
        body: JSON.stringify({ task: { label: 'once' } }),
      });
    expect((await send()).status).toBe(201);
    const again = await send();
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const after = sample(await scrape(metricsUrl), 'planning_idempotent_replays_total', { operation: 'tasks.create' });
    expect(after).toBe(before + 1);
  });

  it('shows an open event stream, and forgets it once closed', async () => {
    const { token } = await registerUser(service.url, 'streamer');
    const open = await openStream(`${service.url}/api/users/me/events`, { Authorization: token });
    expect(open.status).toBe(200);
    const during = await scrapeUntil(metricsUrl, (t) => sample(t, 'planning_event_streams_open') === 1);
    expect(sample(during, 'planning_event_streams_open')).toBe(1);
    open.close();
    const after = await scrapeUntil(metricsUrl, (t) => sample(t, 'planning_event_streams_open') === 0);
    expect(sample(after, 'planning_event_streams_open')).toBe(0);
    // The closed stream counts as a request of its own fixed operation.
    expect(sample(after, 'planning_http_requests_total', { operation: 'events.stream', door: 'rest', method: 'GET', status: '200' })).toBe(1);
  });

  it('has the pool gauges and the process metrics, and no token, username or id', async () => {
    const username = 'secretive_user';
    const login = await call(service.url, 'POST', '/api/users', { body: { user: { username, password: 'password1' } } });
    const token: string | undefined = login.body?.meta?.token;
    const text = await scrape(metricsUrl);
    for (const name of ['planning_db_pool_max_connections', 'planning_db_pool_waiting']) expect(sample(text, name)).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'planning_db_pool_max_connections')).toBe(service.poolSize);
    expect(sample(text, 'planning_db_pool_connections', { state: 'in_use' })).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'planning_db_pool_connections', { state: 'idle' })).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(sample(text, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
    expect(sample(text, 'nodejs_eventloop_lag_p99_seconds')).toBeGreaterThanOrEqual(0);
    for (const secret of ['counted', 'replayer', 'streamer', username, 'metrics-replay-1', 'Bearer', '/api/', '/trpc', 'secret']) {
      expect(text).not.toContain(secret);
    }
    if (token) expect(text).not.toContain(token.replace(/^Bearer /, ''));
  });
});

describe('metrics of an in-process service whose limit is spent', () => {
  // A service of its own: the refusals it counts would refuse the other tests' registrations.
  let service: RunningService;
  let metricsUrl: string;

  beforeAll(async () => {
    service = await startMetricsService();
    metricsUrl = service.metricsUrl!;
  });

  afterAll(async () => {
    await service?.stop();
  });

  it('counts a rate-limit refusal (429)', async () => {
    const before = sample(await scrape(metricsUrl), 'planning_rate_limit_refusals_total', { limit: 'auth' });
    expect(before).toBe(0);
    // RATE_LIMIT_AUTH_PER_MINUTE is 10 here: the attempts of this test run into it.
    let refused = 0;
    for (let i = 0; i < 20 && refused === 0; i++) {
      const res = await call(service.url, 'POST', '/api/users/authorizations', { body: { username: 'nobody', password: 'wrong-password' } });
      if (res.status === 429) refused += 1;
    }
    expect(refused).toBe(1);
    const text = await scrape(metricsUrl);
    expect(sample(text, 'planning_rate_limit_refusals_total', { limit: 'auth' })).toBe(1);
    expect(sample(text, 'planning_http_requests_total', { operation: 'users.authorize', status: '429' })).toBe(1);
  });
});
