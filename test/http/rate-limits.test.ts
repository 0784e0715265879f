/**
 * Rate limits against clients that spread their attempts (issue 10 §4): the window slides
 * (twice the limit never fits across a minute boundary), a login is limited per username
 * whatever the address, and requests with an unknown token are limited per address.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { T0, seconds, useTestApp } from '../helpers/test-app.js';

const LIMIT = 3;
const app = useTestApp({ trustProxy: true, rateLimits: { authPerMinute: LIMIT, perMinute: 100 }, clock: new ManualClock(T0) });

/** To `second` seconds into a minute that follows two quiet ones. */
function quietMinuteAt(second: number) {
  const now = seconds(app.clock.now().getTime());
  app.clock.advance(60 - (now % 60) + 120 + second);
}

let n = 0;
async function newUser(from: string) {
  const username = `spread${++n}`;
  const res = await app.request('POST', '/api/users', { body: { user: { username, password: 'correct horse' } }, headers: { 'X-Forwarded-For': from } });
  expect(res.status, res.text).toBe(201);
  return { username, token: res.body.meta.token as string };
}

const login = (username: string, from: string, password = 'correct horse') =>
  app.request('POST', '/api/users/authorizations', { body: { username, password }, headers: { 'X-Forwarded-For': from } });

describe('sliding window', () => {
  it('the limit spent at the end of a minute is still spent just after it', async () => {
    const { username } = await newUser('192.0.2.1');
    quietMinuteAt(58);
    for (let i = 0; i < LIMIT; i++) expect((await login(username, '192.0.2.2')).status).toBe(201);
    app.clock.advance(3); // the next minute has begun: a fixed window would allow 3 more
    const next = await login(username, '192.0.2.2');
    expect(next.status, next.text).toBe(429);
    expect(next.body.errors[0].code).toBe('rate_limited');
    // Its Retry-After is honest: waiting that long lets one through.
    app.clock.advance(Number(next.headers.get('retry-after')));
    expect((await login(username, '192.0.2.2')).status).toBe(201);
  });
});

describe('logins per username', () => {
  it('one account cannot be tried from many addresses', async () => {
    const { username } = await newUser('192.0.2.10');
    quietMinuteAt(0);
    const answers = [];
    for (let i = 0; i < LIMIT + 2; i++) answers.push((await login(username.toUpperCase(), `198.51.100.${i + 1}`, `guess ${i}`)).status);
    expect(answers).toEqual([...Array(LIMIT).fill(401), 429, 429]);
    // The right password from yet another address: still refused, the account's budget is spent.
    expect((await login(username, '198.51.100.99')).status).toBe(429);
    // Another account from a fresh address is not affected.
    const other = await newUser('192.0.2.11');
    expect((await login(other.username, '198.51.100.100')).status).toBe(201);
  });
});

describe('unknown tokens', () => {
  it('are limited per client address; known tokens and other addresses are not affected', async () => {
    const { token } = await newUser('192.0.2.20');
    quietMinuteAt(0);
    const me = (authorization: string, from: string) =>
      app.request('GET', '/api/users/me', { headers: { Authorization: authorization, 'X-Forwarded-For': from } });
    const answers = [];
    for (let i = 0; i < LIMIT + 1; i++) answers.push(await me(`unknown-token-${i}-${'x'.repeat(40)}`, '203.0.113.50'));
    expect(answers.map((a) => a.status)).toEqual([...Array(LIMIT).fill(401), 429]);
    expect(answers[0]!.headers.get('ratelimit-limit')).toBe(String(LIMIT));
    expect(answers[LIMIT]!.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
    const trpc = await fetch(`${app.baseUrl}/trpc/users.me`, { headers: { Authorization: `unknown-token-trpc-${'x'.repeat(40)}`, 'X-Forwarded-For': '203.0.113.50' } });
    expect(trpc.status).toBe(429);
    expect((await me(token, '203.0.113.50')).status).toBe(200);
    expect((await me(`unknown-token-elsewhere-${'x'.repeat(40)}`, '203.0.113.51')).status).toBe(401);
  });
});
