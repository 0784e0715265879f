/**
 * What a hostile client must not be able to do (issue 10 §4): make the service store an
 * address of its choosing as a rate-limit key (or escape the limit by rotating one) behind a
 * trusted proxy; have an answer with a token cached; and the docs page must not depend on TLS.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { T0, startTestApp, type TestApp } from '../helpers/test-app.js';

const AUTH_LIMIT = 3;
let proxied: TestApp;

beforeAll(async () => {
  proxied = await startTestApp({ trustProxy: true, rateLimits: { authPerMinute: AUTH_LIMIT, perMinute: 50 }, clock: new ManualClock(T0) });
});
afterAll(async () => {
  await proxied?.close();
});

let n = 0;
const register = (forwardedFor: string) =>
  proxied.request('POST', '/api/users', {
    body: { user: { username: `client${++n}`, password: 'correct horse' } },
    headers: { 'X-Forwarded-For': forwardedFor },
  });

/** Moves the clock two minutes on: every window of the limiter is over. */
const nextMinutes = () => proxied.clock.advance(120);

describe('X-Forwarded-For behind a trusted proxy', () => {
  it('an address of 3,000 to 12,000 characters is no 500: the socket address is used instead', async () => {
    nextMinutes();
    for (const length of [3_000, 12_000]) {
      // Random text: it does not compress, so it really is that long in the index.
      const res = await register(randomBytes(length).toString('base64url').slice(0, length));
      expect(res.status, res.text.slice(0, 200)).toBe(201);
    }
  });

  it('rotating strings that are not IP addresses does not escape the limit', async () => {
    nextMinutes();
    const answers = [];
    for (let i = 0; i < AUTH_LIMIT + 2; i++) answers.push((await register(`not-an-ip-${i}-${'z'.repeat(i * 500)}`)).status);
    expect(answers).toEqual([...Array(AUTH_LIMIT).fill(201), 429, 429]);
  });

  it('a real IP address from the proxy is the client address: each address has its own limit', async () => {
    nextMinutes();
    for (const address of ['203.0.113.7', '2001:db8::7']) {
      const answers = [];
      for (let i = 0; i < AUTH_LIMIT + 1; i++) answers.push((await register(address)).status);
      expect(answers, address).toEqual([...Array(AUTH_LIMIT).fill(201), 429]);
    }
  });

  it('every stored rate-limit key is a fixed-size digest, no address or token in clear', async () => {
    const rows = await proxied.orm.em.fork().execute<{ key: string }[]>('select "key" from rate_limit_hits');
    expect(rows.length).toBeGreaterThan(0);
    for (const { key } of rows) expect(key).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('Cache-Control', () => {
  it('is no-store on every answer under /api and /trpc, successes and errors alike', async () => {
    const { token } = await (async () => {
      nextMinutes();
      const res = await register('198.51.100.1');
      return { token: res.body.meta.token as string };
    })();
    const answers = [
      await fetch(`${proxied.baseUrl}/api/users/me`, { headers: { Authorization: token } }),
      await fetch(`${proxied.baseUrl}/API/users/me`, { headers: { Authorization: token } }),
      await fetch(`${proxied.baseUrl}/api/users/me`),
      await fetch(`${proxied.baseUrl}/api/nowhere`),
      await fetch(`${proxied.baseUrl}/trpc/users.me`, { headers: { Authorization: token } }),
      await fetch(`${proxied.baseUrl}/trpc/users.me`),
      await fetch(`${proxied.baseUrl}/api/users/authorizations`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Forwarded-For': '198.51.100.2' },
        body: JSON.stringify({ username: `client${n}`, password: 'correct horse' }),
      }),
    ];
    for (const res of answers) expect(res.headers.get('cache-control'), `${res.url} ${res.status}`).toBe('no-store');
    expect(answers.map((r) => r.status)).toEqual([200, 200, 401, 404, 200, 401, 201]);
  });
});

describe('the docs page over plain http', () => {
  it('its Content-Security-Policy does not upgrade requests to https', async () => {
    const res = await fetch(`${proxied.baseUrl}/docs/`);
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('upgrade-insecure-requests');
  });
});
