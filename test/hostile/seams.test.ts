/**
 * The seams around the two doors (API-CONTRACT.md §1, §2, §7), sent as raw bytes on raw
 * sockets: a client library would transcode the body, resolve the dot segments, add a Host
 * or drop an Expect before the service ever saw them.
 *
 * - JSON is UTF-8: another charset is 415 and a byte that is no UTF-8 is 400 `invalid_json`,
 *   on both doors, and nothing is written (a UTF-16LE body once hid deep nesting from the
 *   nesting check and overflowed the stack of the idempotency fingerprint: 500 on every retry);
 * - dot-segment and backslash targets are read once, as the routes read them, so what they
 *   reach carries `Cache-Control: no-store` like any other answer of /api and /trpc;
 * - links are built from a valid Host only; a request without one (HTTP/1.1), with several
 *   or with garbage is 400 with the envelope;
 * - on a route that exists, authentication comes first on both doors: an anonymous caller
 *   gets 401 whatever is wrong with its path id, query, media type or body;
 * - every error of the port has the envelope: an unknown Expect (417), a transfer coding
 *   Node does not decode (501), a Content-Encoding (415).
 */
import net from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { rawExchange, type RawAnswer } from '../helpers/http.js';

let app: TestApp;
let token: string;

beforeAll(async () => {
  app = await startTestApp();
  ({ token } = await app.register());
});
afterAll(async () => {
  await app?.close();
});

/** Sends `head` (request line and headers, without the blank line) and `body` as they are; the whole answer. */
function send(head: string, body: Buffer = Buffer.alloc(0)): Promise<RawAnswer> {
  return rawExchange(app.baseUrl, Buffer.concat([Buffer.from(`${head}\r\nConnection: close\r\n\r\n`, 'latin1'), body]));
}

const HOST = 'Host: planning.example';
const auth = () => `Authorization: ${token}`;

/** A request with a body of `bytes`, its Content-Length set. */
function withBody(requestLine: string, headers: string[], bytes: Buffer): Promise<RawAnswer> {
  return send([requestLine, ...headers, `Content-Length: ${bytes.length}`].join('\r\n'), bytes);
}

/** The envelope's first error, whichever door answered (tRPC carries it in `error.json.data.errors`). */
function firstError(answer: RawAnswer): { status: string; code: string } {
  const body = JSON.parse(answer.text);
  return (body.errors ?? body.error?.json?.data?.errors ?? body[0]?.error?.json?.data?.errors)[0];
}

function expectEnvelope(answer: RawAnswer, status: number, code: string): void {
  expect(answer.status, answer.head + '\n' + answer.text).toBe(status);
  expect(answer.headers['content-type']).toMatch(/^application\/json/);
  const error = firstError(answer);
  expect(error).toMatchObject({ status: String(status), code });
}

async function taskCount(): Promise<number> {
  const res = await app.request('GET', '/api/users/me/tasks', { token });
  return (res.body as { data: unknown[] }).data.length;
}

/** A create body for each door. */
const restCreate = (label: string) => JSON.stringify({ task: { label } });
const trpcCreate = (label: string) => JSON.stringify({ json: { task: { label } } });
const DOORS = [
  { door: 'REST', line: 'POST /api/users/me/tasks HTTP/1.1', body: restCreate },
  { door: 'tRPC', line: 'POST /trpc/tasks.create HTTP/1.1', body: trpcCreate },
] as const;

/** UTF-16LE text whose U+2200 characters are the bytes `00 22`: a UTF-8 scan reads a quote in each. */
function hiddenDeepUtf16(levels: number): Buffer {
  const deep = '['.repeat(levels) + ']'.repeat(levels);
  return Buffer.from(`{"task":{"label":"\u2200","x":${deep}}}`, 'utf16le');
}

describe('JSON on the wire is UTF-8', () => {
  const charsets: Array<[string, (text: string) => Buffer]> = [
    ['utf-16le', (t) => Buffer.from(t, 'utf16le')],
    ['utf-16be', (t) => Buffer.from(t, 'utf16le').swap16()],
    ['utf-16', (t) => Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(t, 'utf16le')])],
    ['utf-32', (t) => Buffer.from([...t].flatMap((c) => [c.codePointAt(0)!, 0, 0, 0]))],
    ['utf-7', (t) => Buffer.from(t, 'latin1')],
    ['iso-8859-1', (t) => Buffer.from(t, 'latin1')],
    ['"UTF-16LE"', (t) => Buffer.from(t, 'utf16le')],
  ];
  for (const { door, line, body } of DOORS) {
    it.each(charsets)(`${door}: charset=%s is 415 unsupported_media_type, and nothing is written`, async (charset, encode) => {
      const before = await taskCount();
      const answer = await withBody(line, [HOST, auth(), `Content-Type: application/json; charset=${charset}`], encode(body('transcoded')));
      expectEnvelope(answer, 415, 'unsupported_media_type');
      expect(await taskCount()).toBe(before);
    });
  }

  it('a keyed UTF-16LE write hiding 5,000 levels of nesting is 415 on every retry, never a 500', async () => {
    const before = await taskCount();
    for (let attempt = 0; attempt < 2; attempt++) {
      const answer = await withBody(DOORS[0].line, [HOST, auth(), 'Content-Type: application/json; charset=utf-16le', 'Idempotency-Key: deep-utf16'], hiddenDeepUtf16(5_000));
      expectEnvelope(answer, 415, 'unsupported_media_type');
    }
    expect(await taskCount()).toBe(before);
  });

  it('utf-8 and utf8 in any case are served (the refusals above are not of every charset)', async () => {
    for (const charset of ['utf-8', 'UTF-8', 'utf8', '"utf-8"']) {
      const answer = await withBody(DOORS[0].line, [HOST, auth(), `Content-Type: application/json; charset=${charset}`], Buffer.from(restCreate(`é ${charset}`)));
      expect(answer.status, answer.text).toBe(201);
      expect(JSON.parse(answer.text).data.attributes.label).toBe(`é ${charset}`);
    }
  });

  const invalid: Array<[string, number[]]> = [
    ['a lone 0xFF', [0xff]],
    ['a lone continuation byte', [0x80]],
    ['an overlong slash', [0xc0, 0xaf]],
    ['a surrogate encoded in UTF-8', [0xed, 0xa0, 0x80]],
    ['a truncated 3-byte sequence', [0xe2, 0x82]],
    ['a code point above U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
  ];
  for (const { door, line, body } of DOORS) {
    it.each(invalid)(`${door}: %s inside a label is 400 invalid_json, not replaced and stored`, async (_what, bytes) => {
      const before = await taskCount();
      const [head, tail] = body('<>').split('<>') as [string, string];
      const answer = await withBody(line, [HOST, auth(), 'Content-Type: application/json'], Buffer.concat([Buffer.from(head), Buffer.from(bytes), Buffer.from(tail)]));
      expectEnvelope(answer, 400, 'invalid_json');
      expect(await taskCount()).toBe(before);
    });
  }

  it('tRPC: a query input whose percent-decoded bytes are not UTF-8 is 400 invalid_json', async () => {
    const answer = await send([`GET /trpc/tasks.get?input=${encodeURIComponent('{"json":{"id":"')}%FF%22%7D%7D HTTP/1.1`, HOST, auth()].join('\r\n'));
    expectEnvelope(answer, 400, 'invalid_json');
    const fine = await send([`GET /trpc/tasks.list?input=${encodeURIComponent('{"json":{"page":1}}')} HTTP/1.1`, HOST, auth()].join('\r\n'));
    expect(fine.status, fine.text).toBe(200);
  });

  for (const { door, line, body } of DOORS) {
    it(`${door}: Content-Encoding gzip is 415 (no coding is decoded), a real gzip body included`, async () => {
      const before = await taskCount();
      const answer = await withBody(line, [HOST, auth(), 'Content-Type: application/json', 'Content-Encoding: gzip'], gzipSync(body('zipped')));
      expectEnvelope(answer, 415, 'unsupported_media_type');
      const identity = await withBody(line, [HOST, auth(), 'Content-Type: application/json', 'Content-Encoding: identity'], Buffer.from(body('plain')));
      expect(identity.status, identity.text).toBe(door === 'REST' ? 201 : 200);
      expect(await taskCount()).toBe(before + 1);
    });
  }
});

describe('dot segments and backslashes are read once, before anything path-scoped', () => {
  const targets: Array<[string, string, string?]> = [
    ['GET', '/x/../api/users/me'],
    ['GET', '/api/./users/me'],
    ['GET', '/api\\users\\me'],
    ['GET', '/api/users/%2e%2e/users/me'],
    ['GET', '/x/../trpc/users.me'],
    ['GET', '/trpc\\users.me'],
    ['POST', '/x/../api/users/me/tasks', restCreate('dotted')],
    ['POST', '/api\\users\\me\\tasks', restCreate('backslashed')],
    ['POST', '/x/../trpc/tasks.create', trpcCreate('dotted')],
  ];
  it.each(targets)('%s %s is served as its resolved path, with Cache-Control: no-store', async (method, target, body) => {
    const answer = body === undefined
      ? await send([`${method} ${target} HTTP/1.1`, HOST, auth()].join('\r\n'))
      : await withBody(`${method} ${target} HTTP/1.1`, [HOST, auth(), 'Content-Type: application/json'], Buffer.from(body));
    expect([200, 201], answer.text).toContain(answer.status);
    expect(answer.headers['cache-control']).toBe('no-store');
  });

  it('a login through a dot-segment target carries no-store too: its token is never cached', async () => {
    const username = `dots_${Date.now().toString(36)}`;
    await app.register(username);
    const answer = await withBody('POST /api/x/../users/authorizations HTTP/1.1', [HOST, 'Content-Type: application/json'], Buffer.from(JSON.stringify({ username, password: 'correct horse' })));
    expect(answer.status, answer.text).toBe(201);
    expect(JSON.parse(answer.text).meta.token).toBeTruthy();
    expect(answer.headers['cache-control']).toBe('no-store');
  });

  it('//host/… still names no route (a path, never another host)', async () => {
    const answer = await send(['GET //evil/../api/users/me HTTP/1.1', HOST, auth()].join('\r\n'));
    // '//evil/../api/users/me' resolves to '//api/users/me': still no route.
    expectEnvelope(answer, 404, 'missing_endpoint');
  });
});

describe('links come from a valid Host only', () => {
  const listLine = 'GET /api/users/me/tasks HTTP/1.1';

  it.each([
    ['HTTP/1.1 without Host', ['GET /api/users/me/tasks HTTP/1.1']],
    ['HTTP/1.1 without Host, on /trpc', ['GET /trpc/tasks.list HTTP/1.1']],
    ['an empty Host', [listLine, 'Host: ']],
    ['a Host with a space', [listLine, 'Host: a b']],
    ['a Host with a path', [listLine, 'Host: evil.example/x']],
    ['a Host with user info', [listLine, 'Host: user@evil.example']],
    ['a Host with markup', [listLine, 'Host: <script>']],
    ['a port above 65535', [listLine, 'Host: planning.example:70000']],
    ['two Host headers', [listLine, HOST, 'Host: other.example']],
  ])('%s: 400 malformed_request with the envelope', async (_what, lines) => {
    const answer = await send([...lines, auth()].join('\r\n'));
    expectEnvelope(answer, 400, 'malformed_request');
  });

  it('HTTP/1.0 without Host: links name the address the client connected to', async () => {
    const answer = await send([listLine.replace('1.1', '1.0'), auth()].join('\r\n'));
    expect(answer.status, answer.text).toBe(200);
    const { port } = new URL(app.baseUrl);
    expect(JSON.parse(answer.text).links.first).toBe(`http://127.0.0.1:${port}/api/users/me/tasks?page=1`);
  });

  it.each([
    ['planning.example', 'http://planning.example'],
    ['Planning.Example:8080', 'http://planning.example:8080'],
    ['[::1]:3000', 'http://[::1]:3000'],
    ['10.0.0.7', 'http://10.0.0.7'],
  ])('Host %s gives links at %s', async (host, origin) => {
    const answer = await send([listLine, `Host: ${host}`, auth()].join('\r\n'));
    expect(answer.status, answer.text).toBe(200);
    expect(JSON.parse(answer.text).links.first).toBe(`${origin}/api/users/me/tasks?page=1`);
  });

  it('an absolute-form target names the host of the links (RFC 9112 §3.2.2)', async () => {
    const answer = await send(['GET http://absolute.example/api/users/me/tasks HTTP/1.1', HOST, auth()].join('\r\n'));
    expect(answer.status, answer.text).toBe(200);
    expect(JSON.parse(answer.text).links.first).toBe('http://absolute.example/api/users/me/tasks?page=1');
  });
});

describe('links behind a trusted proxy (TRUST_PROXY)', () => {
  let proxied: TestApp;
  let proxiedToken: string;
  beforeAll(async () => {
    proxied = await startTestApp({ trustProxy: 'loopback' });
    ({ token: proxiedToken } = await proxied.register());
  });
  afterAll(async () => {
    await proxied?.close();
  });
  const list = (headers: Record<string, string>) =>
    proxied.request('GET', '/api/users/me/tasks', { token: proxiedToken, headers });

  it('honour X-Forwarded-Proto and X-Forwarded-Host', async () => {
    const res = await list({ 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'api.planning.example' });
    expect(res.status, res.text).toBe(200);
    expect(res.body.links.first).toBe('https://api.planning.example/api/users/me/tasks?page=1');
  });

  it('refuse a forwarded host that is not a host (400 malformed_request), and read an unknown scheme as http', async () => {
    const garbage = await list({ 'X-Forwarded-Host': 'evil.example/phish?' });
    expect(garbage.status, garbage.text).toBe(400);
    expect(garbage.body.errors[0].code).toBe('malformed_request');
    const scheme = await list({ 'X-Forwarded-Proto': 'javascript', 'X-Forwarded-Host': 'api.planning.example' });
    expect(scheme.body.links.first).toBe('http://api.planning.example/api/users/me/tasks?page=1');
  });
});

describe('on a route that exists, authentication comes first, on both doors', () => {
  const deep = '['.repeat(100) + ']'.repeat(100);
  const cases: Array<{ what: string; rest: [string, string[], Buffer?]; trpc: [string, string[], Buffer?]; withToken: [number, string] }> = [
    { what: 'a malformed path id', rest: ['GET /api/tasks/abc HTTP/1.1', []], trpc: ['GET /trpc/tasks.get?input=%7B%22json%22%3A%7B%22id%22%3A%22abc%22%7D%7D HTTP/1.1', []], withToken: [404, 'record_not_found'] },
    { what: 'page=0', rest: ['GET /api/users/me/tasks?page=0 HTTP/1.1', []], trpc: ['GET /trpc/tasks.list?input=%7B%22json%22%3A%7B%22page%22%3A0%7D%7D HTTP/1.1', []], withToken: [400, 'invalid'] },
    { what: 'text/plain', rest: ['POST /api/users/me/tasks HTTP/1.1', ['Content-Type: text/plain'], Buffer.from('x')], trpc: ['POST /trpc/tasks.create HTTP/1.1', ['Content-Type: text/plain'], Buffer.from('x')], withToken: [415, 'unsupported_media_type'] },
    { what: 'a charset other than UTF-8', rest: ['POST /api/users/me/tasks HTTP/1.1', ['Content-Type: application/json; charset=utf-16le'], Buffer.from(restCreate('x'), 'utf16le')], trpc: ['POST /trpc/tasks.create HTTP/1.1', ['Content-Type: application/json; charset=utf-16le'], Buffer.from(trpcCreate('x'), 'utf16le')], withToken: [415, 'unsupported_media_type'] },
    { what: 'broken JSON', rest: ['POST /api/users/me/tasks HTTP/1.1', ['Content-Type: application/json'], Buffer.from('{bad')], trpc: ['POST /trpc/tasks.create HTTP/1.1', ['Content-Type: application/json'], Buffer.from('{bad')], withToken: [400, 'invalid_json'] },
    { what: 'nesting beyond 64 levels', rest: ['POST /api/users/me/tasks HTTP/1.1', ['Content-Type: application/json'], Buffer.from(deep)], trpc: ['POST /trpc/tasks.create HTTP/1.1', ['Content-Type: application/json'], Buffer.from(deep)], withToken: [400, 'invalid_json'] },
    { what: 'a body over 100 KiB', rest: ['POST /api/users/me/tasks HTTP/1.1', ['Content-Type: application/json'], Buffer.from(restCreate('x'.repeat(110_000)))], trpc: ['POST /trpc/tasks.create HTTP/1.1', ['Content-Type: application/json'], Buffer.from(trpcCreate('x'.repeat(110_000)))], withToken: [413, 'payload_too_large'] },
    { what: 'invalid UTF-8', rest: ['POST /api/users/me/tasks HTTP/1.1', ['Content-Type: application/json'], Buffer.from([0x7b, 0xff, 0x7d])], trpc: ['POST /trpc/tasks.create HTTP/1.1', ['Content-Type: application/json'], Buffer.from([0x7b, 0xff, 0x7d])], withToken: [400, 'invalid_json'] },
  ];

  const sendCase = ([line, headers, body]: [string, string[], Buffer?], authorization: string[]) =>
    body === undefined ? send([line, HOST, ...authorization, ...headers].join('\r\n')) : withBody(line, [HOST, ...authorization, ...headers], body);

  for (const c of cases) {
    it(`${c.what}: 401 on both doors without a token, ${c.withToken.join(' ')} on both with one`, async () => {
      for (const request of [c.rest, c.trpc]) {
        expectEnvelope(await sendCase(request, []), 401, 'unauthorized');
        expectEnvelope(await sendCase(request, ['Authorization: not-a-token']), 401, 'unauthorized');
        expectEnvelope(await sendCase(request, [auth()]), ...c.withToken);
      }
    });
  }

  it('an unknown route stays 404 missing_endpoint without a token', async () => {
    expectEnvelope(await send(['GET /api/tasks/abc/nothing HTTP/1.1', HOST].join('\r\n')), 404, 'missing_endpoint');
    expectEnvelope(await send(['GET /trpc/no.such.procedure HTTP/1.1', HOST].join('\r\n')), 404, 'missing_endpoint');
  });
});

describe('every error of the port carries the envelope', () => {
  it('an Expect other than 100-continue is 417 expectation_failed', async () => {
    const answer = await send(['GET /api/users/me HTTP/1.1', HOST, auth(), 'Expect: the-impossible'].join('\r\n'));
    expectEnvelope(answer, 417, 'expectation_failed');
    expect(answer.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('Expect: 100-continue is met', async () => {
    const body = Buffer.from(restCreate('continued'));
    const answer = await withBody('POST /api/users/me/tasks HTTP/1.1', [HOST, auth(), 'Content-Type: application/json', 'Expect: 100-continue'], body);
    expect(answer.head).toMatch(/^HTTP\/1\.1 (100|201)/);
    expect(answer.text).toContain('"continued"');
  });

  it.each([
    ['gzip, chunked'],
    ['deflate, chunked'],
  ])('Transfer-Encoding: %s is 501 not_implemented, and nothing is written', async (coding) => {
    const before = await taskCount();
    const body = restCreate('coded');
    const answer = await send([`POST /api/users/me/tasks HTTP/1.1`, HOST, auth(), 'Content-Type: application/json', `Transfer-Encoding: ${coding}`].join('\r\n'),
      Buffer.from(`${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`));
    expectEnvelope(answer, 501, 'not_implemented');
    expect(await taskCount()).toBe(before);
  });

  it('Transfer-Encoding: chunked alone is read', async () => {
    const body = restCreate('chunked');
    const answer = await send([`POST /api/users/me/tasks HTTP/1.1`, HOST, auth(), 'Content-Type: application/json', 'Transfer-Encoding: chunked'].join('\r\n'),
      Buffer.from(`${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`));
    expect(answer.status, answer.text).toBe(201);
  });
});

describe('found by a review of the seams (each pinned)', () => {
  /** Sends `head` and the first `sent` bytes of a body, then closes its side: the rest never comes. */
  function cutOff(head: string, body: Buffer): Promise<void> {
    const { port } = new URL(app.baseUrl);
    return new Promise((resolve) => {
      const socket = net.connect(Number(port), '127.0.0.1', () => {
        socket.write(Buffer.concat([Buffer.from(`${head}\r\n\r\n`), body]));
        setTimeout(() => socket.destroy(), 100);
      });
      socket.on('close', () => resolve());
      socket.on('error', () => resolve());
    });
  }

  for (const { door, line, body } of DOORS) {
    it(`${door}: a body cut off before its end changes nothing (Content-Length short, or chunked without its last chunk)`, async () => {
      const before = await taskCount();
      const bytes = Buffer.from(body('cut off'));
      await cutOff([line, HOST, auth(), 'Content-Type: application/json', `Content-Length: ${bytes.length + 50}`].join('\r\n'), bytes);
      await cutOff([line, HOST, auth(), 'Content-Type: application/json', 'Transfer-Encoding: chunked'].join('\r\n'), Buffer.from(`${bytes.length.toString(16)}\r\n${bytes}\r\n`));
      // The server has read what came; a request after them sees their effect, if they had one.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await taskCount()).toBe(before);
    });

    it(`${door}: a 5 MiB body sent whole before reading gets its 413, and a 10 MB one declared with Expect: 100-continue gets it without a 100`, async () => {
      const big = Buffer.alloc(5 * 1024 * 1024, 0x20);
      const answer = await withBody(line, [HOST, auth(), 'Content-Type: application/json'], big);
      expectEnvelope(answer, 413, 'payload_too_large');
      const expecting = await send([line, HOST, auth(), 'Content-Type: application/json', 'Content-Length: 10000000', 'Expect: 100-continue'].join('\r\n'));
      expect(expecting.head).not.toMatch(/^HTTP\/1\.1 100/);
      expectEnvelope(expecting, 413, 'payload_too_large');
    });

    it(`${door}: a leading byte order mark is dropped, alike on both doors`, async () => {
      const before = await taskCount();
      const answer = await withBody(line, [HOST, auth(), 'Content-Type: application/json'], Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(body('bom'))]));
      expect(answer.status, answer.text).toBe(door === 'REST' ? 201 : 200);
      expect(await taskCount()).toBe(before + 1);
    });
  }

  it('a GET that carries a body not JSON is 415 on REST, on /trpc and on the event stream alike', async () => {
    const text = Buffer.from('hello');
    for (const [line, extra] of [
      ['GET /api/users/me/tasks HTTP/1.1', []],
      ['GET /trpc/tasks.list HTTP/1.1', []],
      ['GET /api/users/me/events HTTP/1.1', ['Accept: text/event-stream']],
    ] as const) {
      expectEnvelope(await withBody(line, [HOST, auth(), 'Content-Type: text/plain', ...extra], text), 415, 'unsupported_media_type');
      expectEnvelope(await withBody(line, [HOST, auth(), 'Content-Type: application/json', ...extra], Buffer.from([0x7b, 0xff])), 400, 'invalid_json');
    }
  });

  it('a call that takes no input needs no body and no media type on /trpc either, as on REST', async () => {
    const rest = await send(['POST /api/users/me/events/tickets HTTP/1.1', HOST, auth(), 'Content-Length: 0'].join('\r\n'));
    expect(rest.status, rest.text).toBe(201);
    const trpc = await send(['POST /trpc/events.ticket HTTP/1.1', HOST, auth(), 'Content-Length: 0'].join('\r\n'));
    expect(trpc.status, trpc.text).toBe(200);
    // One that takes input, sent none: its missing wrapper, as on REST (§1 holds only requests with a body to the media type).
    const none = await send(['POST /trpc/tasks.create HTTP/1.1', HOST, auth(), 'Content-Length: 0'].join('\r\n'));
    expect(none.status, none.text).toBe(422);
    expect(JSON.parse(none.text).error.json.data.code).toBe('parameter_missing');
    const restNone = await send(['POST /api/users/me/tasks HTTP/1.1', HOST, auth(), 'Content-Length: 0'].join('\r\n'));
    expect(restNone.status, restNone.text).toBe(422);
    expect(JSON.parse(restNone.text).errors[0].code).toBe('parameter_missing');
    // With a body, the media type is needed.
    expectEnvelope(await send(['POST /trpc/tasks.create HTTP/1.1', HOST, auth(), 'Content-Length: 2'].join('\r\n'), Buffer.from('{}')), 415, 'unsupported_media_type');
  });

  it('a chunked body of no bytes sent to a DELETE without a media type is no body', async () => {
    const created = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: `Gone${Date.now().toString(36)}` } } });
    const answer = await send([`DELETE /api/projects/${created.body.data.id} HTTP/1.1`, HOST, auth(), 'Transfer-Encoding: chunked'].join('\r\n'), Buffer.from('0\r\n\r\n'));
    expect(answer.status, answer.text).toBe(204);
  });

  it('the framing refusals of /api and /trpc paths carry Cache-Control: no-store', async () => {
    for (const head of [
      ['GET /api/users/me HTTP/1.1', 'Host: a b'],
      ['GET /trpc/users.me HTTP/1.1'],
      ['POST /api/users/me/tasks HTTP/1.1', HOST, 'Transfer-Encoding: gzip, chunked'],
    ]) {
      const answer = await send(head.join('\r\n'), head.some((h) => h.startsWith('Transfer')) ? Buffer.from('0\r\n\r\n') : undefined);
      expect(answer.status).toBeGreaterThanOrEqual(400);
      expect(answer.headers['cache-control'], head[0]).toBe('no-store');
    }
  });

  it('an untrusted X-Forwarded-Host is ignored, also on HTTP/1.0 without Host', async () => {
    const answer = await send(['GET /api/users/me/tasks HTTP/1.0', auth(), 'X-Forwarded-Host: evil.example'].join('\r\n'));
    expect(answer.status, answer.text).toBe(200);
    expect(JSON.parse(answer.text).links.first).not.toContain('evil');
  });

  it.each([
    ['GET http://a:99999/api/users/me HTTP/1.1'],
    ['GET foo://x/api/users/me/tasks HTTP/1.1'],
  ])('%s (a target that is no http URL) is 400 malformed_request', async (line) => {
    expectEnvelope(await send([line, HOST, auth()].join('\r\n')), 400, 'malformed_request');
    expectEnvelope(await send([line, HOST, auth(), 'Accept: text/event-stream'].join('\r\n')), 400, 'malformed_request');
  });

  it.each([['a..b'], ['_'], ['localhost:00000'], ['localhost:0'], ['-x.example']])('Host %s is 400 malformed_request', async (host) => {
    expectEnvelope(await send(['GET /api/users/me/tasks HTTP/1.1', `Host: ${host}`, auth()].join('\r\n')), 400, 'malformed_request');
  });

  it('a /trpc path that does not decode is 404 missing_endpoint, in JSON', async () => {
    for (const line of ['GET /trpc/%FF HTTP/1.1', 'POST /trpc/tasks.cr%ZZ HTTP/1.1']) {
      expectEnvelope(await send([line, HOST, auth(), 'Content-Length: 0'].join('\r\n')), 404, 'missing_endpoint');
    }
  });

  it('a batch far over the cap is answered with one envelope, not one error per call', async () => {
    const calls = Array.from({ length: 1_000 }, () => 'users.me').join(',');
    const answer = await send([`GET /trpc/${calls}?batch=1 HTTP/1.1`, HOST].join('\r\n'));
    expectEnvelope(answer, 400, 'batch_too_large');
    expect(answer.text.length).toBeLessThan(1_000);
  });

  /**
   * A value nested 40 deep and superjson metadata that makes each level's two members one
   * object: shared along 2^40 paths, in a few KB of request. `at` is where the value goes.
   */
  const sharedAlong40Paths = (at: string) => {
    let value: unknown = 0;
    const refs: Record<string, string[]> = {};
    let path = at;
    for (let i = 0; i < 40; i++) {
      value = [value, 0];
      refs[`${path}.0`] = [`${path}.1`];
      path += '.0';
    }
    return { value, refs };
  };

  it('a keyed tRPC write whose superjson metadata shares one object along 2^40 paths is fingerprinted at once', async () => {
    const { value: extra, refs } = sharedAlong40Paths('extra');
    const body = JSON.stringify({ json: { task: { label: 'shared' }, extra }, meta: { referentialEqualities: refs } });
    const answer = await withBody('POST /trpc/tasks.create HTTP/1.1', [HOST, auth(), 'Content-Type: application/json', 'Idempotency-Key: shared-paths'], Buffer.from(body));
    expect(answer.status, answer.text).toBe(200);
    const again = await withBody('POST /trpc/tasks.create HTTP/1.1', [HOST, auth(), 'Content-Type: application/json', 'Idempotency-Key: shared-paths'], Buffer.from(body));
    expect(again.headers['idempotent-replayed']).toBe('true');
  });

  it('a tRPC state change whose task shares one object along 2^40 paths is refused at once', async () => {
    // The members of `task` besides `state` reach the write function, which names the first one
    // it refuses: the input goes to the database written once per object (JSON.stringify alone
    // would write it along every path, for minutes, blocking the process).
    const created = await withBody('POST /trpc/tasks.create HTTP/1.1', [HOST, auth(), 'Content-Type: application/json'], Buffer.from(JSON.stringify({ json: { task: { label: 'shared' } } })));
    const id = (JSON.parse(created.text) as { result: { data: { json: { data: { id: number } } } } }).result.data.json.data.id;
    const { value: extra, refs } = sharedAlong40Paths('task.extra');
    const body = JSON.stringify({ json: { id, task: { state: 'planned', extra } }, meta: { referentialEqualities: refs } });
    const answer = await withBody('POST /trpc/tasks.changeState HTTP/1.1', [HOST, auth(), 'Content-Type: application/json'], Buffer.from(body));
    expectEnvelope(answer, 422, 'cannot_be_set');
  });
});
