/**
 * A stream's limits live in the database (the token's request budget, its 10 stream leases):
 * when the database is gone they cannot be checked, and opening a stream is refused cleanly,
 * on both doors: 503 `unavailable` with Retry-After, within a deadline (never a hang),
 * never a 500 and never a stream let through unchecked, and logged as every 503 is (sampled, at
 * warn), never as a failure of ours. Once the database is back, streams open again without a
 * restart.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { DomainError } from '../../src/core/errors.js';
import { openStream, openTrpcStream, type SseStream } from '../helpers/sse.js';
import { startOwnDatabase } from '../helpers/own-database.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { withinDeadline } from '../helpers/eventually.js';

let db: Awaited<ReturnType<typeof startOwnDatabase>> | undefined;
let app: TestApp | undefined;
const streams: SseStream[] = [];
afterAll(async () => {
  streams.forEach((s) => s.close());
  await app?.close().catch(() => undefined);
  await db?.remove();
});

async function restStream(token: string): Promise<SseStream> {
  const s = await openStream(`${app!.baseUrl}/api/users/me/events`, { Authorization: token });
  streams.push(s);
  return s;
}

/** `events.onChange` on /trpc (openTrpcStream), closed after the file's tests. */
async function trpcStream(token: string): Promise<{ stream: SseStream; refusal: any }> {
  const opened = await openTrpcStream(app!.baseUrl, token);
  streams.push(opened.stream);
  return opened;
}

describe('opening a stream while the database is gone', () => {
  it('is 503 with Retry-After on both doors, fast, and streams open again once it is back', async () => {
    db = await startOwnDatabase('planning-stream-limits-outage-');
    const logged: Array<{ level: number; msg: string }> = [];
    const logStream = new Writable({
      write(chunk: Buffer | string, _encoding, callback) {
        for (const line of chunk.toString().split('\n')) if (line) logged.push(JSON.parse(line));
        callback();
      },
    });
    app = await startTestApp({ databaseUrl: db.url, eventsIdleMs: 200, rateLimits: { authPerMinute: 30, perMinute: 100 }, logger: pino({ level: 'info' }, logStream) });
    const user = await app.register();
    const { token } = user;
    expect((await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'first' } } })).status).toBe(201);
    expect((await restStream(token)).status).toBe(200);

    await db.stop();
    const [rest, trpc] = await withinDeadline(
      10_000,
      'opening a stream while the database is down got no answer within 10 s',
      Promise.all([restStream(token), trpcStream(token)]),
    );
    expect(rest.status, rest.text).toBe(503);
    expect(JSON.parse(rest.text!)).toEqual({
      errors: [{ status: '503', code: 'unavailable', title: 'Service unavailable', detail: expect.any(String) }],
    });
    expect(rest.headers.get('retry-after')).toBe('5');
    expect(trpc.refusal.data).toMatchObject({ code: 'unavailable', httpStatus: 503 });
    expect(trpc.stream.headers.get('retry-after')).toBe('5');
    // Logged as a 503 is, at warn and sampled; not as a failure of ours (error, level 50).
    expect(logged.filter((l) => l.level >= 50)).toEqual([]);
    expect(logged.some((l) => l.level === 40 && l.msg === 'database unavailable: answered 503')).toBe(true);

    // The stream limit itself (the lease), past the request's own checks: refused the same way.
    const refusal = await withinDeadline(10_000, 'taking a lease got no answer within 10 s', app.events.subscribe(user.id, 'any-token').catch((e: unknown) => e));
    expect(refusal).toBeInstanceOf(DomainError);
    expect(refusal).toMatchObject({ status: 503, code: 'unavailable', retryAfter: 5 });

    await db.restart();
    const deadline = Date.now() + 20_000;
    let again = await restStream(token);
    while (again.status === 503 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      again = await restStream(token);
    }
    expect(again.status, again.text).toBe(200);
    expect((await trpcStream(token)).refusal).toBeNull();
  }, 60_000);
});
