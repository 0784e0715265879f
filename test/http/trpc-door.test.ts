/**
 * The /trpc door against clients that do not use the typed client: methods other than GET
 * and POST, and batches beyond the documented cap (issue 10 §4).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { rawRequest } from '../helpers/http.js';
import { onlyError, useTestApp } from '../helpers/test-app.js';
import { MAX_BATCH_CALLS } from '../../src/core/limits.js';

const app = useTestApp();
let token: string;
beforeAll(async () => {
  ({ token } = await app.register());
});

describe('methods', () => {
  // 404 rather than 405: /trpc answers GET and POST only, and the contract's code for a
  // method no endpoint answers is missing_endpoint (API-CONTRACT.md §2), as a tRPC error (§8).
  it.each(['TRACE', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD'])('%s /trpc/... is 404 missing_endpoint, unauthenticated too', async (method) => {
    for (const path of ['/trpc/users.me', '/trpc/projects.create?batch=1', '/trpc']) {
      const res = await rawRequest(new URL(path, app.baseUrl), method, {}, '');
      expect(res.status, `${method} ${path}: ${res.text}`).toBe(404);
      if (method !== 'HEAD') {
        expect(res.body.error.json.data).toMatchObject({ code: 'missing_endpoint', httpStatus: 404 });
        expect(onlyError(res.body.error.json.data)).toMatchObject({ status: '404', code: 'missing_endpoint' });
      }
    }
  });
});

describe('batches', () => {
  const batchUrl = (n: number) => `${app.baseUrl}/trpc/${Array.from({ length: n }, () => 'users.me').join(',')}?batch=1`;

  it(`a batch of ${MAX_BATCH_CALLS} calls is served`, async () => {
    const response = await fetch(batchUrl(MAX_BATCH_CALLS), { headers: { Authorization: token } });
    const body = (await response.json()) as any[];
    expect(response.status).toBe(200);
    expect(body).toHaveLength(MAX_BATCH_CALLS);
    expect(body.every((call) => call.result)).toBe(true);
  });

  it.each([MAX_BATCH_CALLS + 1, 5 * MAX_BATCH_CALLS])('a batch of %i calls is 400 batch_too_large for every call, and none runs', async (n) => {
    const before = await app.request('GET', '/api/users/me/projects', { token });
    const input = Object.fromEntries(Array.from({ length: n }, (_, i) => [i, { json: { project: { name: `B${i}` } } }]));
    const url = `${app.baseUrl}/trpc/${Array.from({ length: n }, () => 'projects.create').join(',')}?batch=1`;
    const response = await fetch(url, {
      method: 'POST',
      headers: { Authorization: token, 'Content-Type': 'application/json' },
      body: JSON.stringify(input),
    });
    const body = (await response.json()) as any[];
    expect(response.status).toBe(400);
    expect(body).toHaveLength(n);
    for (const call of body) {
      expect(call.error.json.data).toMatchObject({ code: 'batch_too_large', httpStatus: 400 });
      expect(call.error.json.message).toBe(`A batch may hold at most ${MAX_BATCH_CALLS} calls; this one holds ${n}.`);
    }
    const after = await app.request('GET', '/api/users/me/projects', { token });
    expect(after.body).toEqual(before.body);
  });

  it('a batch of 1,000 calls (far over the cap) is one 400 batch_too_large tRPC error, not 1,000, and none runs', async () => {
    const before = await app.request('GET', '/api/users/me/projects', { token });
    const n = 1_000;
    const input = Object.fromEntries(Array.from({ length: n }, (_, i) => [i, { json: { project: { name: `B${i}` } } }]));
    const response = await fetch(`${app.baseUrl}/trpc/${Array.from({ length: n }, () => 'projects.create').join(',')}?batch=1`, {
      method: 'POST',
      headers: { Authorization: token, 'Content-Type': 'application/json' },
      body: JSON.stringify(input),
    });
    expect(response.status).toBe(400);
    // One error, not an array: tRPC's batch link reads it as the error of every call.
    const { error } = (await response.json()) as any;
    expect(error.json.message).toBe(`A batch may hold at most ${MAX_BATCH_CALLS} calls; this one holds ${n}.`);
    expect(error.json.data).toMatchObject({ code: 'batch_too_large', httpStatus: 400 });
    expect(onlyError(error.json.data)).toMatchObject({ status: '400', code: 'batch_too_large', detail: `A batch may hold at most ${MAX_BATCH_CALLS} calls; this one holds ${n}.` });
    expect((await app.request('GET', '/api/users/me/projects', { token })).body).toEqual(before.body);
  });
});
