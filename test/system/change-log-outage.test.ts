/**
 * The change log through a database outage (API-CONTRACT.md §10): an open stream ends with
 * an error event (it never hangs) once PostgreSQL is gone, and after PostgreSQL is back a
 * client that reconnects with its last id receives what it missed. An idle stream learns of
 * the outage from its process's LISTEN connection, which the outage cuts: it ends at once,
 * not at its next idle tick (15 s by default).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { openStream } from '../helpers/sse.js';
import { startOwnDatabase } from '../helpers/own-database.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * The tests' own PostgreSQL, started once for whichever test comes first (an initdb, a start
 * and the migrations of a database); each test runs an app of its own on it, with users of
 * its own (a user's events are numbered from 1), and takes it down for its outage. A test that
 * finds it down (the other one's outage) starts it again first.
 */
let db: Awaited<ReturnType<typeof startOwnDatabase>> | undefined;
let down = false;
async function ownDatabase() {
  if (!db) db = await startOwnDatabase('planning-log-outage-');
  else if (down) await db.restart();
  down = false;
  return db;
}
async function outage(database: NonNullable<typeof db>) {
  down = true;
  await database.stop();
}
let app: TestApp | undefined;
let idleApp: TestApp | undefined;
afterAll(async () => {
  await app?.close().catch(() => undefined);
  await idleApp?.close().catch(() => undefined);
  await db?.remove();
});

describe('the change log through a database outage', () => {
  it('ends open streams with an error event, and a resumed stream misses nothing once the database is back', async () => {
    const db = await ownDatabase();
    app = await startTestApp({ databaseUrl: db.url, eventsIdleMs: 200 });
    const { token } = await app.register();
    const url = `${app.baseUrl}/api/users/me/events`;

    const before = await openStream(url, { Authorization: token });
    expect(before.status).toBe(200);
    expect((await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'before' } } })).status).toBe(201);
    const seen = await before.nextEvent();
    expect(seen.id).toBe('1');

    await outage(db);
    // Within a few idle ticks the stream says why it ends, and ends.
    const last = await before.nextEvent(10_000);
    expect(last.event).toBe('error');
    expect(JSON.parse(last.data).errors[0].code).toBe('unavailable');
    await before.ended;

    await ownDatabase();
    // The service serves again once a probe reaches the database (within a few hundred ms,
    // longer on a busy machine): the write is retried under one key until it lands, once.
    const after = () => app!.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'after' } }, headers: { 'Idempotency-Key': 'after' } });
    await eventually(async () => (await after()).status === 201, { message: 'a write after the database came back' });
    const resumed = await openStream(url, { Authorization: token, 'Last-Event-ID': seen.id! });
    expect(resumed.status).toBe(200);
    const missed = await resumed.nextEvent();
    expect([missed.id, JSON.parse(missed.data).data.attributes.label]).toEqual(['2', 'after']);
    // And live events flow again (woken by the reconnected listener, at worst by the next idle tick).
    expect((await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'live' } } })).status).toBe(201);
    expect((await resumed.nextEvent(5_000)).id).toBe('3');
    resumed.close();
    // Closed while its database is up, before the other test's outage.
    await app.close();
    app = undefined;
  }, 60_000);

  it('ends an idle stream with an error event as soon as its listener loses the database, not at its next idle tick', async () => {
    const db = await ownDatabase();
    idleApp = await startTestApp({ databaseUrl: db.url }); // the default idle tick: 15 s
    const { token } = await idleApp.register();
    const stream = await openStream(`${idleApp.baseUrl}/api/users/me/events`, { Authorization: token });
    expect(stream.status).toBe(200);
    expect((await idleApp.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'seen' } } })).status).toBe(201);
    expect((await stream.nextEvent()).id).toBe('1');

    const stoppedAt = performance.now();
    await outage(db);
    const last = await stream.nextEvent(5_000);
    expect(last.event).toBe('error');
    expect(JSON.parse(last.data).errors[0].code).toBe('unavailable');
    await stream.ended;
    // Well within one idle tick of 15 s.
    expect(performance.now() - stoppedAt).toBeLessThan(5_000);
  }, 30_000);
});
