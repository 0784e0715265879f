/**
 * Several server processes on one database (WEB_CONCURRENCY=2): the cross-row invariants
 * and the rate limits hold under parallel load spread over the workers.
 */
import { availableParallelism } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { call, registerUser } from '../helpers/http.js';
import { spawnService, type SpawnedService } from '../helpers/spawn-service.js';
import { createTestDatabase } from '../helpers/test-app.js';

const DUE = Math.floor(Date.now() / 1000) + 30 * 86_400;
let service: SpawnedService;
let databaseUrl: string;
/** The users of the tests, registered before any test spends the login limit (in any order). */
let users: Record<'limits' | 'orders' | 'limited', { id: number; token: string }>;

async function sql<T>(query: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query(query, params)).rows as T[];
  } finally {
    await client.end();
  }
}

/** Pids of the workers that logged a request for `path`. */
function servingPids(path: RegExp): Set<number> {
  const pids = new Set<number>();
  for (const line of service.output().split('\n')) {
    if (!line.startsWith('{')) continue;
    // The request log names the path only, under req.path.
    const entry = JSON.parse(line) as { msg?: string; req?: { path?: string }; pid: number };
    if (entry.msg === 'request' && entry.req?.path && path.test(entry.req.path)) pids.add(entry.pid);
  }
  return pids;
}

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  service = await spawnService({
    DATABASE_URL: databaseUrl,
    WEB_CONCURRENCY: '2',
    RATE_LIMIT_AUTH_PER_MINUTE: '6',
    RATE_LIMIT_PER_MINUTE: '0',
  });
  users = {
    limits: await registerUser(service.url, 'limits'),
    orders: await registerUser(service.url, 'orders'),
    limited: await registerUser(service.url, 'limited'),
  };
}, 60_000);

afterAll(async () => {
  if (!service) return;
  service.child.kill('SIGTERM');
  expect(await service.exited).toBe(0);
});

describe('two worker processes on one database', () => {
  it('report the cores they may use on the start line, and warn when the workers outnumber them', () => {
    const lines = service
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level: number; msg: string; workers?: number; cores?: number });
    const start = lines.find((line) => line.msg.startsWith('listening on'));
    expect(start).toMatchObject({ workers: 2, cores: availableParallelism() });
    const warned = lines.filter((line) => line.msg.startsWith('WEB_CONCURRENCY='));
    expect(warned.map((line) => [line.level, line.workers, line.cores])).toEqual(availableParallelism() < 2 ? [[40, 2, availableParallelism()]] : []);
  });

  it('starts at most 3 of 8 projects started in parallel', async () => {
    const { token } = users.limits;
    const ids: number[] = [];
    for (let i = 0; i < 8; i++) {
      ids.push((await call(service.url, 'POST', '/api/users/me/projects', { token, body: { project: { name: `p${i}` } } })).body.data.id);
    }
    const results = await Promise.all(
      ids.map((id) => call(service.url, 'PUT', `/api/projects/${id}/state`, { token, body: { project: { state: 'started', due_at: DUE } } })),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(3);
    const refused = results.filter((r) => r.status === 422);
    expect(refused).toHaveLength(5);
    for (const r of refused) expect(r.body.errors[0].code).toBe('reached_max_started');
    expect(servingPids(/\/api\/projects\/\d+\/state/).size).toBe(2);
    const [row] = await sql<{ n: string }>(`select count(*) as n from projects where state = 'started'`);
    expect(Number(row!.n)).toBe(3);
  });

  it('gives 30 tasks created in parallel the orders 1..30, and keeps them a permutation under parallel reorders', async () => {
    const { id: userId, token } = users.orders;
    const created = await Promise.all(
      Array.from({ length: 30 }, (_, i) => call(service.url, 'POST', '/api/users/me/tasks', { token, body: { task: { label: `t${i}` } } })),
    );
    expect(created.every((r) => r.status === 201)).toBe(true);
    expect(created.map((r) => r.body.data.attributes.order).sort((a, b) => a - b)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    expect(servingPids(/\/api\/users\/me\/tasks/).size).toBe(2);

    const ids = created.map((r) => r.body.data.id as number);
    const moves = Array.from({ length: 40 }, (_, i) => ({ id: ids[(i * 7) % 30]!, order: ((i * 11) % 30) + 1 }));
    const reorders = await Promise.all(moves.map((m) => call(service.url, 'PUT', `/api/tasks/${m.id}/order`, { token, body: { task: { order: m.order } } })));
    expect(reorders.every((r) => r.status === 200)).toBe(true);
    const rows = await sql<{ order: number }>(`select "order" from tasks where user_id = $1 order by "order"`, [userId]);
    expect(rows.map((r) => r.order)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
  });

  it('counts the login rate limit across both workers', async () => {
    const attempts = await Promise.all(
      Array.from({ length: 20 }, () => call(service.url, 'POST', '/api/users/authorizations', { body: { username: 'limited', password: 'password1' } })),
    );
    expect(servingPids(/\/api\/users\/authorizations/).size).toBe(2);
    // Group the answers by the one-minute window they were counted in (the Date header plus
    // RateLimit-Reset is the window's end while requests remain, later once none does): no
    // window may let more than 6 attempts through, which per-process counters would (up to 6
    // on each worker).
    const allowedByWindow = new Map<number, number>();
    for (const r of attempts) {
      expect([201, 429]).toContain(r.status);
      const windowEnd = Math.round(Date.parse(r.headers.get('date')!) / 1000) + Number(r.headers.get('ratelimit-reset'));
      if (r.status === 201) allowedByWindow.set(windowEnd, (allowedByWindow.get(windowEnd) ?? 0) + 1);
      else {
        expect(r.body.errors[0].code).toBe('rate_limited');
        expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
      }
      expect(r.headers.get('ratelimit-limit')).toBe('6');
    }
    for (const allowed of allowedByWindow.values()) expect(allowed).toBeLessThanOrEqual(6);
    expect(attempts.filter((r) => r.status === 429).length).toBeGreaterThanOrEqual(8);
  });
});
