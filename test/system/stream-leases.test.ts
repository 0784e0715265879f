/**
 * The leases behind the limit of open event streams per token (src/changes/stream-leases.ts,
 * src/changes/event-hub.ts), on the real database with two instances of the app on it:
 * - taking leases in parallel never gives a token more than 10, whatever the interleaving (the
 *   count runs after the token's lock is held, not on a snapshot from before it);
 * - the 10 are shared by both instances and both doors (REST by header or ticket, tRPC);
 * - a graceful stop gives its streams' slots back at once; closing streams deletes their leases;
 * - an open stream's lease is renewed; one that lapsed is taken again while the token has
 *   room, and otherwise its stream ends with 503 so that its client reconnects (and is
 *   counted again);
 * - housekeeping deletes expired leases and keeps live ones.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { pruneStreamLeases, streamLeases } from '../../src/changes/stream-leases.js';
import { MAX_STREAMS_PER_TOKEN } from '../../src/changes/event-hub.js';
import { openStream, openTrpcStream, type SseStream } from '../helpers/sse.js';
import { startTestApp, useTestApp, type TestApp } from '../helpers/test-app.js';
import { hashAccessToken } from '../../src/users/credentials.js';

const one = useTestApp({ eventsIdleMs: 150 });
const EVENTS = '/api/users/me/events';
const streams: SseStream[] = [];
afterAll(() => streams.forEach((s) => s.close()));

async function sql<T = any>(query: string, params: unknown[] = []): Promise<T[]> {
  return one.orm.em.fork().execute(query, params) as Promise<T[]>;
}

const liveLeases = async (userId: number) =>
  (await sql<{ n: number }>('select count(*)::int as n from event_stream_leases where user_id = ? and expires_at > clock_timestamp()', [userId]))[0]!.n;

/** Lease rows of the user, live or expired. */
const allLeases = async (userId: number) =>
  (await sql<{ n: number }>('select count(*)::int as n from event_stream_leases where user_id = ?', [userId]))[0]!.n;

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`did not happen within ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A user with one event in its log (a tRPC subscription from id 0 shows it is open by sending it). */
async function userWithAnEvent(app: TestApp = one) {
  const user = await app.register();
  expect((await app.request('POST', '/api/users/me/tasks', { token: user.token, body: { task: { label: 'first' } } })).status).toBe(201);
  return user;
}

async function restStream(app: TestApp, headers: Record<string, string>, query = ''): Promise<SseStream> {
  const s = await openStream(`${app.baseUrl}${EVENTS}${query}`, headers);
  streams.push(s);
  return s;
}

async function ticketStream(app: TestApp, token: string): Promise<SseStream> {
  const ticket = await app.request('POST', `${EVENTS}/tickets`, { token });
  expect(ticket.status).toBe(201);
  return restStream(app, {}, `?ticket=${ticket.body.data.attributes.ticket}`);
}

/** `events.onChange` on /trpc (openTrpcStream), closed after the file's tests. */
async function trpcStream(app: TestApp, token: string): Promise<{ stream: SseStream; refusal: any }> {
  const opened = await openTrpcStream(app.baseUrl, token);
  streams.push(opened.stream);
  return opened;
}

describe('taking leases', () => {
  it(`gives a token exactly ${MAX_STREAMS_PER_TOKEN} of 40 leases taken at once, round after round, and other tokens theirs`, async () => {
    const user = await one.register();
    const leases = streamLeases(() => one.orm.em.fork());
    for (let round = 0; round < 4; round++) {
      const token = `token-${round}`;
      const taken = await Promise.all(
        Array.from({ length: 40 }, () => leases.take({ id: randomUUID(), userId: user.id, tokenHash: token }, MAX_STREAMS_PER_TOKEN, 60_000)),
      );
      expect(taken.filter(Boolean), `round ${round}`).toHaveLength(MAX_STREAMS_PER_TOKEN);
    }
    const [row] = await sql<{ tokens: number; most: number }>(
      'select count(distinct token_hash)::int as tokens, max(n)::int as most from (select token_hash, count(*) as n from event_stream_leases where user_id = ? group by token_hash) t',
      [user.id],
    );
    expect(row).toEqual({ tokens: 4, most: MAX_STREAMS_PER_TOKEN });
    await sql('delete from event_stream_leases where user_id = ?', [user.id]);
  });

  it('lets an expired lease\'s slot be taken, and housekeeping deletes expired leases only', async () => {
    const user = await one.register();
    const leases = streamLeases(() => one.orm.em.fork());
    for (let i = 0; i < MAX_STREAMS_PER_TOKEN; i++) expect(await leases.take({ id: randomUUID(), userId: user.id, tokenHash: 'full' }, MAX_STREAMS_PER_TOKEN, 60_000)).toBe(true);
    expect(await leases.take({ id: randomUUID(), userId: user.id, tokenHash: 'full' }, MAX_STREAMS_PER_TOKEN, 60_000)).toBe(false);
    // One of them expired (its process died): its slot is free for the next open.
    await sql(`update event_stream_leases set expires_at = clock_timestamp() - interval '1 s' where id = (select id from event_stream_leases where user_id = ? limit 1)`, [user.id]);
    expect(await leases.take({ id: randomUUID(), userId: user.id, tokenHash: 'full' }, MAX_STREAMS_PER_TOKEN, 60_000)).toBe(true);

    await sql(`insert into event_stream_leases (user_id, id, token_hash, expires_at) values (?, ?, 'dead', clock_timestamp() - interval '1 s')`, [user.id, randomUUID()]);
    expect(await pruneStreamLeases(one.orm.em.fork())).toBeGreaterThanOrEqual(1);
    expect((await sql<{ n: number }>(`select count(*)::int as n from event_stream_leases where user_id = ? and token_hash = 'dead'`, [user.id]))[0]!.n).toBe(0);
    expect(await liveLeases(user.id)).toBe(MAX_STREAMS_PER_TOKEN);
    await sql('delete from event_stream_leases where user_id = ?', [user.id]);
  });
});

describe('streams of one token on two instances', () => {
  it('share the 10 over both doors and tickets; a graceful stop gives its slots back at once; closed streams delete their leases', async () => {
    const two = await startTestApp({ databaseUrl: one.databaseUrl, eventsIdleMs: 150 });
    let twoClosed = false;
    try {
      const user = await userWithAnEvent();
      const { token } = user;
      const opened = [
        ...(await Promise.all([1, 2, 3].map(() => restStream(one, { Authorization: token })))),
        ...(await Promise.all([1, 2, 3].map(() => ticketStream(two, token)))),
      ];
      expect(opened.map((s) => s.status)).toEqual(Array(6).fill(200));
      const onTrpc = await Promise.all([trpcStream(one, token), trpcStream(two, token), trpcStream(two, token), trpcStream(two, token)]);
      expect(onTrpc.map((s) => s.refusal)).toEqual([null, null, null, null]);
      expect(one.events.size + two.events.size).toBe(10);
      expect(await liveLeases(user.id)).toBe(10);

      const refusedRest = await restStream(two, { Authorization: token });
      expect(refusedRest.status).toBe(429);
      expect(JSON.parse(refusedRest.text!).errors[0].code).toBe('rate_limited');
      expect(refusedRest.headers.get('retry-after')).toBe('5');
      expect((await ticketStream(one, token)).status).toBe(429);
      expect((await trpcStream(one, token)).refusal.data).toMatchObject({ code: 'rate_limited', httpStatus: 429 });

      // The second instance stops: its six streams end and their slots are free as it has stopped.
      await two.close();
      twoClosed = true;
      // Deleted, not left to expire: no row of theirs is left, live or not.
      expect(await allLeases(user.id)).toBe(4);
      const reopened = await Promise.all(Array.from({ length: 6 }, () => restStream(one, { Authorization: token })));
      expect(reopened.map((s) => s.status)).toEqual(Array(6).fill(200));
      expect((await restStream(one, { Authorization: token })).status).toBe(429);

      // Every stream closed by its client: every lease deleted (not left to expire).
      for (const s of [...opened, ...reopened, ...onTrpc.map((t) => t.stream)]) s.close();
      await until('the leases of closed streams are deleted', async () => (await allLeases(user.id)) === 0);
      expect(one.events.size).toBe(0);
    } finally {
      if (!twoClosed) await two.close();
    }
  });
});

describe('an open stream\'s lease', () => {
  it('is renewed while the stream is open; a lapsed one is taken again while the token has room, and its stream ends with 503 when the token has none', async () => {
    const user = await userWithAnEvent();
    const s = await restStream(one, { Authorization: user.token }, '?after=1');
    expect(s.status).toBe(200);
    const expiry = async () =>
      (await sql<{ id: string; expires_at: number }>('select id, extract(epoch from expires_at)::float8 as expires_at from event_stream_leases where user_id = ?', [user.id]))[0];
    const first = (await expiry())!;
    await until('the lease is renewed', async () => {
      const now = await expiry();
      return now !== undefined && now.expires_at > first.expires_at;
    });

    // Its lease lapsed and was pruned (its process stalled): it takes it again, the stream goes on.
    await sql('delete from event_stream_leases where user_id = ?', [user.id]);
    await until('the lapsed lease is taken again', async () => (await expiry())?.id === first.id);
    expect((await one.request('POST', '/api/users/me/tasks', { token: user.token, body: { task: { label: 'still here' } } })).status).toBe(201);
    expect((await s.nextEvent()).id).toBe('2');

    // Lapsed again, and meanwhile 10 other streams of the token took every slot: it ends with 503.
    const tokenHash = hashAccessToken(user.token);
    await sql(
      `with gone as (delete from event_stream_leases where user_id = ? returning 1)
       insert into event_stream_leases (user_id, id, token_hash, expires_at)
       select ?, gen_random_uuid(), ?, clock_timestamp() + interval '1 minute' from generate_series(1, ?)`,
      [user.id, user.id, tokenHash, MAX_STREAMS_PER_TOKEN],
    );
    let last = await s.nextEvent(5_000);
    while (last.event !== 'error') last = await s.nextEvent(5_000);
    expect(JSON.parse(last.data).errors[0].code).toBe('unavailable');
    await s.ended;
    expect((await restStream(one, { Authorization: user.token })).status).toBe(429);
    await sql('delete from event_stream_leases where user_id = ?', [user.id]);
    const again = await restStream(one, { Authorization: user.token }, '?after=2');
    expect(again.status).toBe(200);
    expect(await liveLeases(user.id)).toBe(1);
    again.close();
  });
});
