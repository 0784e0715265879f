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

  // A query read with POST, a mutation with GET, a subscription with POST: no endpoint answers
  // them (tRPC's own answer to the last was a 200 event stream carrying the error).
  it.each([
    ['POST', '/trpc/users.me'],
    ['GET', '/trpc/projects.create'],
    ['POST', '/trpc/events.onChange'],
  ])('%s %s, a procedure of another method, is 404 missing_endpoint', async (method, path) => {
    const res = await rawRequest(new URL(path, app.baseUrl), method, { Authorization: token, 'Content-Type': 'application/json' }, method === 'POST' ? '{}' : '');
    expect([res.status, res.headers.get('content-type')], res.text).toEqual([404, 'application/json; charset=utf-8']);
    expect(res.body.error.json.data).toMatchObject({ code: 'missing_endpoint', httpStatus: 404 });
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

describe('batches of several kinds', () => {
  const KINDS_DETAIL = 'A batch holds queries only or mutations only; a subscription is called on its own, not in a batch.';

  it.each([
    ['GET', 'users.me,projects.create', '{"0":{},"1":{"json":{"project":{"name":"mixed"}}}}'],
    ['POST', 'users.me,projects.create', '{"0":{},"1":{"json":{"project":{"name":"mixed"}}}}'],
    ['GET', 'events.onChange,projects.list', '{"0":{},"1":{}}'],
    ['GET', 'events.onChange', '{"0":{}}'],
  ])('%s %s?batch=1 is one 400 invalid tRPC error in JSON, and nothing runs', async (method, paths, input) => {
    const before = await app.request('GET', '/api/users/me/projects', { token });
    const url = `${app.baseUrl}/trpc/${paths}?batch=1${method === 'GET' ? `&input=${encodeURIComponent(input)}` : ''}`;
    const response = await fetch(url, {
      method,
      headers: { Authorization: token, ...(method === 'POST' ? { 'Content-Type': 'application/json' } : {}) },
      body: method === 'POST' ? input : undefined,
    });
    expect(response.status).toBe(400);
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const { error } = (await response.json()) as any;
    expect(error.json.data).toMatchObject({ code: 'invalid', httpStatus: 400 });
    expect(onlyError(error.json.data)).toMatchObject({ status: '400', code: 'invalid', detail: KINDS_DETAIL });
    expect((await app.request('GET', '/api/users/me/projects', { token })).body).toEqual(before.body);
  });
});

describe('media type of every answer (API-CONTRACT.md §1)', () => {
  it.each([
    ['a query', 'GET', '/trpc/users.me', undefined, 200],
    ['a query in a batch', 'GET', '/trpc/users.me,users.me?batch=1', undefined, 200],
    ['a mutation', 'POST', '/trpc/projects.create', '{"json":{"project":{"name":"typed"}}}', 200],
    ['a refused mutation', 'POST', '/trpc/projects.create', '{"json":{"project":{}}}', 422],
    ['an unknown procedure', 'GET', '/trpc/projects.nothing', undefined, 404],
    ['input that is not JSON', 'GET', '/trpc/users.me?input=%7Bx', undefined, 400],
  ])('%s answers application/json; charset=utf-8', async (_what, method, path, body, status) => {
    const response = await fetch(`${app.baseUrl}${path}`, {
      method,
      headers: { Authorization: token, ...(body ? { 'Content-Type': 'application/json' } : {}) },
      body,
    });
    expect(response.status).toBe(status);
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    // The body is JSON (tRPC's own shape: a result or an error).
    expect(Object.keys((await response.json()) as object)).toEqual(expect.arrayContaining([expect.stringMatching(/^(result|error|0)$/)]));
  });
});

describe('an operation that takes no input (API-CONTRACT.md §8: the input REST would read)', () => {
  // REST ignores a body or query sent to these; /trpc ignores any input sent to them alike.
  const queries = ['users.me', 'tokens.current', 'webhooks.list', 'users.export'];
  const inputs = ['{"json":{}}', '{"json":{"x":1}}', '{"json":5}', '{"json":null}', '{"json":[1]}'];

  it.each(queries)('query %s answers as with no input whatever input is sent', async (name) => {
    const bare = await rawRequest(new URL(`/trpc/${name}`, app.baseUrl), 'GET', { Authorization: token }, '');
    expect(bare.status, bare.text).toBe(200);
    for (const input of inputs) {
      const res = await rawRequest(new URL(`/trpc/${name}?input=${encodeURIComponent(input)}`, app.baseUrl), 'GET', { Authorization: token }, '');
      expect([res.status, res.text], input).toEqual([200, bare.text]);
    }
  });

  it.each(['events.ticket', 'users.revoke'])('mutation %s runs with any input sent', async (name) => {
    for (const input of inputs) {
      const { token: own } = await app.register();
      const res = await rawRequest(new URL(`/trpc/${name}`, app.baseUrl), 'POST', { Authorization: own, 'Content-Type': 'application/json' }, input);
      expect(res.status, `${input}: ${res.text}`).toBe(200);
      if (name === 'users.revoke') expect((await rawRequest(new URL('/trpc/users.me', app.baseUrl), 'GET', { Authorization: own }, '')).status).toBe(401);
    }
  });
});
