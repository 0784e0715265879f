/**
 * A pooler that refuses connections is a database that cannot serve now: PgBouncer's
 * `no more connections allowed (max_client_conn)` (08P01, its code for every error of its
 * own) is answered 503 with Retry-After, never 500, as PostgreSQL's "too many clients"
 * (53300) already is. PgBouncer's other passing refusals are classified the same way, while
 * an 08P01 that says nothing of the kind (a protocol violation: our bug) stays a 500.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toErrorResponse } from '../../src/core/failures.js';
import { eventually } from '../helpers/eventually.js';
import { call, registerUser } from '../helpers/http.js';
import { pooledTierSkip, startPooledDatabase, type PooledDatabase } from '../helpers/pooled-database.js';
import { spawnService, type SpawnedService, stopServices } from '../helpers/spawn-service.js';

/** PgBouncer's client connections: fewer than the service's pool wants under load. */
const MAX_CLIENT_CONN = 3;

let pooled: PooledDatabase;
const services: SpawnedService[] = [];

beforeAll(async () => {
  if (pooledTierSkip) return;
  pooled = await startPooledDatabase({ bouncer: { max_client_conn: MAX_CLIENT_CONN, default_pool_size: 2 } });
});

afterAll(async () => {
  await stopServices(services);
  await pooled?.stop();
});

const failure = (code: string, message: string) => Object.assign(new Error(message), { code });

describe('what a pooler or PostgreSQL says when it has no room', () => {
  it.each([
    ['08P01', 'no more connections allowed (max_client_conn)'],
    ['08P01', 'query_wait_timeout'],
    ['08P01', 'client_login_timeout (server down)'],
    ['08P01', 'server login has been failing, try again later (server_login_retry)'],
    ['08P01', 'pgbouncer cannot connect to server'],
    ['08P01', 'query_timeout'],
    ['53300', 'sorry, too many clients already'],
    ['53300', 'too many connections for role "planning"'],
    ['53300', 'remaining connection slots are reserved for roles with the SUPERUSER attribute'],
    ['XX000', 'too many connections for database "planning"'],
  ])('%s %s is 503 with Retry-After', (code, message) => {
    const response = toErrorResponse(failure(code, message));
    expect(response.status).toBe(503);
    expect(response.retryAfter).toBeGreaterThan(0);
  });

  it('an 08P01 of PostgreSQL itself (a protocol violation) stays a 500', () => {
    expect(toErrorResponse(failure('08P01', 'invalid frontend message type 0')).status).toBe(500);
  });
});

describe.skipIf(pooledTierSkip)('PgBouncer out of client connections', () => {
  it('is answered 503 with Retry-After, never 500, and the service serves again when it has room', async () => {
    const { pooledUrl, directUrl } = await pooled.createDatabase();
    const service = await spawnService({
      DATABASE_URL: pooledUrl,
      DATABASE_DIRECT_URL: directUrl,
      DATABASE_POOL_SIZE: '12',
      RATE_LIMIT_PER_MINUTE: '0',
      RATE_LIMIT_AUTH_PER_MINUTE: '0',
    });
    services.push(service);
    const { token } = await registerUser(service.url, 'crowded');
    const statuses = new Map<number, number>();
    const retryAfters = new Set<string | null>();
    // Many requests at once: the service's pool opens more connections than PgBouncer admits.
    for (let round = 0; round < 5 && !statuses.has(503); round++) {
      await Promise.all(
        Array.from({ length: 40 }, async (_, i) => {
          const res =
            i % 2
              ? await call(service.url, 'GET', '/api/users/me/tasks', { token })
              : await call(service.url, 'POST', '/api/users/me/tasks', { token, body: { task: { label: `r${round}-${i}` } } });
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          if (res.status === 503) {
            retryAfters.add(res.headers.get('retry-after'));
            expect(res.body.errors[0]).toMatchObject({ status: '503', code: 'unavailable' });
          }
        }),
      );
    }
    console.log(`max_client_conn ${MAX_CLIENT_CONN}, pool 12, 40 requests at once:`, JSON.stringify(Object.fromEntries(statuses)));
    expect(statuses.get(503)).toBeGreaterThan(0);
    expect([...statuses.keys()].filter((s) => s !== 503 && (s < 200 || s >= 300))).toEqual([]);
    expect([...retryAfters].every((r) => r !== null && Number(r) > 0)).toBe(true);
    // The refusals were PgBouncer's, and were logged as a passing failure, not as a bug (the
    // service's line may reach its pipe after the answer reached the test).
    const refusal = /no more connections allowed \(max_client_conn\)/;
    await eventually(() => refusal.test(service.output()), { message: `${refusal} in the service's output` });
    expect(service.output()).not.toMatch(/"level":50/);
    // One request at a time fits in the connections PgBouncer admits.
    for (let i = 0; i < 5; i++) expect((await call(service.url, 'GET', '/api/users/me/tasks', { token })).status).toBe(200);
  }, 90_000);
});
