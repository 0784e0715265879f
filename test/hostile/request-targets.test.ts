/**
 * The REST door reads a request's target as it always has (src/http/rest.ts): a target that
 * starts with '//' or '/\' is a path, not another host, so '//evil/api/users/me/tasks' names
 * no route (404 `missing_endpoint`) and writes nothing; and its answers' headers go out as
 * they did, name for name (`content-type` on a 200 or 201, `Content-Type` on a 204 and on
 * an error). Sent on a raw socket: a client library would normalise these targets first.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

let app: TestApp;
let token: string;

beforeAll(async () => {
  app = await startTestApp();
  ({ token } = await app.register());
});
afterAll(async () => {
  await app?.close();
});

/** One request as written, on its own connection; the whole answer as text. */
function raw(requestLine: string, body = ''): Promise<string> {
  const { port } = new URL(app.baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1');
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk)).on('end', () => resolve(answer)).on('error', reject);
    socket.write(
      `${requestLine}\r\nHost: planning.example\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  });
}

const status = (answer: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
const bodyOf = (answer: string) => JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));

async function taskCount(): Promise<number> {
  const res = await app.request('GET', '/api/users/me/tasks', { token });
  return (res.body as { data: unknown[] }).data.length;
}

describe('a target that starts with two slashes names a path, not a host', () => {
  it.each([
    ['POST //evil/api/users/me/tasks HTTP/1.1', JSON.stringify({ task: { label: 'smuggled' } })],
    ['POST /\\evil/api/users/me/tasks HTTP/1.1', JSON.stringify({ task: { label: 'smuggled' } })],
    ['GET //evil/api/users/me/tasks HTTP/1.1', ''],
    ['GET /\\evil/api/users/me/tasks HTTP/1.1', ''],
    ['GET //evil/api/users/me HTTP/1.1', ''],
    ['PUT //x/api/tasks/1/state HTTP/1.1', JSON.stringify({ task: { state: 'started' } })],
  ])('%s: 404 missing_endpoint, nothing written', async (requestLine, body) => {
    const before = await taskCount();
    const answer = await raw(requestLine, body);
    expect(status(answer), answer).toBe(404);
    expect(bodyOf(answer).errors[0].code).toBe('missing_endpoint');
    expect(await taskCount()).toBe(before);
  });

  it('the same paths with one slash are served (the check above is not vacuous)', async () => {
    const created = await raw('POST /api/users/me/tasks HTTP/1.1', JSON.stringify({ task: { label: 'plain' } }));
    expect(status(created), created).toBe(201);
    expect(status(await raw('GET /api/users/me/tasks HTTP/1.1'))).toBe(200);
  });
});

describe('the answers’ headers go out as they did', () => {
  it('content-type on a 200 and a 201, Content-Type on an error, none on a 204', async () => {
    const listed = await raw('GET /api/users/me/tasks HTTP/1.1');
    expect(listed).toMatch(/\r\ncontent-type: application\/json; charset=utf-8\r\n/);
    const created = await raw('POST /api/users/me/tasks HTTP/1.1', JSON.stringify({ task: { label: 'headers' } }));
    expect(status(created)).toBe(201);
    expect(created).toMatch(/\r\ncontent-type: application\/json; charset=utf-8\r\n/);
    const refused = await raw('GET /api/tasks/999999 HTTP/1.1');
    expect(status(refused)).toBe(404);
    expect(refused).toMatch(/\r\nContent-Type: application\/json; charset=utf-8\r\n/);
    const { token: other } = await app.register();
    const revokedAnswer = await new Promise<string>((resolve, reject) => {
      const { port } = new URL(app.baseUrl);
      const socket = net.connect(Number(port), '127.0.0.1');
      let answer = '';
      socket.on('data', (chunk) => (answer += chunk)).on('end', () => resolve(answer)).on('error', reject);
      socket.write(`DELETE /api/users/me/authorizations/current HTTP/1.1\r\nHost: planning.example\r\nAuthorization: Bearer ${other}\r\nConnection: close\r\n\r\n`);
    });
    expect(status(revokedAnswer), revokedAnswer).toBe(204);
    // No content, nothing to describe (RFC 9110 §15.3.5).
    expect(revokedAnswer).not.toMatch(/\r\ncontent-type:/i);
  });
});
