/**
 * No memory kept per request: after a warm-up, two equal batches of in-process requests
 * (reads, writes and error paths) must leave the heap, measured after forced full GCs,
 * about where it was. A leak of a few hundred bytes a request (a forked EntityManager,
 * a listener, a cached body kept per request) shows as megabytes over a batch.
 */
import { Agent, createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { MikroORM } from '@mikro-orm/postgresql';
import { ManualClock } from '../../src/core/clock.js';
import { createLogger } from '../../src/core/logger.js';
import { openOrm } from '../../src/app/orm.js';
import { createApp } from '../../src/http/app.js';
import { T0, createTestDatabase } from '../helpers/test-app.js';

/**
 * Requests of the warm-up, and of each of the two measured batches. MEMORY_BATCH makes the
 * batches longer for a deeper run (bench/README.md records one of 2 × 50,000 requests).
 */
const WARM_UP = 1_000;
const BATCH = Number(process.env.MEMORY_BATCH ?? 2_000);
const CONCURRENCY = 16;
/** Heap growth allowed from the end of the first batch to the end of the second. */
const MAX_GROWTH_BYTES = 2 * 1024 * 1024;

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

let orm: MikroORM;
let server: Server;
let baseUrl = '';

beforeAll(async () => {
  orm = await openOrm(await createTestDatabase(), { migrate: true, poolSize: 8 });
  const app = createApp({
    orm,
    clock: new ManualClock(T0),
    logger: createLogger('silent'),
    trustProxy: false,
    passwordHashCost: 1024,
  });
  server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  agent.destroy();
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await orm?.close(true);
});

/**
 * A JSON request through node:http on kept-alive connections: the same requests as the tests'
 * fetch (test/helpers/http.ts) sends (method, path, token, JSON body), for less of this
 * process's CPU than fetch's streams take; the service under test is the same.
 */
const agent = new Agent({ keepAlive: true });
function send(method: string, path: string, token?: string, body?: unknown): Promise<{ status: number; body: any }> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const headers: Record<string, string> = {};
  if (token) headers.Authorization = token;
  if (payload !== undefined) {
    headers['Content-Type'] = 'application/json';
    headers['Content-Length'] = String(Buffer.byteLength(payload));
  }
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${baseUrl}${path}`, { method, headers, agent }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : undefined }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** Heap in use after full collections, once it stops shrinking. */
async function settledHeap(): Promise<number> {
  let last = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 10; i++) {
    await new Promise((r) => setImmediate(r));
    gc();
    const used = process.memoryUsage().heapUsed;
    if (used >= last - 64 * 1024) return Math.min(used, last);
    last = used;
  }
  return last;
}

// A timeout that grows with MEMORY_BATCH (about 200 requests a second in the slowest runs seen).
it('the heap does not grow with the number of requests served', { timeout: 90_000 + BATCH * 10 }, async () => {
  const user = (await send('POST', '/api/users', undefined, { user: { username: 'memory', password: 'correct horse' } })).body;
  const token = user.meta.token as string;
  const project = (await send('POST', '/api/users/me/projects', token, { project: { name: 'Leaks' } })).body.data.id as number;
  const tasks: number[] = [];
  for (let i = 0; i < 20; i++) {
    tasks.push((await send('POST', '/api/users/me/tasks', token, { task: { label: `task ${i}`, project_id: project } })).body.data.id);
  }
  const states = new Map<number, string>(tasks.map((id) => [id, 'newed']));

  /** Request number n of a batch: mostly reads, some writes, some failures. */
  const request = (n: number) => {
    const task = tasks[n % tasks.length]!;
    switch (n % 10) {
      case 0:
      case 1:
        return send('GET', `/api/users/me/tasks?page=${1 + (n % 2)}`, token);
      case 2:
        return send('GET', `/api/users/me/projects`, token);
      case 3:
      case 4:
        return send('GET', `/api/tasks/${task}`, token);
      case 5:
        return send('GET', '/api/users/me', token);
      case 6: {
        // Plan and cancel in turn; a task comes back every 200 requests, never twice in flight.
        const flipped = tasks[Math.floor(n / 10) % tasks.length]!;
        const state = states.get(flipped) === 'planned' ? 'newed' : 'planned';
        states.set(flipped, state);
        return send('PUT', `/api/tasks/${flipped}/state`, token, { task: { state } });
      }
      case 7:
        return send('GET', '/api/users/me/tasks', 'not-a-valid-token-at-all-00000000'); // 401
      case 8:
        return send('GET', `/api/tasks/999999999`, token); // 404 record_not_found
      default:
        return send('PATCH', `/api/tasks/${task}`, token, { task: { label: 'x'.repeat(2_000) } }); // 422 too_long
    }
  };
  const expected: Record<number, number> = { 7: 401, 8: 404, 9: 422 };

  const batch = async (size = BATCH) => {
    let next = 0;
    const failures: string[] = [];
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < size) {
          const n = next++;
          const res = await request(n);
          const want = expected[n % 10] ?? 200;
          if (res.status !== want && failures.length < 5) failures.push(`request ${n}: ${res.status}, expected ${want}`);
        }
      }),
    );
    expect(failures).toEqual([]);
  };

  const began = Date.now();
  await batch(WARM_UP); // JIT, pools, the ORM's caches
  const start = await settledHeap();
  await batch();
  const afterFirst = await settledHeap();
  await batch();
  const afterSecond = await settledHeap();
  const mb = (n: number) => (n / 2 ** 20).toFixed(2);
  console.log(
    `heap after warm-up ${mb(start)} MB, after batch 1 ${mb(afterFirst)} MB, after batch 2 ${mb(afterSecond)} MB ` +
      `(${BATCH} requests a batch; growth in batch 2: ${mb(afterSecond - afterFirst)} MB; ${WARM_UP + 2 * BATCH} requests in ${Date.now() - began} ms)`,
  );
  expect(afterSecond - afterFirst).toBeLessThan(MAX_GROWTH_BYTES);
});
