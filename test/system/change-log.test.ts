/**
 * The change log across server processes (API-CONTRACT.md §10): streams served by a
 * WEB_CONCURRENCY=2 service see every change made through another service on the same
 * database, and end when that service stops gracefully; and when a writing service is killed with SIGKILL under load, every
 * acknowledged change has its event, and a subscriber that reconnects to the surviving
 * service with its last id receives exactly the events it missed.
 */
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { EVENTS_PATH } from '../../src/changes/events.router.js';
import { eventually } from '../helpers/eventually.js';
import { call, registerUser } from '../helpers/http.js';
import { spawnService, type SpawnedService, stopServices } from '../helpers/spawn-service.js';
import { openStream, type SseStream } from '../helpers/sse.js';
import { createTestDatabase } from '../helpers/test-app.js';

const EVENTS = EVENTS_PATH;
const services: SpawnedService[] = [];
const streams: SseStream[] = [];
afterAll(async () => {
  streams.forEach((s) => s.close());
  await stopServices(services);
});

async function start(env: Record<string, string>) {
  const service = await spawnService({ RATE_LIMIT_PER_MINUTE: '0', RATE_LIMIT_AUTH_PER_MINUTE: '0', ...env });
  services.push(service);
  return service;
}

async function stream(url: string, token: string, headers: Record<string, string> = {}) {
  const s = await openStream(`${url}${EVENTS}`, { Authorization: token, ...headers });
  streams.push(s);
  expect(s.status, s.text).toBe(200);
  return s;
}

async function eventIds(databaseUrl: string, userId: number): Promise<string[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query('select seq::text as id from events where user_id = $1 order by seq', [userId])).rows.map((r) => r.id);
  } finally {
    await client.end();
  }
}

describe('across processes', () => {
  it('streams on a two-worker service see every change made through another service', async () => {
    const databaseUrl = await createTestDatabase();
    const workers = await start({ DATABASE_URL: databaseUrl, WEB_CONCURRENCY: '2' });
    const other = await start({ DATABASE_URL: databaseUrl });
    const { token } = await registerUser(other.url, 'across');
    const open = await Promise.all([1, 2, 3, 4].map(() => stream(workers.url, token)));
    for (let i = 0; i < 20; i++) {
      const through = i % 2 === 0 ? other : workers;
      expect((await call(through.url, 'POST', '/api/users/me/tasks', { token, body: { task: { label: `t${i}` } } })).status).toBe(201);
    }
    const expected = Array.from({ length: 20 }, (_, i) => String(i + 1));
    for (const s of open) {
      const ids: string[] = [];
      while (ids.length < 20) ids.push((await s.nextEvent(10_000)).id!);
      expect(ids).toEqual(expected);
    }
    // A graceful stop ends the open streams (clients reconnect elsewhere) and exits cleanly.
    workers.child.kill('SIGTERM');
    await Promise.all(open.map((s) => s.ended));
    expect(await workers.exited).toBe(0);
  }, 90_000);
});

describe('a writing service killed with SIGKILL', () => {
  it('leaves an event for every acknowledged change, and a resumed stream misses nothing', async () => {
    const databaseUrl = await createTestDatabase();
    const doomed = await start({ DATABASE_URL: databaseUrl });
    const survivor = await start({ DATABASE_URL: databaseUrl });
    const { id: userId, token } = await registerUser(doomed.url, 'killed');
    const live = await stream(doomed.url, token, { 'Last-Event-ID': '0' });
    const received: string[] = [];
    // The subscriber drops off after 10 events (its phone went into a tunnel), while the load goes on.
    const reading = (async () => {
      while (received.length < 10) received.push((await live.nextEvent(60_000)).id!);
      live.close();
    })();

    const acknowledged: number[] = [];
    let killed = false;
    let writes = 0;
    const worker = async (n: number) => {
      for (let i = 0; !killed; i++) {
        try {
          const created = await call(doomed.url, 'POST', '/api/users/me/tasks', { token, body: { task: { label: `w${n}-${i}` } } });
          if (created.status === 201) acknowledged.push(created.body.data.id);
          await call(doomed.url, 'PUT', `/api/tasks/${created.body.data.id}/order`, { token, body: { task: { order: 1 } } });
          writes += 2;
        } catch {
          return; // the server is gone
        }
      }
    };
    const load = Promise.all(Array.from({ length: 6 }, (_, n) => worker(n)));
    await eventually(() => writes >= 80, { message: '80 writes went through', timeout: 30_000, interval: 5 });
    doomed.child.kill('SIGKILL');
    killed = true;
    await doomed.exited;
    await load;
    await reading;

    // Every acknowledged creation has its event.
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const created = (await client.query(
        `select (data->>'id')::int as id from events where user_id = $1 and type = 'task.created'`, [userId],
      )).rows.map((r) => r.id);
      for (const id of acknowledged) expect(created, `task ${id}`).toContain(id);
    } finally {
      await client.end();
    }

    // The subscriber resumes on the survivor from the last id it got: exactly what it missed.
    const all = await eventIds(databaseUrl, userId);
    expect(received).toEqual(all.slice(0, received.length));
    const last = received.at(-1) ?? '0';
    const resumed = await stream(survivor.url, token, { 'Last-Event-ID': last });
    const missed: string[] = [];
    while (missed.length < all.length - received.length) missed.push((await resumed.nextEvent(10_000)).id!);
    expect(missed.length).toBeGreaterThan(0);
    expect(missed).toEqual(all.slice(received.length));
    await expect(resumed.nextEvent(500)).rejects.toThrow(/no message within/);
  }, 120_000);
});
