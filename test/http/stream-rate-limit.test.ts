/**
 * Opening an event stream is a request (API-CONTRACT.md §10): it counts against the token's
 * RATE_LIMIT_PER_MINUTE in the same rows as every other request, on both doors (the REST
 * stream, with the Authorization header or a ticket, and the tRPC subscription), and a token
 * whose budget is spent cannot open one: 429 with the headers of every other 429. An unknown
 * token or a used ticket on the stream counts against the client address, like a login.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { openStream, openTrpcStream, type SseStream } from '../helpers/sse.js';
import { T0, seconds, useTestApp } from '../helpers/test-app.js';

const LIMIT = 4;
const AUTH_LIMIT = 3;
const clock = new ManualClock(T0);
const app = useTestApp({ rateLimits: { authPerMinute: AUTH_LIMIT, perMinute: LIMIT }, clock, eventsIdleMs: 200 });
const EVENTS = '/api/users/me/events';
const LIMIT_HEADERS = ['ratelimit-policy', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after'];

/** To the first second of the minute after next: the previous windows weigh nothing then. */
function nextWindow() {
  const now = seconds(clock.now().getTime());
  clock.advance(60 - (now % 60) + 60);
}

/** A user with one event in its log (a subscription from id 0 shows it is open by sending it), in a fresh window. */
async function userInFreshWindow() {
  const user = await app.register();
  expect((await app.request('POST', '/api/users/me/tasks', { token: user.token, body: { task: { label: 'first' } } })).status).toBe(201);
  nextWindow();
  return user;
}

const streams: SseStream[] = [];
afterAll(() => streams.forEach((s) => s.close()));
async function restStream(headers: Record<string, string>, query = ''): Promise<SseStream> {
  const s = await openStream(`${app.baseUrl}${EVENTS}${query}`, headers);
  streams.push(s);
  return s;
}

/** `events.onChange` on /trpc (openTrpcStream), closed after the file's tests. */
async function trpcStream(token: string): Promise<{ stream: SseStream; refusal: any }> {
  const opened = await openTrpcStream(app.baseUrl, token);
  streams.push(opened.stream);
  return opened;
}

/** The typed client's subscription: the error it ends with (it fails the test if it opens instead). */
function clientRefusal(token: string): Promise<any> {
  return new Promise((resolve, reject) => {
    const subscription = app.trpc(token).events.onChange.subscribe({ lastEventId: '0' }, {
      onData: () => {
        subscription.unsubscribe();
        reject(new Error('the subscription opened'));
      },
      onError: (error) => {
        subscription.unsubscribe();
        resolve(error);
      },
    });
  });
}

const limitHeadersOf = (headers: Headers) => LIMIT_HEADERS.filter((name) => headers.has(name));

describe('opening a stream is a request of its token', () => {
  it('counts on both doors and with a ticket; once the budget is spent neither door opens one, with the headers of every 429', async () => {
    const { token } = await userInFreshWindow();
    const byHeader = await restStream({ Authorization: token });
    expect(byHeader.status).toBe(200);
    expect(byHeader.headers.get('ratelimit-limit')).toBe(String(LIMIT));
    expect(byHeader.headers.get('ratelimit-remaining')).toBe('3');

    const ticket = await app.request('POST', `${EVENTS}/tickets`, { token });
    expect(ticket.headers.get('ratelimit-remaining')).toBe('2');
    const byTicket = await restStream({}, `?ticket=${ticket.body.data.attributes.ticket}`);
    expect(byTicket.status).toBe(200);
    expect(byTicket.headers.get('ratelimit-remaining')).toBe('1');

    const onTrpc = await trpcStream(token);
    expect(onTrpc.refusal).toBeNull();
    expect(onTrpc.stream.headers.get('ratelimit-remaining')).toBe('0');
    const open = app.events.size;

    // The budget is spent: a stream is refused as any other request is.
    const refused = await restStream({ Authorization: token });
    expect(refused.status, refused.text).toBe(429);
    expect(refused.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(JSON.parse(refused.text!)).toEqual({
      errors: [{ status: '429', code: 'rate_limited', title: 'Too many requests', detail: expect.any(String) }],
    });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused.headers.get('ratelimit-remaining')).toBe('0');
    const other = await app.request('GET', '/api/users/me/projects', { token });
    expect(other.status).toBe(429);
    expect(limitHeadersOf(refused.headers)).toEqual(limitHeadersOf(other.headers));
    expect(limitHeadersOf(refused.headers)).toEqual(LIMIT_HEADERS);

    const trpcRefused = await trpcStream(token);
    expect(trpcRefused.refusal.data).toMatchObject({ code: 'rate_limited', httpStatus: 429 });
    expect(limitHeadersOf(trpcRefused.stream.headers)).toEqual(LIMIT_HEADERS);
    const viaClient = await clientRefusal(token);
    expect(viaClient.data).toMatchObject({ code: 'rate_limited', httpStatus: 429 });

    const secondTicket = await app.request('POST', `${EVENTS}/tickets`, { token });
    expect(secondTicket.status).toBe(429);
    expect(app.events.size, 'a refused request opened a stream').toBe(open);

    // The next windows give the budget back, to streams as to the rest.
    nextWindow();
    expect((await restStream({ Authorization: token })).status).toBe(200);
  });

  it('shares one budget with the other requests: a token that spent it on requests opens no stream on either door', async () => {
    const { token } = await userInFreshWindow();
    for (let i = 0; i < LIMIT; i++) expect((await app.request('GET', '/api/users/me/projects', { token })).status).toBe(200);
    const refused = await restStream({ Authorization: token });
    expect(refused.status, refused.text).toBe(429);
    expect(JSON.parse(refused.text!).errors[0].code).toBe('rate_limited');
    expect((await trpcStream(token)).refusal.data).toMatchObject({ code: 'rate_limited', httpStatus: 429 });
  });

  it('counts an unknown token or a used ticket against the client address, like a login', async () => {
    const { token } = await userInFreshWindow();
    const ticket = (await app.request('POST', `${EVENTS}/tickets`, { token })).body.data.attributes.ticket;
    expect((await restStream({}, `?ticket=${ticket}`)).status).toBe(200);
    const answers = [
      await restStream({ Authorization: `unknown-${'x'.repeat(40)}` }),
      await restStream({}, `?ticket=${ticket}`), // used already
      await restStream({ Authorization: `unknown-${'y'.repeat(40)}` }),
      await restStream({ Authorization: `unknown-${'z'.repeat(40)}` }),
    ];
    expect(answers.map((a) => a.status)).toEqual([...Array(AUTH_LIMIT).fill(401), 429]);
    expect(answers[0]!.headers.get('ratelimit-limit')).toBe(String(AUTH_LIMIT));
    expect(Number(answers[AUTH_LIMIT]!.headers.get('retry-after'))).toBeGreaterThan(0);
    // The token's own budget is untouched by them.
    expect((await restStream({ Authorization: token })).status).toBe(200);
  });
});
