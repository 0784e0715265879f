/**
 * The change log through a database outage (API-CONTRACT.md §10): an open stream ends with
 * an error event (it never hangs) once PostgreSQL is gone, and after PostgreSQL is back a
 * client that reconnects with its last id receives what it missed. An idle stream learns of
 * the outage from its process's LISTEN connection, which the outage cuts: it ends at once,
 * not at its next idle tick (15 s by default).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { openStream } from '../helpers/sse.js';
import { startOwnDatabase } from '../helpers/own-database.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

let db: Awaited<ReturnType<typeof startOwnDatabase>> | undefined;
let app: TestApp | undefined;
let idleDb: Awaited<ReturnType<typeof startOwnDatabase>> | undefined;
let idleApp: TestApp | undefined;
afterAll(async () => {
  await app?.close().catch(() => undefined);
  await idleApp?.close().catch(() => undefined);
  await db?.remove();
  await idleDb?.remove();
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

  it('ends an idle stream with an error event as soon as its listener loses the database, not at its next idle tick', async () => {
    idleDb = await startOwnDatabase('planning-log-outage-idle-');
    idleApp = await startTestApp({ databaseUrl: idleDb.url }); // the default idle tick: 15 s
    const { token } = await idleApp.register();
    const stream = await openStream(`${idleApp.baseUrl}/api/users/me/events`, { Authorization: token });
    expect(stream.status).toBe(200);
    expect((await idleApp.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'seen' } } })).status).toBe(201);
    expect((await stream.nextEvent()).id).toBe('1');

    const stoppedAt = performance.now();
    await idleDb.stop();
    const last = await stream.nextEvent(5_000);
    expect(last.event).toBe('error');
    expect(JSON.parse(last.data).errors[0].code).toBe('service_unavailable');
    await stream.ended;
    // Well within one idle tick of 15 s.
    expect(performance.now() - stoppedAt).toBeLessThan(5_000);
  }, 30_000);
});
