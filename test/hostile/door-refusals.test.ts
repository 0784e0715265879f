/**
 * The answers the HTTP layer gives before any procedure is found (API-CONTRACT.md §8, last
 * sentences): a bad or missing Host, an Expect other than 100-continue, a transfer coding
 * Node does not decode, a request line or header Node cannot parse, headers over 16 KiB, a
 * method no endpoint answers. Under /trpc each is a tRPC error, the shape every other /trpc
 * error has (superjson's `{json}` in `error`, the contract's code in `data.code`, the REST
 * status in `data.httpStatus`, the §2 errors in `data.errors`), with the status and code /api
 * gives; under /api each keeps REST's envelope. A tRPC client cannot read `{"errors":[…]}`.
 *
 * Sent as bytes written by hand on raw sockets: a client library would not send most of
 * these, and Node answers several itself (its `clientError`), before Express sees a request.
 */
import net from 'node:net';
import superjson from 'superjson';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { rawExchange, type RawAnswer } from '../helpers/http.js';
import { useTestApp } from '../helpers/test-app.js';

const app = useTestApp();
let token: string;
beforeAll(async () => {
  ({ token } = await app.register());
});

/** Writes `bytes` (latin1) as they are on a connection of their own; the whole answer. */
const send = (bytes: string): Promise<RawAnswer> => rawExchange(app.baseUrl, Buffer.from(bytes, 'latin1'));

const HOST = 'Host: planning.example';
/** A request line, its headers (with a valid token and `Connection: close` added), and a body. */
function request(line: string, headers: string[], body = ''): string {
  return [line, ...headers, `Authorization: ${token}`, 'Connection: close', '', body].join('\r\n');
}

interface Refusal {
  what: string;
  /** The request's bytes for a target path. */
  bytes: (path: string) => string;
  status: number;
  code: string;
}

const CHUNKED_BODY = '2\r\n{}\r\n0\r\n\r\n';
const get = (headers: string[]) => (path: string) => request(`GET ${path} HTTP/1.1`, headers);
const post = (headers: string[], body: string) => (path: string) => request(`POST ${path} HTTP/1.1`, headers, body);
const line = (write: (path: string) => string, headers = [HOST]) => (path: string) => request(write(path), headers);
const malformed = { status: 400, code: 'malformed_request' };

const REFUSALS: Refusal[] = [
  // Host (checked by the app, src/http/request-framing.ts)
  { what: 'Host: 127.0.0.1:1:1', bytes: get(['Host: 127.0.0.1:1:1']), ...malformed },
  { what: 'Host: %zz', bytes: get(['Host: %zz']), ...malformed },
  { what: 'two Host lines', bytes: get([HOST, 'Host: other.example']), ...malformed },
  { what: 'no Host (HTTP/1.1)', bytes: get([]), ...malformed },
  // Expect (Node's checkExpectation) and transfer codings
  { what: 'Expect: 200-ok', bytes: get([HOST, 'Expect: 200-ok']), status: 417, code: 'expectation_failed' },
  { what: 'Transfer-Encoding: gzip, chunked', bytes: post([HOST, 'Content-Type: application/json', 'Transfer-Encoding: gzip, chunked'], CHUNKED_BODY), status: 501, code: 'not_implemented' },
  // Request lines Node's parser refuses (its clientError)
  { what: 'a request line with the version HTTP/7.3', bytes: line((p) => `GET ${p} HTTP/7.3`), ...malformed },
  { what: 'a request line with more after the version', bytes: line((p) => `GET ${p} HTTP/1.1 junk`), ...malformed },
  { what: 'a request line ended by a bare LF', bytes: (p) => `GET ${p} HTTP/1.1\n${HOST}\r\nAuthorization: ${token}\r\nConnection: close\r\n\r\n`, ...malformed },
  { what: 'a control character in the target', bytes: line((p) => `GET ${p}?x=\x01 HTTP/1.1`), ...malformed },
  { what: 'a method that is no token (G@T)', bytes: line((p) => `G@T ${p} HTTP/1.1`), ...malformed },
  { what: 'a request line with tabs for spaces', bytes: line((p) => `GET\t${p}\tHTTP/1.1`), ...malformed },
  // Versions Node's parser lets through, and headers it merges (checked by the app)
  { what: 'a request line with the version HTTP/2.0', bytes: line((p) => `GET ${p} HTTP/2.0`), ...malformed },
  { what: 'two Authorization lines', bytes: get([HOST, 'Authorization: Bearer another']), ...malformed },
  { what: 'two Content-Type lines', bytes: post([HOST, 'Content-Type: application/json', 'Content-Type: text/plain', 'Content-Length: 2'], '{}'), ...malformed },
  { what: 'an absolute-form target with the port 99999', bytes: line((p) => `GET http://planning.example:99999${p} HTTP/1.1`), ...malformed },
  // Headers Node's parser refuses
  { what: 'a header name with a space', bytes: get([HOST, 'X Bad: 1']), ...malformed },
  { what: 'a header line without a colon', bytes: get([HOST, 'NoColon']), ...malformed },
  { what: 'a control character in a header value', bytes: get([HOST, 'X-Value: a\x01b']), ...malformed },
  { what: 'a folded header line', bytes: get([HOST, 'X-Folded: a', ' b']), ...malformed },
  { what: 'Content-Length: 12x', bytes: post([HOST, 'Content-Type: application/json', 'Content-Length: 12x'], '{}'), ...malformed },
  { what: 'two different Content-Lengths', bytes: post([HOST, 'Content-Type: application/json', 'Content-Length: 2', 'Content-Length: 3'], '{}'), ...malformed },
  { what: 'Content-Length with Transfer-Encoding: chunked', bytes: post([HOST, 'Content-Type: application/json', 'Content-Length: 2', 'Transfer-Encoding: chunked'], CHUNKED_BODY), ...malformed },
  { what: 'Transfer-Encoding: chunked, gzip', bytes: post([HOST, 'Content-Type: application/json', 'Transfer-Encoding: chunked, gzip'], CHUNKED_BODY), ...malformed },
  // Too large
  { what: 'a header over 16 KiB', bytes: get([HOST, `X-Padding: ${'a'.repeat(20_000)}`]), status: 431, code: 'headers_too_large' },
  { what: 'a request line over 16 KiB', bytes: line((p) => `GET ${p}?padding=${'a'.repeat(20_000)} HTTP/1.1`), status: 431, code: 'headers_too_large' },
  // Methods no endpoint answers: known to Node, or refused by its parser though HTTP allows
  // them (any token; methods are case-sensitive, so `get` is not GET)
  ...['TRACE', 'PROPFIND', 'OPTIONS', 'PUT', 'FOO', 'get'].map((method) => ({
    what: `the method ${method}`,
    bytes: line((p) => `${method} ${p} HTTP/1.1`),
    status: 404,
    code: 'missing_endpoint',
  })),
];

/** The JSON-RPC code of each status's tRPC error (TRPC_ERROR_CODES_BY_KEY): no tRPC code is closer for 417 and 431 than BAD_REQUEST. */
const JSON_RPC_CODE: Record<number, number> = { 400: -32600, 404: -32004, 417: -32600, 431: -32600, 501: -32603 };

const refusal = (what: string): Refusal => REFUSALS.find((r) => r.what === what)!;
/** One refusal of the app (Host), one of Node's checkExpectation, one of its parser. */
const SAMPLES = ['Host: 127.0.0.1:1:1', 'Expect: 200-ok', 'a method that is no token (G@T)'].map(refusal);

const dump = (answer: RawAnswer) => `${answer.head}\n\n${answer.text.slice(0, 600)}`;

/** REST's envelope, and nothing else; its errors. */
function expectEnvelope(answer: RawAnswer, status: number, code: string): unknown[] {
  expect(answer.status, dump(answer)).toBe(status);
  expect(answer.headers['content-type'], dump(answer)).toBe('application/json; charset=utf-8');
  const body = JSON.parse(answer.text);
  expect(Object.keys(body)).toEqual(['errors']);
  expect(body.errors[0]).toMatchObject({ status: String(status), code });
  return body.errors;
}

/** The tRPC error a procedure of the door gives (401 for users.me without a token): what every refusal under /trpc must look like. */
async function referenceTrpcError(): Promise<{ json: Record<string, unknown>; data: Record<string, unknown> }> {
  const res = await fetch(`${app.baseUrl}/trpc/users.me`);
  expect(res.status).toBe(401);
  const body = (await res.json()) as { error: { json: { data: Record<string, unknown> } } };
  return { json: body.error.json, data: body.error.json.data };
}

/** A tRPC error with the status and code /api gave, and /api's errors in `data.errors`, read as a tRPC client reads it. */
async function expectTrpcError(answer: RawAnswer, status: number, code: string, restErrors: unknown[], path?: string): Promise<void> {
  expect(answer.status, dump(answer)).toBe(status);
  expect(answer.headers['content-type'], dump(answer)).toBe('application/json; charset=utf-8');
  const body = JSON.parse(answer.text);
  expect(Object.keys(body), dump(answer)).toEqual(['error']);
  // The members a procedure's error has, no more and no fewer.
  const reference = await referenceTrpcError();
  expect(Object.keys(body.error.json).sort()).toEqual(Object.keys(reference.json).sort());
  expect(Object.keys(body.error.json.data).sort()).toEqual(Object.keys(reference.data).sort());
  // As a tRPC client reads it: the transformer's output, deserialised.
  const error = superjson.deserialize(body.error) as { message: string; code: number; data: Record<string, unknown> };
  expect(error.data).toEqual({ code, httpStatus: status, path, errors: restErrors });
  expect(error.message).toBe((restErrors[0] as { detail: string }).detail);
  expect(error.code).toBe(JSON_RPC_CODE[status]);
}

describe('refusals before any procedure: a tRPC error under /trpc, the envelope under /api', () => {
  it.each(REFUSALS)('$what: $status $code on both doors', async ({ bytes, status, code }) => {
    const restErrors = expectEnvelope(await send(bytes('/api/users/me')), status, code);
    await expectTrpcError(await send(bytes('/trpc/users.me')), status, code, restErrors, 'users.me');
  });

  it('the same requests with nothing wrong are served on both doors (the refusals above are not vacuous)', async () => {
    expect((await send(get([HOST])('/api/users/me'))).status).toBe(200);
    expect((await send(get([HOST])('/trpc/users.me'))).status).toBe(200);
    expect((await send(line((p) => `GET http://planning.example:8080${p} HTTP/1.1`)('/trpc/users.me'))).status).toBe(200);
  });
});

describe('the door is read from the target as the routes read it', () => {
  it.each([
    ['a dot segment', '/x/../trpc/users.me', 'users.me'],
    ['a backslash', '/trpc\\users.me', 'users.me'],
    ['letters in another case (Express routes it to the door)', '/TRPC/users.me', 'users.me'],
    ['the door itself', '/trpc', undefined],
    ['a batch', '/trpc/users.me,users.me?batch=1', undefined],
  ])('%s (%s): a tRPC error', async (_what, target, path) => {
    for (const { bytes, status, code } of SAMPLES) {
      const restErrors = expectEnvelope(await send(bytes('/api/users/me')), status, code);
      await expectTrpcError(await send(bytes(target)), status, code, restErrors, path);
    }
  });

  it.each([['/trpcx/users.me'], ['/api/trpc/users.me'], ['/x/trpc/users.me']])('%s is not under /trpc: the envelope', async (target) => {
    for (const { bytes, status, code } of SAMPLES) expectEnvelope(await send(bytes(target)), status, code);
  });
});

describe('an unknown method, however its bytes arrive', () => {
  it('its request line split after the target: still 404 missing_endpoint, in the door\'s shape', async () => {
    const bytes = (path: string) => request(`FOO ${path} HTTP/1.1`, [HOST]);
    const split = (path: string) => [`FOO ${path}`, bytes(path).slice(`FOO ${path}`.length)].map((part) => Buffer.from(part, 'latin1'));
    const restErrors = expectEnvelope(await rawExchange(app.baseUrl, split('/api/users/me')), 404, 'missing_endpoint');
    await expectTrpcError(await rawExchange(app.baseUrl, split('/trpc/users.me')), 404, 'missing_endpoint', restErrors, 'users.me');
  });
});

describe('other refusals of the door itself', () => {
  it('a /trpc path that does not percent-decode is 404 missing_endpoint, a tRPC error', async () => {
    const restErrors = expectEnvelope(await send(get([HOST])('/api/%zz')), 404, 'missing_endpoint');
    await expectTrpcError(await send(get([HOST])('/trpc/%zz')), 404, 'missing_endpoint', restErrors);
  });

  it('a chunk size that is no number, found once the request reached the door: 400 malformed_request, a tRPC error', async () => {
    const broken = (path: string) => post([HOST, 'Content-Type: application/json', 'Transfer-Encoding: chunked'], 'zz\r\n{}\r\n0\r\n\r\n')(path);
    const restErrors = expectEnvelope(await send(broken('/api/users/me/tasks')), 400, 'malformed_request');
    await expectTrpcError(await send(broken('/trpc/tasks.create')), 400, 'malformed_request', restErrors, 'tasks.create');
  });
});

describe('a refusal after requests received whole on the same connection', () => {
  /** The status lines of every answer on the connection, in order (an answer follows the body before it directly). */
  const statuses = (answer: RawAnswer) => [...answer.raw.matchAll(/HTTP\/1\.1 (\d{3}) [A-Z]/g)].map((m) => Number(m[1]));
  const labels = async (label: string) =>
    (await app.request('GET', '/api/users/me/tasks?page_size=100', { token })).body.data.filter((t: { attributes: { label: string } }) => t.attributes.label === label).length;
  const create = (path: string, label: string, headers: string[] = []) => {
    const body = path.startsWith('/trpc') ? JSON.stringify({ json: { task: { label } } }) : JSON.stringify({ task: { label } });
    return [`POST ${path} HTTP/1.1`, HOST, `Authorization: ${token}`, 'Content-Type: application/json', `Content-Length: ${body.length}`, ...headers, '', body].join('\r\n');
  };

  it.each([
    ['/api/users/me/tasks', 201],
    ['/trpc/tasks.create', 200],
  ])('%s, then bytes that are no request, in one packet: its own answer first, then 400, and it ran once', async (path, status) => {
    const label = `pipelined ${path}`;
    const answer = await send(`${create(path, label)}X\r\n\r\n`);
    expect(statuses(answer), answer.raw).toEqual([status, 400]);
    expect(answer.status).toBe(status);
    expect(await labels(label)).toBe(1);
    // The refusal is of the bytes after it, which name no door: REST's envelope.
    expect(JSON.parse(answer.raw.slice(answer.raw.lastIndexOf('\r\n\r\n') + 4)).errors[0].code).toBe('malformed_request');
  });

  it('a create, then a whole request line to /trpc that Node refuses: its answer, then a tRPC error', async () => {
    const label = 'before a refused tRPC line';
    const answer = await send(`${create('/api/users/me/tasks', label)}${line((p) => `GET ${p} HTTP/7.3`)('/trpc/users.me')}`);
    expect(statuses(answer)).toEqual([201, 400]);
    expect(JSON.parse(answer.raw.slice(answer.raw.lastIndexOf('\r\n\r\n') + 4)).error.json.data).toMatchObject({ code: 'malformed_request', httpStatus: 400 });
    expect(await labels(label)).toBe(1);
  });

  it('headers too large after a create: its answer, then 431', async () => {
    const label = 'before 431';
    const answer = await send(`${create('/api/users/me/tasks', label)}${get([HOST, `X-Padding: ${'a'.repeat(20_000)}`])('/api/users/me')}`);
    expect(statuses(answer), answer.raw.slice(0, 400)).toEqual([201, 431]);
    expect(await labels(label)).toBe(1);
  });

  it('after a request that closes the connection, what follows is not read: one answer', async () => {
    const answer = await send(`${get([HOST])('/api/users/me')}${get([HOST])('/api/users/me')}garbage\r\n\r\n`);
    expect(statuses(answer)).toEqual([200]);
  });

  it.each([
    ['/api/users/me/tasks', 201],
    ['/trpc/tasks.create', 200],
  ])('%s from a client that half-closes after sending it: answered', async (path, status) => {
    const label = `half-closed ${path}`;
    const answer = await rawExchange(app.baseUrl, Buffer.from(create(path, label), 'latin1'), { halfClose: true });
    expect(statuses(answer)).toEqual([status]);
    expect(await labels(label)).toBe(1);
  });

  it('a create, then a CONNECT: its answer, then 404', async () => {
    const label = 'before CONNECT';
    const answer = await send(`${create('/api/users/me/tasks', label)}CONNECT /api/users/me HTTP/1.1\r\n${HOST}\r\n\r\n`);
    expect(statuses(answer)).toEqual([201, 404]);
    expect(await labels(label)).toBe(1);
  });

  it.each([
    ['/api/users/me/events', 'the REST stream'],
    [`/trpc/events.onChange?input=${encodeURIComponent('{"json":{}}')}`, 'the tRPC subscription'],
  ])('%s: a stream whose client closes its side ends at once (%s), and its slot is free', async (target) => {
    const { port } = new URL(app.baseUrl);
    const socket = net.connect({ port: Number(port), host: '127.0.0.1', allowHalfOpen: true });
    const opened = new Promise<void>((resolve) => socket.once('data', () => resolve()));
    socket.write(`GET ${target} HTTP/1.1\r\n${HOST}\r\nAuthorization: ${token}\r\nAccept: text/event-stream\r\n\r\n`);
    await opened;
    await eventually(() => app.events.streamsOf(token) === 1, { message: 'the stream is open' });
    socket.end();
    // Not at the stream's next heartbeat (15 s): its client is gone for it when it closes its side.
    await eventually(() => app.events.streamsOf(token) === 0, { message: 'the stream ended', timeout: 2_000 });
    socket.destroy();
  });

  it('requests pipelined on one connection run in their order: an edit before a read, a key\'s first before its second', async () => {
    const created = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Pipelined' } } });
    const id = created.body.data.id as number;
    const patch = (name: string) => {
      const body = JSON.stringify({ project: { name } });
      return [`PATCH /api/projects/${id} HTTP/1.1`, HOST, `Authorization: ${token}`, 'Content-Type: application/json', `Content-Length: ${body.length}`, '', body].join('\r\n');
    };
    const read = [`GET /api/projects/${id} HTTP/1.1`, HOST, `Authorization: ${token}`, 'Connection: close', '', ''].join('\r\n');
    const edited = await send(`${patch('Renamed')}${read}`);
    expect(statuses(edited)).toEqual([200, 200]);
    expect(JSON.parse(edited.raw.slice(edited.raw.lastIndexOf('\r\n\r\n') + 4)).data.attributes.name).toBe('Renamed');
    const keyed = create('/api/users/me/tasks', 'keyed twice', ['Idempotency-Key: pipelined-key']);
    const twice = await send(`${keyed}${keyed.replace('Content-Type', 'Connection: close\r\nContent-Type')}`);
    expect(statuses(twice)).toEqual([201, 201]);
    expect(twice.raw.split('Idempotent-Replayed: true').length - 1).toBe(1);
    expect(await labels('keyed twice')).toBe(1);
  });

  it('a request that could not be answered is not run: behind a stream, or after an answer that ends the connection', async () => {
    const { port } = new URL(app.baseUrl);
    const socket = net.connect({ port: Number(port), host: '127.0.0.1', allowHalfOpen: true });
    const opened = new Promise<void>((resolve) => socket.once('data', () => resolve()));
    socket.write(`GET /api/users/me/events HTTP/1.1\r\n${HOST}\r\nAuthorization: ${token}\r\nAccept: text/event-stream\r\n\r\n${create('/api/users/me/tasks', 'behind a stream')}`);
    await opened;
    socket.end();
    await eventually(() => app.events.streamsOf(token) === 0, { message: 'the stream ended' });
    socket.destroy();
    expect(await labels('behind a stream')).toBe(0);
    // HTTP/1.0 without keep-alive (Node answers a 1.0 request with Connection: close): the write after it is not run.
    const answer = await send(`GET /api/users/me HTTP/1.0\r\nAuthorization: ${token}\r\nConnection: keep-alive\r\n\r\n${create('/api/users/me/tasks', 'after 1.0')}`);
    expect(statuses(answer)).toEqual([200]);
    expect(await labels('after 1.0')).toBe(0);
  });

  it('five creates, then a CONNECT: five answers, then 404, and five tasks', async () => {
    const answer = await send(`${[1, 2, 3, 4, 5].map((i) => create('/api/users/me/tasks', `before CONNECT ${i}`)).join('')}CONNECT 127.0.0.1:22 HTTP/1.1\r\n${HOST}\r\n\r\n`);
    expect(statuses(answer)).toEqual([201, 201, 201, 201, 201, 404]);
    for (const i of [1, 2, 3, 4, 5]) expect(await labels(`before CONNECT ${i}`)).toBe(1);
  });

  it('a CONNECT whose client keeps its side open is closed by the service once answered', async () => {
    const { port } = new URL(app.baseUrl);
    const closed = await new Promise<string>((resolve) => {
      const socket = net.connect({ port: Number(port), host: '127.0.0.1', allowHalfOpen: true });
      let text = '';
      socket.on('data', (chunk) => (text += chunk.toString()));
      // Once the answer has come, bytes sent on find no one reading (a reset, then an error on
      // the next write): the service let go of the socket.
      socket.on('end', () => {
        const poke = setInterval(() => (socket.destroyed ? clearInterval(poke) : socket.write('x')), 100);
        poke.unref();
      });
      socket.on('error', () => resolve(text));
      socket.on('close', () => resolve(text));
      socket.write(`CONNECT /api/users/me HTTP/1.1\r\n${HOST}\r\n\r\n`);
      setTimeout(() => resolve('still open'), 3_000).unref();
    });
    expect(closed).toMatch(/^HTTP\/1\.1 404 /);
  });

  it('CONNECT is 404 missing_endpoint in the door\'s shape, not a closed connection', async () => {
    const connect = (target: string) => `CONNECT ${target} HTTP/1.1\r\n${HOST}\r\n\r\n`;
    const restErrors = expectEnvelope(await send(connect('/api/users/me')), 404, 'missing_endpoint');
    expectEnvelope(await send(connect('127.0.0.1:443')), 404, 'missing_endpoint');
    await expectTrpcError(await send(connect('/trpc/users.me')), 404, 'missing_endpoint', restErrors, 'users.me');
  });
});
