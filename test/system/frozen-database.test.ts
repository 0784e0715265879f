/**
 * A database that stops answering without going away (every process of the server stopped
 * where it is, as a frozen host or a cut network leaves it: no connection is refused, no
 * statement fails): the service finds it within about two seconds by its stalled statements
 * (src/db/stalled-statements.ts), answers 503 unavailable fast on both doors and on the change
 * log's endpoints, and serves again as soon as the database answers. A keyed write whose
 * answer was a 503 lands exactly once when it is retried (API-CONTRACT.md §17).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { withinDeadline, eventually } from '../helpers/eventually.js';
import { startOwnDatabase } from '../helpers/own-database.js';
import { spawnService, type SpawnedService } from '../helpers/spawn-service.js';

let db: Awaited<ReturnType<typeof startOwnDatabase>> | undefined;
let service: SpawnedService | undefined;
let frozen = false;
afterAll(async () => {
  if (frozen) await db?.thaw();
  service?.child.kill('SIGKILL');
  await db?.remove();
});

async function send(path: string, init: { method?: string; token?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  const started = performance.now();
  const res = await fetch(`${service!.url}${path}`, {
    method: init.method ?? 'GET',
    headers: { ...(init.token ? { Authorization: init.token } : {}), ...(init.body ? { 'Content-Type': 'application/json' } : {}), ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: text ? JSON.parse(text) : undefined, ms: performance.now() - started };
}

const codeOf = (res: Awaited<ReturnType<typeof send>>) => res.body?.errors?.[0]?.code ?? res.body?.error?.json?.data?.code;

describe('a database that stops answering', () => {
  it('is answered 503 within seconds, then at once, on both doors and the change log, and served again when it answers', async () => {
    db = await startOwnDatabase('planning-frozen-');
    service = await spawnService({ DATABASE_URL: db.url, RATE_LIMIT_PER_MINUTE: '0', RATE_LIMIT_AUTH_PER_MINUTE: '0' });
    const registered = await send('/api/users', { method: 'POST', body: { user: { username: 'frozen', password: 'correct horse' } } });
    const token = registered.body.meta.token as string;
    expect((await send('/api/users/me/tasks', { method: 'POST', token, body: { task: { label: 'before' } } })).status).toBe(201);

    frozen = true;
    await db.freeze();
    const keyed = { method: 'POST', token, body: { task: { label: 'keyed' } }, headers: { 'Idempotency-Key': 'frozen-1' } };
    // The first requests wait for the stall to be found: a statement older than a second,
    // then a probe that gets no answer within a second. A hang fails with this message.
    const first = await withinDeadline(
      6_000,
      'requests sent when the database stopped answering did not all get an answer within 6 s',
      Promise.all([send('/api/users/me/tasks', { token }), send('/api/users/me/tasks', keyed), send('/trpc/tasks.list', { token })]),
    );
    for (const res of first) {
      expect(res.status).toBe(503);
      expect(codeOf(res)).toBe('unavailable');
    }
    // Then every door answers within the outage's short wait for a probe.
    const then = await Promise.all([
      send('/api/users/me/projects', { token }),
      send('/api/users/me/events', { token }),
      send('/api/users/me/events', { token, headers: { Accept: 'text/event-stream' } }),
      send('/trpc/users.me', { token }),
      send('/api/users/authorizations', { method: 'POST', body: { username: 'frozen', password: 'correct horse' } }),
    ]);
    for (const res of then) {
      expect(res.status).toBe(503);
      expect(codeOf(res)).toBe('unavailable');
      expect(res.retryAfter).toBe('5');
      expect(res.ms).toBeLessThan(1_000);
    }

    frozen = false;
    await db.thaw();
    await eventually(async () => (await send('/api/users/me/tasks', { token })).status === 200, { message: 'a read once the database answers again' });
    // The keyed write, retried: it lands once, whether or not its first attempt reached the database.
    await eventually(async () => (await send('/api/users/me/tasks', keyed)).status === 201, { message: 'the keyed write, retried' });
    const labels = (await send('/api/users/me/tasks', { token })).body.data.map((t: { attributes: { label: string } }) => t.attributes.label);
    expect(labels).toEqual(['before', 'keyed']);
  }, 60_000);
});
