/**
 * The change log through a database outage (API-CONTRACT.md §10): an open stream ends with
 * an error event (it never hangs) once PostgreSQL is gone, and after PostgreSQL is back a
 * client that reconnects with its last id receives what it missed.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { openStream } from '../helpers/sse.js';
import { startOwnDatabase } from '../helpers/own-database.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

let db: Awaited<ReturnType<typeof startOwnDatabase>> | undefined;
let app: TestApp | undefined;
afterAll(async () => {
  await app?.close().catch(() => undefined);
  await db?.remove();
});

describe('the change log through a database outage', () => {
  it('ends open streams with an error event, and a resumed stream misses nothing once the database is back', async () => {
    db = await startOwnDatabase('planning-log-outage-');
    app = await startTestApp({ databaseUrl: db.url, eventsIdleMs: 200 });
    const { token } = await app.register();
    const url = `${app.baseUrl}/api/users/me/events`;

    const before = await openStream(url, { Authorization: token });
    expect(before.status).toBe(200);
    expect((await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'before' } } })).status).toBe(201);
    const seen = await before.nextEvent();
    expect(seen.id).toBe('1');

    await db.stop();
    // Within a few idle ticks the stream says why it ends, and ends.
    const last = await before.nextEvent(10_000);
    expect(last.event).toBe('error');
    expect(JSON.parse(last.data).errors[0].code).toBe('service_unavailable');
    await before.ended;

    await db.restart();
    expect((await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'after' } } })).status).toBe(201);
    const resumed = await openStream(url, { Authorization: token, 'Last-Event-ID': seen.id! });
    expect(resumed.status).toBe(200);
    const missed = await resumed.nextEvent();
    expect([missed.id, JSON.parse(missed.data).data.attributes.label]).toEqual(['2', 'after']);
    // And live events flow again (woken by the reconnected listener, at worst by the next idle tick).
    expect((await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'live' } } })).status).toBe(201);
    expect((await resumed.nextEvent(5_000)).id).toBe('3');
    resumed.close();
  }, 60_000);
});
