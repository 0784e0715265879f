/**
 * The rate-limit headers openapi.json declares (test/rules/openapi-lint.test.ts), as the
 * running app sends them: on successes and refusals of a limited operation, and exposed to a
 * browser through CORS.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { T0, startTestApp, type TestApp } from '../helpers/test-app.js';

const doc = JSON.parse(readFileSync(new URL('../../openapi.json', import.meta.url), 'utf8'));

describe('what the service sends', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ rateLimits: { authPerMinute: 30, perMinute: 100 }, clock: new ManualClock(T0) });
  });
  afterAll(async () => {
    await app?.close();
  });

  it('the declared RateLimit headers come with successes and refusals of a limited operation', async () => {
    const { token } = await app.register();
    const answers = [
      await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Limited' } } }),
      await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'bad name' } } }),
      await app.request('POST', '/api/users/authorizations', { body: { username: 'nobody', password: 'wrong horse' } }),
    ];
    expect(answers.map((a) => a.status)).toEqual([201, 422, 401]);
    for (const answer of answers) {
      expect(answer.headers.get('ratelimit-policy')).toMatch(new RegExp(doc.components.headers['RateLimit-Policy'].schema.pattern));
      for (const name of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']) expect(answer.headers.get(name), name).toMatch(/^[0-9]+$/);
    }
  });
});

describe('what a browser may read', () => {
  it('CORS exposes every declared rate-limit header, RateLimit-Policy included', async () => {
    const cors = await startTestApp({ corsOrigins: ['https://app.example'], rateLimits: { authPerMinute: 30, perMinute: 100 } });
    try {
      const res = await fetch(`${cors.baseUrl}/api/users/me`, { headers: { Origin: 'https://app.example' } });
      const exposed = (res.headers.get('access-control-expose-headers') ?? '').split(',').map((h) => h.trim().toLowerCase());
      for (const name of ['RateLimit-Policy', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After', 'X-Request-Id']) {
        expect(exposed, name).toContain(name.toLowerCase());
      }
    } finally {
      await cors.close();
    }
  });
});
