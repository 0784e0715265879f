/**
 * Transport-level behaviour of API-CONTRACT.md §1 and §2, black box over HTTP: unknown
 * routes and methods, tokens, media types, JSON parsing, body size, body wrappers, request
 * ids, health and readiness, and the same codes through the tRPC door.
 */
import { createServer } from 'node:http';
import { gzipSync } from 'node:zlib';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { BODY_LIMIT_BYTES } from '../../src/core/limits.js';
import { createLogger } from '../../src/core/logger.js';
import { openOrm } from '../../src/app/orm.js';
import { createApp } from '../../src/http/app.js';
import { expectError } from '../helpers/envelope.js';
import { rawRequest, request } from '../helpers/http.js';
import { T0, createTestDatabase, useTestApp, type ApiResponse } from '../helpers/test-app.js';

const app = useTestApp();
let token: string;
let projectId: number;
beforeAll(async () => {
  ({ token } = await app.register());
  const created = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Base' } } });
  if (created.status !== 201) throw new Error(`setup: ${created.status} ${created.text}`);
  projectId = created.body.data.id;
});

const JSON_UTF8 = 'application/json; charset=utf-8';
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Nothing in an error body may reveal internals. */
function expectNoLeak(text: string) {
  expect(text).not.toMatch(/\bat\s+\S+\s+\(?[^\s)]*:\d+:\d+\)?/); // stack frames "at fn (file:1:2)"
  expect(text).not.toMatch(/\n\s+at /);
  expect(text).not.toMatch(/TRPCError|ZodError|DomainError|"stack"|node_modules|\.ts:\d+|\.js:\d+/);
  expect(text).not.toMatch(/\b(select|insert into|update \w+ set|delete from)\b/i);
  expect(text).not.toMatch(/\bSQL\b|postgres|mikro-orm/i);
}

/**
 * The exact error envelope of API-CONTRACT §2: `errors` and nothing else at the top level,
 * each error with status/code/title/detail (+ source only when given), JSON content type,
 * a request id, and no internals.
 */
function expectErrorEnvelope(res: ApiResponse, status: number, code: string, source?: Record<string, string>) {
  expectError(res, status, code, source);
  expect(res.headers.get('x-request-id')).toMatch(SANE_REQUEST_ID);
  expectNoLeak(res.text);
}

/** A request whose body has no Content-Type header at all. */
async function requestWithoutContentType(method: string, path: string, body: string, auth = token): Promise<ApiResponse> {
  // Bytes, not a string: fetch gives a string body a text/plain Content-Type of its own.
  return app.request(method, path, { token: auth, rawBody: new TextEncoder().encode(body) });
}

describe('unknown route or wrong method: 404 missing_endpoint', () => {
  it.each([
    ['GET', '/api/nope'],
    ['GET', '/nope'],
    ['GET', '/api'],
    ['POST', '/api/nope/deeper'],
    ['PUT', '/api/users/me/projects'],
    ['PATCH', '/api/users'],
    ['DELETE', '/api/users/me'],
    ['POST', '/api/projects/1/state'],
    ['GET', '/api/users/me/projects/extra'],
  ])('%s %s', async (method, path) => {
    const withToken = await app.request(method, path, { token, body: method === 'GET' || method === 'DELETE' ? undefined : { project: { name: 'x' } } });
    expectErrorEnvelope(withToken, 404, 'missing_endpoint');
    // No token: still 404 (routing comes before authentication).
    const anonymous = await app.request(method, path);
    expectErrorEnvelope(anonymous, 404, 'missing_endpoint');
  });

  it('a wrong method with a non-JSON body is still 404, not 415', async () => {
    const res = await app.request('PUT', '/api/users/me/projects', { token, rawBody: 'hello', headers: { 'Content-Type': 'text/plain' } });
    expectErrorEnvelope(res, 404, 'missing_endpoint');
  });
});

describe('authentication: 401 unauthorized', () => {
  it.each([
    ['no Authorization header', undefined],
    ['an unknown token', 'Z'.repeat(43)],
    ['an unknown Bearer token', `Bearer ${'Z'.repeat(43)}`],
    ['garbage', 'not a token at all'],
  ])('GET /api/users/me/projects with %s', async (_what, header) => {
    const res = await app.request('GET', '/api/users/me/projects', { headers: header === undefined ? {} : { Authorization: header } });
    expectErrorEnvelope(res, 401, 'unauthorized');
  });

  it('a POST with a valid body but no token is 401', async () => {
    const res = await app.request('POST', '/api/users/me/projects', { body: { project: { name: 'NoToken' } } });
    expectErrorEnvelope(res, 401, 'unauthorized');
  });

  it('a revoked token is 401 on every endpoint', async () => {
    const user = await app.register();
    expect((await app.request('GET', '/api/users/me/projects', { token: user.token })).status).toBe(200);
    const revoked = await app.request('DELETE', '/api/users/me/authorizations/current', { token: user.token });
    expect(revoked.status).toBe(204);
    for (const [method, path, body] of [
      ['GET', '/api/users/me', undefined],
      ['GET', '/api/users/me/projects', undefined],
      ['POST', '/api/users/me/projects', { project: { name: 'Revoked' } }],
      ['GET', '/api/users/me/tasks', undefined],
      ['PUT', `/api/projects/${projectId}/state`, { project: { state: 'paused' } }],
    ] as const) {
      expectErrorEnvelope(await app.request(method, path, { token: user.token, body }), 401, 'unauthorized');
    }
  });
});

describe('media type: 415 unsupported_media_type', () => {
  it.each([
    'text/plain',
    'text/plain; charset=utf-8',
    'application/x-www-form-urlencoded',
    'application/vnd.api+json',
    'application/jsonx',
    'multipart/form-data; boundary=x',
    'application/json; foo=bar',
    'application/json; charset=utf-8; foo=bar',
    'application/json; charset',
  ])('POST /api/users/me/projects with Content-Type %s', async (contentType) => {
    const res = await app.request('POST', '/api/users/me/projects', {
      token,
      rawBody: JSON.stringify({ project: { name: 'Typed' } }),
      headers: { 'Content-Type': contentType },
    });
    expectErrorEnvelope(res, 415, 'unsupported_media_type');
  });

  it('POST with a body and no Content-Type', async () => {
    const res = await requestWithoutContentType('POST', '/api/users/me/projects', JSON.stringify({ project: { name: 'Untyped' } }));
    expectErrorEnvelope(res, 415, 'unsupported_media_type');
  });

  it('a request with no body needs no Content-Type: its missing wrapper is 422 parameter_missing, on both doors', async () => {
    // No body and no media type (fetch sends Content-Length: 0): §1 holds requests with a body to application/json.
    const bodiless = (path: string) => fetch(`${app.baseUrl}${path}`, { method: 'POST', headers: { Authorization: token } });
    for (const [path, pointer] of [['/api/users/me/projects', '/project'], ['/api/users/me/tasks', '/task']] as const) {
      const res = await bodiless(path);
      expect(res.headers.get('content-type')).toBe(JSON_UTF8);
      expect(await res.json()).toMatchObject({ errors: [{ status: '422', code: 'parameter_missing', source: { pointer } }] });
      expect(res.status).toBe(422);
    }
    for (const procedure of ['projects.create', 'tasks.create']) {
      const res = await bodiless(`/trpc/${procedure}`);
      expect(res.status).toBe(422);
      expect(((await res.json()) as any).error.json.data.code).toBe('parameter_missing');
    }
    const put = await fetch(`${app.baseUrl}/api/projects/${projectId}/state`, { method: 'PUT', headers: { Authorization: token } });
    expect(put.status).toBe(422);
    expect(((await put.json()) as any).errors[0]).toMatchObject({ code: 'parameter_missing', source: { pointer: '/project' } });
  });

  it('PATCH and PUT with text/plain', async () => {
    const patch = await app.request('PATCH', `/api/projects/${projectId}`, {
      token,
      rawBody: JSON.stringify({ project: { description: 'x' } }),
      headers: { 'Content-Type': 'text/plain' },
    });
    expectErrorEnvelope(patch, 415, 'unsupported_media_type');
    const put = await requestWithoutContentType('PUT', `/api/projects/${projectId}/state`, JSON.stringify({ project: { state: 'paused' } }));
    expectErrorEnvelope(put, 415, 'unsupported_media_type');
  });

  it('a charset other than UTF-8 is refused', async () => {
    const res = await app.request('POST', '/api/users/me/projects', {
      token,
      rawBody: JSON.stringify({ project: { name: 'Latin' } }),
      headers: { 'Content-Type': 'application/json; charset=iso-8859-1' },
    });
    expectErrorEnvelope(res, 415, 'unsupported_media_type');
  });

  it.each(['application/json; charset=utf-8', 'application/json;charset=UTF-8', 'Application/JSON', 'application/json; charset="utf-8"', 'application/json;'])(
    'Content-Type %s is accepted and the body is parsed',
    async (contentType) => {
      const name = `Charset_${Math.random().toString(36).slice(2, 8)}`;
      const res = await app.request('POST', '/api/users/me/projects', {
        token,
        rawBody: JSON.stringify({ project: { name } }),
        headers: { 'Content-Type': contentType },
      });
      expect(res.status, res.text).toBe(201);
      expect(res.headers.get('content-type')).toBe(JSON_UTF8);
      expect(res.body.data.attributes.name).toBe(name);
      expect(res.body.data.attributes.slug).toBe(name.toLowerCase());
    },
  );

  it('a non-ASCII UTF-8 body arrives intact', async () => {
    const description = 'Café ☕ 🚀 naïve';
    const res = await app.request('PATCH', `/api/projects/${projectId}`, {
      token,
      rawBody: JSON.stringify({ project: { description } }),
      headers: { 'Content-Type': 'application/json; charset=utf-8' },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.attributes.description).toBe(description);
  });
});

describe('malformed JSON: 400 invalid_json', () => {
  it.each([
    ['truncated', '{"project": {"name": "x"'],
    ['trailing comma', '{"project": {"name": "x",}}'],
    ['single quotes', "{'project': {'name': 'x'}}"],
    ['bare word', 'project'],
    ['two documents', '{"project":{"name":"a"}}{"x":1}'],
  ])('%s', async (_what, rawBody) => {
    const res = await app.request('POST', '/api/users/me/projects', { token, rawBody, headers: { 'Content-Type': 'application/json' } });
    expectErrorEnvelope(res, 400, 'invalid_json');
  });

  it('malformed JSON on PUT state and PATCH', async () => {
    for (const [method, path] of [
      ['PUT', `/api/projects/${projectId}/state`],
      ['PATCH', `/api/projects/${projectId}`],
      ['POST', '/api/users/me/tasks'],
    ] as const) {
      const res = await app.request(method, path, { token, rawBody: '{"', headers: { 'Content-Type': 'application/json' } });
      expectErrorEnvelope(res, 400, 'invalid_json');
    }
  });
});

describe('a body that cannot be read: 400 invalid_json', () => {
  const raw = (method: string, path: string, headers: Record<string, string>, body: Buffer) =>
    rawRequest(`${app.baseUrl}${path}`, method, { Authorization: token, ...headers }, body);

  it('a Content-Encoding is 415: no coding is decoded, gzip or not, on a POST and on a GET', async () => {
    for (const method of ['POST', 'GET']) {
      for (const body of [Buffer.from('not gzip at all'), gzipSync('{"task":{"label":"zipped"}}')]) {
        const res = await raw(method, '/api/users/me/tasks', { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' }, body);
        expectErrorEnvelope(res, 415, 'unsupported_media_type');
      }
    }
  });

  it('a GET with Content-Length 00 carries no body: 200', async () => {
    const res = await raw('GET', '/api/users/me/tasks', { 'Content-Length': '00' }, Buffer.alloc(0));
    expect(res.status, res.text).toBe(200);
  });
});

describe('body size: 413 payload_too_large above 100 KiB', () => {
  const LIMIT = BODY_LIMIT_BYTES;
  /** A create-project body of exactly `bytes` bytes, padded with an ignored member. */
  function bodyOfSize(name: string, bytes: number): string {
    const skeleton = JSON.stringify({ project: { name }, pad: '' });
    const body = JSON.stringify({ project: { name }, pad: 'x'.repeat(bytes - skeleton.length) });
    expect(Buffer.byteLength(body)).toBe(bytes);
    return body;
  }

  it('a body of exactly 100 KiB is accepted (the extra member is ignored)', async () => {
    const res = await app.request('POST', '/api/users/me/projects', {
      token,
      rawBody: bodyOfSize('AtLimit', LIMIT),
      headers: { 'Content-Type': 'application/json' },
    });
    expect(res.status, res.text.slice(0, 300)).toBe(201);
    expect(res.body.data.attributes.name).toBe('AtLimit');
  });

  it('one byte more is 413', async () => {
    const res = await app.request('POST', '/api/users/me/projects', {
      token,
      rawBody: bodyOfSize('OverLimit', LIMIT + 1),
      headers: { 'Content-Type': 'application/json' },
    });
    expectErrorEnvelope(res, 413, 'payload_too_large');
    const list = await app.request('GET', '/api/users/me/projects', { token });
    expect(list.body.data.map((p: any) => p.attributes.name)).not.toContain('OverLimit');
  });

  it('a 1 MiB body is 413, also on PATCH and PUT', async () => {
    const big = JSON.stringify({ project: { description: 'y'.repeat(1024 * 1024) } });
    for (const [method, path] of [
      ['POST', '/api/users/me/projects'],
      ['PATCH', `/api/projects/${projectId}`],
      ['PUT', `/api/projects/${projectId}/state`],
    ] as const) {
      const res = await app.request(method, path, { token, rawBody: big, headers: { 'Content-Type': 'application/json' } });
      expectErrorEnvelope(res, 413, 'payload_too_large');
    }
  });

  it('a 9,000-character description in PATCH is accepted and stored', async () => {
    const description = 'd'.repeat(9_000);
    const res = await app.request('PATCH', `/api/projects/${projectId}`, { token, body: { project: { description } } });
    expect(res.status, res.text.slice(0, 300)).toBe(200);
    expect(res.body.data.attributes.description).toBe(description);
    const again = await app.request('GET', `/api/projects/${projectId}`, { token });
    expect(again.body.data.attributes.description).toHaveLength(9_000);
  });
});

describe('body wrapper not an object: 422 parameter_missing /project', () => {
  it.each([
    ['a top-level array', '[]'],
    ['a top-level array of the right object', '[{"project":{"name":"Arr"}}]'],
    ['an empty object', '{}'],
    ['project a string', '{"project": "x"}'],
    ['project null', '{"project": null}'],
    ['project a number', '{"project": 5}'],
    ['project an array', '{"project": [{"name": "x"}]}'],
    ['project true', '{"project": true}'],
  ])('POST /api/users/me/projects with %s', async (_what, rawBody) => {
    const res = await app.request('POST', '/api/users/me/projects', { token, rawBody, headers: { 'Content-Type': 'application/json' } });
    expectErrorEnvelope(res, 422, 'parameter_missing', { pointer: '/project' });
  });

  it.each([
    ['null', 'null'],
    ['a string', '"project"'],
    ['a number', '42'],
    ['true', 'true'],
  ])('a top-level JSON %s is valid JSON without the wrapper: 422 parameter_missing /project', async (_what, rawBody) => {
    const res = await app.request('POST', '/api/users/me/projects', { token, rawBody, headers: { 'Content-Type': 'application/json' } });
    expectErrorEnvelope(res, 422, 'parameter_missing', { pointer: '/project' });
  });

  it('the same on PATCH and PUT state', async () => {
    for (const [method, path] of [
      ['PATCH', `/api/projects/${projectId}`],
      ['PUT', `/api/projects/${projectId}/state`],
    ] as const) {
      for (const rawBody of ['[]', '{"project": "x"}', '{"project": null}']) {
        const res = await app.request(method, path, { token, rawBody, headers: { 'Content-Type': 'application/json' } });
        expectErrorEnvelope(res, 422, 'parameter_missing', { pointer: '/project' });
      }
    }
  });

  it('the task wrapper is /task', async () => {
    const res = await app.request('POST', '/api/users/me/tasks', { token, rawBody: '{"task": "x"}', headers: { 'Content-Type': 'application/json' } });
    expectErrorEnvelope(res, 422, 'parameter_missing', { pointer: '/task' });
  });
});

describe('X-Request-Id', () => {
  it('every kind of response carries one', async () => {
    const responses = [
      await app.request('GET', '/healthz'),
      await app.request('GET', '/readyz'),
      await app.request('GET', '/api/users/me/projects', { token }),
      await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Rid' } } }),
      await app.request('GET', '/api/users/me/projects'),
      await app.request('GET', '/api/nope'),
      await app.request('GET', '/nope'),
      await app.request('POST', '/api/users/me/projects', { token, rawBody: 'x', headers: { 'Content-Type': 'text/plain' } }),
      await app.request('POST', '/api/users/me/projects', { token, rawBody: '{', headers: { 'Content-Type': 'application/json' } }),
      await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'a b' } } }),
      await app.request('DELETE', '/api/users/me/authorizations/current', { token: (await app.register()).token }),
    ];
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 201, 401, 404, 404, 415, 400, 422, 204]);
    const ids = responses.map((r) => r.headers.get('x-request-id'));
    for (const id of ids) expect(id).toMatch(SANE_REQUEST_ID);
    // Generated ids are distinct per request.
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('a sane incoming id is echoed, on success and on error', async () => {
    for (const [path, id] of [
      ['/healthz', 'abc-123'],
      ['/api/users/me/projects', 'client.req:42_X'],
      ['/api/nope', 'f47ac10b-58cc-4372-a567-0e02b2c3d479'],
    ] as const) {
      const res = await app.request('GET', path, { token, headers: { 'X-Request-Id': id } });
      expect(res.headers.get('x-request-id')).toBe(id);
    }
    const failed = await app.request('GET', '/api/users/me/projects', { headers: { 'X-Request-Id': 'no-token-1' } });
    expect(failed.status).toBe(401);
    expect(failed.headers.get('x-request-id')).toBe('no-token-1');
  });

  it.each([
    ['500 characters', 'a'.repeat(500)],
    ['spaces and markup', 'id with <script>'],
    ['a semicolon', 'x;drop table users'],
    ['129 characters', 'b'.repeat(129)],
  ])('a hostile incoming id (%s) is replaced', async (_what, id) => {
    const res = await app.request('GET', '/healthz', { headers: { 'X-Request-Id': id } });
    expect(res.status).toBe(200);
    const returned = res.headers.get('x-request-id');
    expect(returned).not.toBe(id);
    expect(returned).toMatch(SANE_REQUEST_ID);
  });
});

describe('error bodies never leak internals', () => {
  it('across a spread of failures', async () => {
    const failures = [
      await app.request('GET', '/api/projects/999999', { token }),
      await app.request('GET', '/api/projects/abc', { token }),
      await app.request('GET', '/api/projects/99999999999999999999', { token }),
      await app.request('GET', '/api/users/me/projects?page=-1', { token }),
      await app.request('PUT', `/api/projects/${projectId}/state`, { token, body: { project: { state: 'finished' } } }),
      await app.request('PUT', `/api/projects/${projectId}/state`, { token, body: { project: { state: 7 } } }),
      await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'x', planned_at: 'soon' } } }),
      await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'x', project_id: 2147483647 } } }),
      await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: "x'; drop table projects; --" } } }),
      await app.request('POST', '/api/users/me/projects', { token, rawBody: '{"project":', headers: { 'Content-Type': 'application/json' } }),
    ];
    for (const res of failures) {
      expect(res.status, res.text).toBeGreaterThanOrEqual(400);
      expect(res.status, res.text).toBeLessThan(500);
      expect(res.headers.get('content-type')).toBe(JSON_UTF8);
      expect(Object.keys(res.body)).toEqual(['errors']);
      for (const error of res.body.errors) {
        expect(Object.keys(error).sort()).toEqual(expect.arrayContaining(['code', 'detail', 'status', 'title']));
        expect(Object.keys(error).every((k) => ['status', 'code', 'title', 'detail', 'source'].includes(k))).toBe(true);
        expect(error.status).toBe(String(res.status));
      }
      expectNoLeak(res.text);
    }
  });
});

describe('health and readiness', () => {
  it('GET /healthz is 200', async () => {
    const res = await app.request('GET', '/healthz');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual({ status: 'ok', database: { role: 'primary', failovers: 0, unavailable: expect.any(Number) } });
  });

  it('GET /readyz is 200 while the database is up', async () => {
    const res = await app.request('GET', '/readyz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ready' });
  });

  it('GET /readyz is 503 unavailable once its database is gone; /healthz stays 200', async () => {
    // An app of its own, on a database of its own, built as test-app.ts builds one.
    const databaseUrl = await createTestDatabase();
    const orm = await openOrm(databaseUrl, { migrate: true, poolSize: 2 });
    const own = createApp({
      orm,
      clock: new ManualClock(T0),
      logger: createLogger('silent'),
      trustProxy: false,
      passwordHashCost: 1024,
    });
    const server = createServer(own);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const get = (path: string, headers: Record<string, string> = {}): Promise<ApiResponse> => request(base, 'GET', path, { headers });
    try {
      expect((await get('/readyz')).status).toBe(200);

      // MikroORM 7 reconnects lazily after orm.close(): closing the ORM alone does not make
      // the database unreachable, and /readyz rightly stays ready.
      await orm.close(true);
      const afterClose = await get('/readyz');
      expect(afterClose.status).toBe(200);
      expect(afterClose.body).toEqual({ status: 'ready' });

      // Now take the database away for real: drop it, terminating the pool's connections.
      const admin = new pg.Client({ connectionString: inject('adminDatabaseUrl') });
      await admin.connect();
      try {
        await admin.query(`drop database "${new URL(databaseUrl).pathname.slice(1)}" with (force)`);
      } finally {
        await admin.end();
      }
      for (let attempt = 0; attempt < 2; attempt++) {
        const down = await get('/readyz', { 'X-Request-Id': `readyz-${attempt}` });
        expectErrorEnvelope(down, 503, 'unavailable');
        expect(down.headers.get('x-request-id')).toBe(`readyz-${attempt}`);
      }

      const health = await get('/healthz');
      expect(health.status).toBe(200);
      // Alive, and saying what it sees of its database (its own 503s counted, not /readyz's refusals).
      expect(health.body).toEqual({ status: 'ok', database: { role: 'unreachable', failovers: 0, unavailable: 0 } });
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      // Behind PgBouncer the probe's query still waits in the pooler for the dropped database
      // (until its query_wait_timeout, 30 s in the pooled tier), and the pool's end waits for
      // it: the test does not, the pool ends on its own once the pooler answers.
      await Promise.race([orm.close(true).catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 1_000))]);
    }
  });
});

describe('the tRPC door reports the same codes', () => {
  it('projects.list without a token rejects with unauthorized / 401', async () => {
    await expect(app.trpc().projects.list.query({})).rejects.toMatchObject({
      data: { code: 'unauthorized', httpStatus: 401 },
    });
  });

  it('projects.list with an unknown token rejects with unauthorized / 401', async () => {
    await expect(app.trpc('Z'.repeat(43)).projects.list.query({})).rejects.toMatchObject({
      data: { code: 'unauthorized', httpStatus: 401 },
    });
  });

  it('projects.create with name "a b" rejects with invalid / 422, the same errors as REST', async () => {
    const error = await app
      .trpc(token)
      .projects.create.mutate({ project: { name: 'a b' } })
      .then(
        () => undefined,
        (e: unknown) => e as { data?: { code: string; httpStatus: number; errors: unknown[] }; message: string },
      );
    expect(error).toBeDefined();
    expect(error!.data).toMatchObject({
      code: 'invalid',
      httpStatus: 422,
      errors: [expect.objectContaining({ status: '422', code: 'invalid', source: { pointer: '/project/name' } })],
    });
    expectNoLeak(JSON.stringify(error!.data));

    const rest = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'a b' } } });
    expectErrorEnvelope(rest, 422, 'invalid', { pointer: '/project/name' });
    expect(error!.data!.errors).toEqual(rest.body.errors);
  });

  it('a state change refused on both doors has the same code', async () => {
    const trpcError = await app
      .trpc(token)
      .projects.changeState.mutate({ id: projectId, project: { state: 'finished' } })
      .then(
        () => undefined,
        (e: unknown) => e as { data?: { code: string; httpStatus: number } },
      );
    expect(trpcError?.data).toMatchObject({ code: 'invalid_transition', httpStatus: 422 });
    const rest = await app.request('PUT', `/api/projects/${projectId}/state`, { token, body: { project: { state: 'finished' } } });
    expectErrorEnvelope(rest, 422, 'invalid_transition', { pointer: '/project/state' });
  });
});
