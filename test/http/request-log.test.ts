/**
 * The request log (src/http/request-log.ts): one line per request with its id and path (never its query,
 * which may carry a tRPC input or a token), and every error line of a request, on /trpc as on
 * /api, carries the id the client got in X-Request-Id (API-CONTRACT.md §2).
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

let app: TestApp;
let lines: any[];
let token: string;

beforeAll(async () => {
  lines = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line));
      callback();
    },
  });
  app = await startTestApp({ logger: pino({ level: 'info' }, stream) });
  ({ token } = await app.register());
});
afterAll(async () => {
  await app?.close();
});

const requestLines = (reqId: string) => lines.filter((l) => l.reqId === reqId && l.msg === 'request');

describe('request log', () => {
  it('keeps a well-formed incoming X-Request-Id, logs it with the path, and replaces a malformed one', async () => {
    const kept = await app.request('GET', '/api/users/me', { token, headers: { 'X-Request-Id': 'client-id.42' } });
    expect(kept.headers.get('x-request-id')).toBe('client-id.42');
    await eventually(() => requestLines('client-id.42').length === 1, { message: 'one request line for client-id.42' });
    expect(requestLines('client-id.42')[0]).toMatchObject({ req: { method: 'GET', path: '/api/users/me' }, res: { statusCode: 200 } });

    const replaced = await app.request('GET', '/api/users/me', { token, headers: { 'X-Request-Id': 'bad id with spaces' } });
    const id = replaced.headers.get('x-request-id')!;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    await eventually(() => requestLines(id).length === 1, { message: `one request line for ${id}` });
  });

  it('logs the path without the query: no tRPC input, no token in a URL', async () => {
    const secret = 'Pa55word-in-a-query-string';
    const input = encodeURIComponent(JSON.stringify({ json: { username: 'nobody', password: secret } }));
    const viaQuery = await fetch(`${app.baseUrl}/trpc/users.authorize?input=${input}`, { headers: { 'X-Request-Id': 'query-1' } });
    expect(viaQuery.status).toBe(404);
    const withToken = await app.request('GET', `/api/users/me/projects?page=1&token=${token}`, { token, headers: { 'X-Request-Id': 'query-2' } });
    expect(withToken.status).toBe(200);
    await eventually(() => requestLines('query-1').length + requestLines('query-2').length === 2, { message: 'the request lines of query-1 and query-2' });
    expect(requestLines('query-1')[0].req.path).toBe('/trpc/users.authorize');
    expect(requestLines('query-2')[0].req.path).toBe('/api/users/me/projects');
    const text = JSON.stringify(lines);
    expect(text).not.toContain(secret);
    expect(text).not.toContain(token);
  });
});

describe('error lines carry the request id', () => {
  it('a 500 on /trpc and on /api is logged with the id the client got', async () => {
    // Break the database under the app: the table the list reads is gone.
    await app.orm.em.fork().getConnection().execute('alter table projects rename to projects_gone');
    try {
      const rest = await app.request('GET', '/api/users/me/projects', { token, headers: { 'X-Request-Id': 'broken-rest' } });
      expect(rest.status, rest.text).toBe(500);
      const trpc = await fetch(`${app.baseUrl}/trpc/projects.list?input=${encodeURIComponent('{"json":{"page":1}}')}`, { headers: { Authorization: token, 'X-Request-Id': 'broken-trpc' } });
      expect(trpc.status).toBe(500);
      expect(trpc.headers.get('x-request-id')).toBe('broken-trpc');
      for (const id of ['broken-rest', 'broken-trpc']) {
        await eventually(() => lines.some((l) => l.reqId === id && l.level >= 50 && l.err), { message: `an error line with reqId ${id}` });
      }
      // No error line of the service lacks a request id.
      expect(lines.filter((l) => l.level >= 50 && !l.reqId)).toEqual([]);
    } finally {
      await app.orm.em.fork().getConnection().execute('alter table projects_gone rename to projects');
    }
  });
});
