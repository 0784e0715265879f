/**
 * The database goes away while requests are in flight and new ones arrive: every request
 * ends quickly with 503 unavailable (or succeeds), /readyz says not ready, and the
 * service recovers by itself when the database is back.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { startOwnDatabase } from '../helpers/own-database.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { withinDeadline } from '../helpers/eventually.js';

let db: Awaited<ReturnType<typeof startOwnDatabase>> | undefined;
let app: TestApp | undefined;
afterAll(async () => {
  await app?.close().catch(() => undefined);
  await db?.remove();
});

describe('a database outage', () => {
  it('answers 503 fast while the database is down and recovers without a restart', async () => {
    db = await startOwnDatabase('planning-outage-');
    app = await startTestApp({ databaseUrl: db.url });
    const { token } = await app.register();
    const project = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Kept' } } });
    expect(project.status).toBe(201);

    // Requests in flight while the server stops, and more arriving after.
    const inFlight = Array.from({ length: 20 }, (_, i) =>
      i % 2 === 0
        ? app!.request('GET', '/api/users/me/projects', { token })
        : app!.request('POST', '/api/users/me/tasks', { token, body: { task: { label: `during ${i}` } } }),
    );
    const stopped = db.stop();
    const during = await Promise.all(inFlight);
    await stopped;
    for (const res of during) {
      expect([200, 201, 503]).toContain(res.status);
      if (res.status === 503) {
        expect(res.body).toEqual({
          errors: [{ status: '503', code: 'unavailable', title: 'Service unavailable', detail: expect.any(String) }],
        });
        expect(res.headers.get('retry-after')).toBe('5');
      }
    }

    // "Fast" is a deadline on the wait, not a measured duration: a hang fails with a message.
    const down = await withinDeadline(
      10_000,
      'requests sent while the database is down did not all get an answer within 10 s',
      Promise.all([
        app.request('GET', '/api/users/me/projects', { token }),
        app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'while down' } } }),
        app.request('POST', '/api/users/authorizations', { body: { username: 'x', password: 'y' } }),
        app.request('GET', '/readyz'),
      ]),
    );
    for (const res of down) {
      expect(res.status).toBe(503);
      expect(res.body.errors[0].code).toBe('unavailable');
    }
    expect((await app.request('GET', '/healthz')).status).toBe(200);

    await db.restart();
    expect((await app.request('GET', '/readyz')).status).toBe(200);
    const after = await app.request('GET', '/api/users/me/projects', { token });
    expect(after.status).toBe(200);
    expect(after.body.data.map((p: any) => p.attributes.name)).toEqual(['Kept']);
    const created = await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'after' } } });
    expect(created.status).toBe(201);
  }, 60_000);
});
