/**
 * Where a webhook may send and how one attempt goes (API-CONTRACT.md §14;
 * src/webhooks/address-guard.ts, src/webhooks/outbound.ts): the URL's shape, which addresses
 * are public, every resolved address checked, and a POST against real loopback servers that
 * connects to the checked address, follows no redirect, reads a bounded body and keeps to its
 * time limit. The `https:` path is exercised for its refusals and for reaching the checked
 * address (a TLS handshake that a plain HTTP server fails); the tests hold no certificate.
 */
import http from 'node:http';
import net from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { checkUrlShape, isPublicAddress, MAX_URL_LENGTH, resolveChecked, type Resolve } from '../../src/webhooks/address-guard.js';
import { MAX_RESPONSE_BYTES, postOnce } from '../../src/webhooks/outbound.js';
import { freePort } from '../helpers/net.js';

const NOT_PUBLIC = [
  // IPv4
  ['0.0.0.0', 'unspecified'],
  ['0.1.2.3', 'unspecified'],
  ['10.0.0.1', 'private'],
  ['10.255.255.255', 'private'],
  ['100.64.0.1', 'CGNAT'],
  ['100.127.255.254', 'CGNAT'],
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback'],
  ['169.254.169.254', 'link-local'],
  ['172.16.0.1', 'private'],
  ['172.31.255.255', 'private'],
  ['192.0.0.8', 'IETF protocol assignment'],
  ['192.0.2.1', 'documentation'],
  ['192.88.99.1', '6to4 relay'],
  ['192.168.1.1', 'private'],
  ['198.18.0.1', 'benchmarking'],
  ['198.19.255.255', 'benchmarking'],
  ['198.51.100.7', 'documentation'],
  ['203.0.113.9', 'documentation'],
  ['224.0.0.1', 'multicast'],
  ['239.255.255.250', 'multicast'],
  ['240.0.0.1', 'reserved'],
  ['255.255.255.255', 'broadcast'],
  // IPv6
  ['::', 'unspecified'],
  ['0:0:0:0:0:0:0:0', 'unspecified'],
  ['::1', 'loopback'],
  ['0:0:0:0:0:0:0:1', 'loopback'],
  ['::ffff:127.0.0.1', 'IPv4-mapped'],
  ['::ffff:7f00:1', 'IPv4-mapped'],
  ['::ffff:8.8.8.8', 'IPv4-mapped'],
  ['::ffff:808:808', 'IPv4-mapped'],
  ['::8.8.8.8', 'IPv4-compatible'],
  ['::7f00:1', 'IPv4-compatible'],
  ['64:ff9b::7f00:1', 'NAT64'],
  ['64:ff9b::8.8.8.8', 'NAT64'],
  ['64:ff9b:1::1', 'NAT64'],
  ['100::1', 'discard'],
  ['2001::1', 'Teredo'],
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo'],
  ['2001:2::1', 'IETF protocol assignment'],
  ['2001:db8::1', 'documentation'],
  ['2002:7f00:1::1', '6to4'],
  ['3fff::1', 'documentation'],
  ['fc00::1', 'unique-local'],
  ['fd00::1', 'unique-local'],
  ['fdff:ffff::1', 'unique-local'],
  ['fe80::1', 'link-local'],
  ['febf::1', 'link-local'],
  ['fec0::1', 'site-local'],
  ['ff02::1', 'multicast'],
  ['ff0e::1', 'multicast'],
  ['4000::1', 'not global unicast'],
  ['fe80::1%eth0', 'zone'],
] as const;

const PUBLIC = [
  '93.184.215.14',
  '8.8.8.8',
  '1.1.1.1',
  '9.255.255.255',
  '11.0.0.0',
  '100.63.255.255',
  '100.128.0.0',
  '126.255.255.255',
  '128.0.0.0',
  '169.253.255.255',
  '172.15.255.255',
  '172.32.0.0',
  '192.167.255.255',
  '192.169.0.0',
  '198.17.255.255',
  '198.20.0.0',
  '223.255.255.255',
  '2606:4700::1111',
  '2606:4700:4700::1111',
  '2a00:1450:4001:82a::200e',
  '2001:4860:4860::8888',
  '2c0f:fb50:4003::1',
];

const NOT_IP = ['', 'example.com', 'localhost', '[::1]', '[2606:4700::1111]', '127.1', '2130706433', '0x7f000001', '0177.0.0.1', ' 8.8.8.8', '8.8.8.8 ', '1.2.3.4.5', '256.1.1.1', '::ffff:999.0.0.1', '2606:4700::1111::1', '8.8.8.8/32'];

describe('isPublicAddress', () => {
  it.each(NOT_PUBLIC)('refuses %s (%s)', (ip) => {
    expect(isPublicAddress(ip)).toBe(false);
  });

  it.each(PUBLIC)('accepts the public %s', (ip) => {
    expect(isPublicAddress(ip)).toBe(true);
  });

  it.each(NOT_IP)('refuses %j, not an IP literal', (text) => {
    expect(isPublicAddress(text)).toBe(false);
  });

  it('never throws, and answers a boolean, whatever the string', () => {
    const ipish = fc.string({ unit: fc.constantFrom(...'0123456789abcdefx:.[]%/ ') });
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'grapheme' }), ipish, fc.ipV4(), fc.ipV6(), fc.ipV4Extended()), (text) => {
        expect(typeof isPublicAddress(text)).toBe('boolean');
      }),
      { numRuns: 2_000 },
    );
  });

  it('refuses every address of 127/8, 10/8, 172.16/12 and 192.168/16', () => {
    const byte = fc.integer({ min: 0, max: 255 });
    const inRange = fc.oneof(
      fc.tuple(byte, byte, byte).map(([b, c, d]) => `127.${b}.${c}.${d}`),
      fc.tuple(byte, byte, byte).map(([b, c, d]) => `10.${b}.${c}.${d}`),
      fc.tuple(fc.integer({ min: 16, max: 31 }), byte, byte).map(([b, c, d]) => `172.${b}.${c}.${d}`),
      fc.tuple(byte, byte).map(([c, d]) => `192.168.${c}.${d}`),
    );
    fc.assert(
      fc.property(inRange, (ip) => {
        expect(isPublicAddress(ip)).toBe(false);
      }),
      { numRuns: 2_000 },
    );
  });

  it('refuses every IPv4-mapped IPv6 address, whatever the IPv4 inside, in both notations', () => {
    fc.assert(
      fc.property(fc.ipV4(), (v4) => {
        const [a, b, c, d] = v4.split('.').map(Number) as [number, number, number, number];
        const hex = `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
        expect(isPublicAddress(`::ffff:${v4}`)).toBe(false);
        expect(isPublicAddress(`::ffff:${hex}`)).toBe(false);
      }),
      { numRuns: 1_000 },
    );
  });

  it('refuses every unique-local and link-local IPv6 address', () => {
    const group = fc.integer({ min: 0, max: 0xffff }).map((n) => n.toString(16));
    const rest = fc.array(group, { minLength: 7, maxLength: 7 }).map((groups) => groups.join(':'));
    const unique = fc.tuple(fc.integer({ min: 0xfc00, max: 0xfdff }), rest).map(([first, tail]) => `${first.toString(16)}:${tail}`);
    const link = fc.tuple(fc.integer({ min: 0xfe80, max: 0xfebf }), rest).map(([first, tail]) => `${first.toString(16)}:${tail}`);
    fc.assert(
      fc.property(fc.oneof(unique, link), (ip) => {
        expect(net.isIP(ip)).toBe(6);
        expect(isPublicAddress(ip)).toBe(false);
      }),
      { numRuns: 1_000 },
    );
  });
});

/** The detail of a refusal, failing the test when the URL passes. */
function refusal(raw: string, allowPrivate = false): string {
  const result = checkUrlShape(raw, allowPrivate);
  if (!('refused' in result)) throw new Error(`${raw} passed: ${result.url.href}`);
  return result.refused;
}

describe('checkUrlShape', () => {
  it.each([
    ['http://example.com/hook', /https:/],
    ['https://u:p@example.com', /user name or password/],
    ['https://u@example.com/', /user name or password/],
    ['https://:p@example.com/', /user name or password/],
    ['https://@example.com', /user name or password/],
    ['https://@example.com/', /user name or password/],
    ['https://:@example.com/', /user name or password/],
    ['https:\\\\@example.com/', /backslash/], // a backslash, before any user info (API-CONTRACT.md §14)
    ['https:@example.com/', /user name or password/],
    ['not a url', /not an absolute URL/],
    ['', /not an absolute URL/],
    ['/relative/path', /not an absolute URL/],
    ['example.com/hook', /not an absolute URL/],
    ['ftp://example.com/file', /https:/],
    ['javascript:alert(1)', /https:/],
    ['data:text/plain,hello', /https:/],
    ['file:///etc/passwd', /https:/],
    ['wss://example.com/', /https:/],
    ['https://example.com:99999/', /not an absolute URL/],
  ])('refuses %s', (raw, detail) => {
    expect(refusal(raw)).toMatch(detail);
  });

  it.each([
    ['https://2130706433/', '127.0.0.1', 'loopback'],
    ['https://0x7f.1/', '127.0.0.1', 'loopback'],
    ['https://0177.0.0.1/', '127.0.0.1', 'loopback'],
    ['https://127.1/', '127.0.0.1', 'loopback'],
    ['https://0x7f000001/hook', '127.0.0.1', 'loopback'],
    ['https://0.0.0.0/', '0.0.0.0', 'unspecified'],
    ['https://[::]/', '::', 'unspecified'],
    ['https://[::1]:8443/', '::1', 'loopback'],
    ['https://[::ffff:127.0.0.1]/', '::ffff:7f00:1', 'IPv4-mapped'],
    ['https://[::ffff:7f00:1]/', '::ffff:7f00:1', 'IPv4-mapped'],
    ['https://[::ffff:8.8.8.8]/', '::ffff:808:808', 'IPv4-mapped'],
    ['https://100.64.0.1/', '100.64.0.1', 'CGNAT'],
    ['https://169.254.169.254/latest/meta-data/', '169.254.169.254', 'link-local'],
    ['https://10.0.0.5/', '10.0.0.5', 'private'],
    ['https://[fd00::1]/', 'fd00::1', 'unique-local'],
    ['https://[fe80::1]/', 'fe80::1', 'link-local'],
  ])('refuses the IP literal of %s (normalised to %s, %s)', (raw, address, kind) => {
    const detail = refusal(raw);
    expect(detail).toContain(address);
    expect(detail).toContain(kind);
    expect(detail).toMatch(/public addresses only/);
  });

  it('refuses a URL over 2,048 characters and accepts one of exactly 2,048', () => {
    const base = 'https://example.com/';
    const exact = base + 'a'.repeat(MAX_URL_LENGTH - base.length);
    expect(exact).toHaveLength(2048);
    expect('url' in checkUrlShape(exact, false)).toBe(true);
    expect(refusal(exact + 'a')).toMatch(/2,048/);
    expect(refusal(exact + 'a', true)).toMatch(/2,048/);
    // Counted as sent, in code points (§1); the serialization kept is longer (each emoji in 12
    // characters) and is not measured again at an attempt.
    const emoji = base + '😀'.repeat(MAX_URL_LENGTH - base.length);
    const shape = checkUrlShape(emoji, false);
    expect('url' in shape && shape.url.href.length).toBeGreaterThan(20_000);
    const kept = 'url' in shape ? shape.url.href : '';
    expect(refusal(kept)).toMatch(/2,048/);
    expect('url' in checkUrlShape(kept, false, { kept: true })).toBe(true);
  });

  it.each([
    ['https://example.com/hooks?a=1#part', 'example.com'],
    ['https://Hooks.Example.COM/x', 'hooks.example.com'],
    ['https://93.184.215.14:8443/x', '93.184.215.14'],
    ['https://[2606:4700::1111]/', '[2606:4700::1111]'],
    ['https://example.com/a@b', 'example.com'],
    ['https://example.com/?to=u@example.org', 'example.com'],
    ['https://localhost/', 'localhost'],
  ])('accepts %s', (raw, hostname) => {
    const result = checkUrlShape(raw, false);
    expect('url' in result && result.url.hostname).toBe(hostname);
  });

  it('with allowPrivate, accepts http: and private literals but still refuses user info and other schemes', () => {
    for (const raw of ['http://127.0.0.1:3000/hook', 'https://[::1]/', 'http://10.0.0.1/', 'http://localhost:8080/']) {
      expect('url' in checkUrlShape(raw, true), raw).toBe(true);
    }
    expect(refusal('ftp://127.0.0.1/', true)).toMatch(/https: or http:/);
    expect(refusal('javascript:alert(1)', true)).toMatch(/https: or http:/);
    expect(refusal('http://u:p@127.0.0.1/', true)).toMatch(/user name or password/);
    expect(refusal('http://@127.0.0.1/', true)).toMatch(/user name or password/);
  });
});

/** A resolver answering from a table, counting its calls. */
function tableResolver(table: Record<string, string[]>): Resolve & { calls: string[] } {
  const calls: string[] = [];
  const resolve = async (hostname: string) => {
    calls.push(hostname);
    const found = table[hostname];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return found.map((address) => ({ address, family: (net.isIP(address) === 6 ? 6 : 4) as 4 | 6 }));
  };
  return Object.assign(resolve, { calls });
}

const refusingResolver: Resolve = async () => {
  throw new Error('an IP literal must not be resolved');
};

describe('resolveChecked', () => {
  it('returns the first address when every address is public', async () => {
    const resolve = tableResolver({ 'hooks.example.com': ['93.184.215.14', '2606:4700::1111'] });
    expect(await resolveChecked(new URL('https://hooks.example.com/x'), { allowPrivate: false, resolve })).toEqual({ address: { address: '93.184.215.14', family: 4 } });
    expect(resolve.calls).toEqual(['hooks.example.com']);
  });

  it.each([
    [['93.184.215.14', '10.0.0.7', '1.1.1.1'], '10.0.0.7'],
    [['127.0.0.1', '93.184.215.14'], '127.0.0.1'],
    [['2606:4700::1111', '::ffff:169.254.169.254'], '::ffff:169.254.169.254'],
    [['93.184.215.14', 'fd12:3456::1'], 'fd12:3456::1'],
  ])('refuses a name that resolves to %j: one address that is not public is enough', async (addresses, culprit) => {
    const resolve = tableResolver({ 'mixed.example.com': addresses });
    const result = await resolveChecked(new URL('https://mixed.example.com/'), { allowPrivate: false, resolve });
    expect(result).toEqual({ refused: expect.stringContaining(`resolves to ${culprit},`) });
  });

  it('refuses a name that does not resolve, naming the error', async () => {
    const result = await resolveChecked(new URL('https://nowhere.example.com/'), { allowPrivate: false, resolve: tableResolver({}) });
    expect(result).toEqual({ refused: "The URL's host nowhere.example.com could not be resolved (ENOTFOUND)." });
    const codeless = await resolveChecked(new URL('https://odd.example.com/'), {
      allowPrivate: true,
      resolve: async () => {
        throw new Error('boom');
      },
    });
    expect(codeless).toEqual({ refused: expect.stringMatching(/could not be resolved/) });
  });

  it('refuses a resolver answer with no address or with something that is not an address', async () => {
    expect(await resolveChecked(new URL('https://empty.example.com/'), { allowPrivate: true, resolve: async () => [] })).toEqual({ refused: expect.stringMatching(/no address/) });
    const garbage = (async () => [{ address: 'evil.example.com', family: 4 }]) as Resolve;
    expect(await resolveChecked(new URL('https://odd.example.com/'), { allowPrivate: true, resolve: garbage })).toEqual({ refused: expect.stringMatching(/not an IP address/) });
  });

  it('takes an IP literal as its own single address, without resolving it', async () => {
    expect(await resolveChecked(new URL('https://93.184.215.14/'), { allowPrivate: false, resolve: refusingResolver })).toEqual({ address: { address: '93.184.215.14', family: 4 } });
    expect(await resolveChecked(new URL('https://[2606:4700::1111]:8443/'), { allowPrivate: false, resolve: refusingResolver })).toEqual({ address: { address: '2606:4700::1111', family: 6 } });
    expect(await resolveChecked(new URL('https://[::1]/'), { allowPrivate: false, resolve: refusingResolver })).toEqual({ refused: expect.stringContaining('::1, a loopback address') });
  });

  it('with allowPrivate, lets any address through', async () => {
    const resolve = tableResolver({ 'dev.example.test': ['127.0.0.1', '10.1.2.3'] });
    expect(await resolveChecked(new URL('http://dev.example.test/'), { allowPrivate: true, resolve })).toEqual({ address: { address: '127.0.0.1', family: 4 } });
  });

  it('refuses localhost through the system resolver', async () => {
    const result = await resolveChecked(new URL('https://localhost/'), { allowPrivate: false });
    expect('refused' in result && result.refused).toMatch(/loopback|could not be resolved/);
  });
});

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

interface Loopback {
  port: number;
  seen: Seen[];
  /** Connections accepted, requests or not. */
  connections: number;
}

const servers: (http.Server | net.Server)[] = [];
/** Sockets of the bare TCP servers: one that never reads would never see the client go. */
const sockets = new Set<net.Socket>();
afterEach(async () => {
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  for (const server of servers.splice(0)) {
    if (server instanceof http.Server) server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

/** An HTTP server on the loopback recording each request (its body read whole) before `answer` runs. */
async function httpServer(answer: (req: http.IncomingMessage, res: http.ServerResponse, seen: Seen) => void): Promise<Loopback> {
  const state: Loopback = { port: 0, seen: [], connections: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      state.seen.push(seen);
      answer(req, res, seen);
    });
  });
  server.on('connection', () => state.connections++);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.port = (server.address() as net.AddressInfo).port;
  return state;
}

/** A bare TCP server on the loopback: `onSocket` decides what each connection gets. */
async function tcpServer(onSocket: (socket: net.Socket) => void): Promise<Loopback> {
  const state: Loopback = { port: 0, seen: [], connections: 0 };
  const server = net.createServer((socket) => {
    state.connections++;
    sockets.add(socket);
    socket.on('error', () => {});
    onSocket(socket);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.port = (server.address() as net.AddressInfo).port;
  return state;
}

const BODY = JSON.stringify({ id: '00000000000000000001', type: 'task.created', data: { id: 't1' }, at: '2026-06-15T12:00:00.000Z' });
const HEADERS = { 'content-type': 'application/json', 'webhook-id': '00000000000000000001', 'webhook-timestamp': '1781524800', 'webhook-signature': 'v1,abc=' };
const LOCAL = { timeoutMs: 5_000, allowPrivate: true };

describe('postOnce', () => {
  it('a 2xx is delivered: one POST with the body, the given headers, its length and a user agent', async () => {
    const server = await httpServer((_req, res) => res.writeHead(204).end());
    const result = await postOnce(`http://127.0.0.1:${server.port}/hooks/in?x=1`, HEADERS, BODY, LOCAL);
    expect(result).toMatchObject({ outcome: 'delivered', httpStatus: 204, error: null, retryAfterSeconds: null });
    expect(result.durationMs).toBeGreaterThanOrEqual(0);
    expect(server.seen).toHaveLength(1);
    const [seen] = server.seen;
    expect(seen).toMatchObject({ method: 'POST', url: '/hooks/in?x=1', body: BODY });
    expect(seen!.headers).toMatchObject({ ...HEADERS, 'content-length': String(Buffer.byteLength(BODY)), host: `127.0.0.1:${server.port}` });
    expect(seen!.headers['user-agent']).toMatch(/webhooks/);
  });

  it('delivers to a kept URL whose serialization is longer than 2,048 characters (2,048 code points as sent)', async () => {
    const server = await httpServer((_req, res) => res.writeHead(204).end());
    const sent = `http://127.0.0.1:${server.port}/${'é'.repeat(2_000)}`;
    expect([...sent].length).toBeLessThanOrEqual(MAX_URL_LENGTH);
    const kept = new URL(sent).href;
    expect(kept.length).toBeGreaterThan(MAX_URL_LENGTH);
    expect(await postOnce(kept, HEADERS, BODY, LOCAL)).toMatchObject({ outcome: 'delivered', httpStatus: 204 });
    expect(server.seen[0]!.url).toBe(new URL(kept).pathname);
  });

  it('counts the body in bytes, not characters', async () => {
    const server = await httpServer((_req, res) => res.writeHead(200).end('ok'));
    const body = JSON.stringify({ title: 'café ☕ 𝄞' });
    expect((await postOnce(`http://127.0.0.1:${server.port}/`, HEADERS, body, LOCAL)).outcome).toBe('delivered');
    expect(server.seen[0]!.body).toBe(body);
    expect(server.seen[0]!.headers['content-length']).toBe(String(Buffer.byteLength(body)));
  });

  it('keeps the connection between attempts to one checked address: three deliveries, one connection', async () => {
    const server = await httpServer((_req, res) => res.writeHead(204).end());
    for (let i = 0; i < 3; i++) {
      expect(await postOnce(`http://127.0.0.1:${server.port}/k`, HEADERS, BODY, LOCAL)).toMatchObject({ outcome: 'delivered', httpStatus: 204 });
    }
    expect(server.seen).toHaveLength(3);
    expect(server.connections).toBe(1);
  });

  it('a kept connection the receiver drops as the next request goes out: that request is made again at once on a new one', async () => {
    const OK = 'HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: keep-alive\r\n\r\n';
    let requests = 0;
    const server = await tcpServer((socket) => {
      const first = server.connections === 1;
      let answered = false;
      socket.on('data', (chunk: Buffer) => {
        if (!chunk.includes('\r\n\r\n')) return;
        requests++;
        // The first connection answers one request, then resets on the next (as an idle timeout racing it would).
        if (first && answered) socket.resetAndDestroy();
        else {
          answered = true;
          socket.write(OK);
        }
      });
    });
    expect(await postOnce(`http://127.0.0.1:${server.port}/r`, HEADERS, BODY, LOCAL)).toMatchObject({ outcome: 'delivered', httpStatus: 200 });
    expect(await postOnce(`http://127.0.0.1:${server.port}/r`, HEADERS, BODY, LOCAL)).toMatchObject({ outcome: 'delivered', httpStatus: 200 });
    expect(server.connections).toBe(2);
    expect(requests).toBe(3);
  });

  it('a 500 fails with its status', async () => {
    const server = await httpServer((_req, res) => res.writeHead(500).end('down'));
    expect(await postOnce(`http://127.0.0.1:${server.port}/`, HEADERS, BODY, LOCAL)).toMatchObject({ outcome: 'failed', httpStatus: 500, error: 'HTTP 500', retryAfterSeconds: null });
  });

  it('a 410 fails with its status', async () => {
    const server = await httpServer((_req, res) => res.writeHead(410).end());
    expect(await postOnce(`http://127.0.0.1:${server.port}/`, HEADERS, BODY, LOCAL)).toMatchObject({ outcome: 'failed', httpStatus: 410, error: 'HTTP 410' });
  });

  it.each([301, 302, 307, 308])('a %i redirect fails and its Location is never requested', async (status) => {
    const target = await httpServer((_req, res) => res.writeHead(200).end());
    const server = await httpServer((req, res) => {
      if (req.url === '/moved') res.writeHead(200).end();
      else res.writeHead(status, { location: `http://127.0.0.1:${target.port}/elsewhere` }).end();
    });
    const result = await postOnce(`http://127.0.0.1:${server.port}/hook`, HEADERS, BODY, LOCAL);
    expect(result).toMatchObject({ outcome: 'failed', httpStatus: status, error: `redirect not followed (${status})` });
    expect(server.seen.map((s) => s.url)).toEqual(['/hook']);
    expect(target.connections).toBe(0);
  });

  it('a 429 with Retry-After in seconds gives retryAfterSeconds', async () => {
    const server = await httpServer((_req, res) => res.writeHead(429, { 'retry-after': '7' }).end());
    expect(await postOnce(`http://127.0.0.1:${server.port}/`, HEADERS, BODY, LOCAL)).toMatchObject({ outcome: 'failed', httpStatus: 429, error: 'HTTP 429', retryAfterSeconds: 7 });
  });

  const NOW = Date.UTC(2026, 5, 15, 12, 0, 0);
  it.each([
    [503, 'Mon, 15 Jun 2026 12:01:30 GMT', 90],
    [429, 'Monday, 15-Jun-26 12:01:30 GMT', 90],
    [503, 'Mon Jun 15 12:01:30 2026', 90],
    [503, 'Mon Jun  1 12:00:00 2026', 0],
    [503, 'Mon, 15 Jun 2026 11:00:00 GMT', 0],
    [503, '  120 ', 120],
    [503, 'soon', null],
    [503, '1.5', null],
    [503, '-5', null],
    [500, '30', null],
    [200, '30', null],
  ])('a %i with Retry-After %j gives %j seconds', async (status, header, seconds) => {
    const server = await httpServer((_req, res) => res.writeHead(status, { 'retry-after': header }).end());
    const result = await postOnce(`http://127.0.0.1:${server.port}/`, HEADERS, BODY, { ...LOCAL, now: () => NOW });
    expect(result.httpStatus).toBe(status);
    expect(result.retryAfterSeconds).toBe(seconds);
  });

  it('a 503 without Retry-After gives null', async () => {
    const server = await httpServer((_req, res) => res.writeHead(503).end());
    expect(await postOnce(`http://127.0.0.1:${server.port}/`, HEADERS, BODY, LOCAL)).toMatchObject({ outcome: 'failed', httpStatus: 503, retryAfterSeconds: null });
  });

  it('a server that accepts the connection and never answers fails with timeout, within the limit', async () => {
    const server = await tcpServer(() => {});
    const started = performance.now();
    const result = await postOnce(`http://127.0.0.1:${server.port}/`, HEADERS, BODY, { timeoutMs: 300, allowPrivate: true });
    const took = performance.now() - started;
    expect(result).toMatchObject({ outcome: 'failed', httpStatus: null, error: 'timeout' });
    expect(server.connections).toBe(1);
    expect(took).toBeGreaterThanOrEqual(290);
    expect(took).toBeLessThan(300 + 700);
  });

  it('an HTTP server that reads the request and never answers fails with timeout', async () => {
    const server = await httpServer(() => {});
    const result = await postOnce(`http://127.0.0.1:${server.port}/`, HEADERS, BODY, { timeoutMs: 300, allowPrivate: true });
    expect(result).toMatchObject({ outcome: 'failed', httpStatus: null, error: 'timeout' });
    expect(server.seen).toHaveLength(1);
    expect(result.durationMs).toBeLessThan(1_000);
  });

  it('a server whose headers trickle in past the limit fails with timeout', async () => {
    const server = await tcpServer((socket) => {
      socket.once('data', () => {
        socket.write('HTTP/1.1 200 OK\r\n');
        const drip = setInterval(() => socket.write('x-slow: 1\r\n'), 50);
        socket.on('close', () => clearInterval(drip));
      });
    });
    const result = await postOnce(`http://127.0.0.1:${server.port}/`, HEADERS, BODY, { timeoutMs: 400, allowPrivate: true });
    expect(result).toMatchObject({ outcome: 'failed', httpStatus: null, error: 'timeout' });
    expect(result.durationMs).toBeLessThan(1_100);
  });

  it('a resolver that never answers is bounded by the same limit', async () => {
    const result = await postOnce('http://hangs.example.test/', HEADERS, BODY, { timeoutMs: 200, allowPrivate: true, resolve: () => new Promise(() => {}) });
    expect(result).toMatchObject({ outcome: 'failed', httpStatus: null, error: 'timeout' });
    expect(result.durationMs).toBeLessThan(900);
  });

  it('a server that closes the connection without answering fails, with no status', async () => {
    const server = await tcpServer((socket) => socket.once('data', () => socket.destroy()));
    const result = await postOnce(`http://127.0.0.1:${server.port}/`, HEADERS, BODY, LOCAL);
    expect(result).toMatchObject({ outcome: 'failed', httpStatus: null, error: 'connection closed' });
    expect(server.connections).toBe(1);
  });

  it('a server that answers garbage fails as an invalid response', async () => {
    const server = await tcpServer((socket) => socket.once('data', () => socket.end('SMTP ready\r\n\r\n')));
    const result = await postOnce(`http://127.0.0.1:${server.port}/`, HEADERS, BODY, LOCAL);
    expect(result).toMatchObject({ outcome: 'failed', httpStatus: null });
    expect(result.error).toMatch(/invalid HTTP response|connection closed/);
  });

  it('a closed port fails as connection refused', async () => {
    const port = await freePort();
    expect(await postOnce(`http://127.0.0.1:${port}/`, HEADERS, BODY, LOCAL)).toMatchObject({ outcome: 'failed', httpStatus: null, error: 'connection refused' });
  });

  it.each([200, 500])('a %i with a 10 MB body is read only to the bound, and ends fast', async (status) => {
    let allSent!: (finished: boolean) => void;
    const closed = new Promise<boolean>((resolve) => (allSent = resolve));
    const server = await httpServer((_req, res) => {
      res.writeHead(status, { 'content-length': String(10 * 1024 * 1024) });
      res.on('close', () => allSent(res.writableFinished));
      // 10 MB in 64 KiB chunks, each written once the previous ones have drained.
      let left = 160;
      const chunk = Buffer.alloc(64 * 1024, 'a');
      const more = () => {
        while (left > 0 && !res.destroyed) {
          left--;
          if (left === 0) res.end(chunk);
          else if (!res.write(chunk)) return void res.once('drain', more);
        }
      };
      more();
    });
    const result = await postOnce(`http://127.0.0.1:${server.port}/`, HEADERS, BODY, LOCAL);
    expect(result).toMatchObject({ outcome: status === 200 ? 'delivered' : 'failed', httpStatus: status });
    expect(result.durationMs).toBeLessThan(2_000);
    expect(await closed, 'the client went before the 10 MB were all sent').toBe(false);
    expect(MAX_RESPONSE_BYTES).toBe(16 * 1024);
  });

  it('a 200 whose body trickles past the limit is delivered, and the attempt still ends at the limit', async () => {
    const server = await httpServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const drip = setInterval(() => res.write('.'), 50);
      res.on('close', () => clearInterval(drip));
    });
    const result = await postOnce(`http://127.0.0.1:${server.port}/`, HEADERS, BODY, { timeoutMs: 400, allowPrivate: true });
    expect(result).toMatchObject({ outcome: 'delivered', httpStatus: 200, error: null });
    expect(result.durationMs).toBeGreaterThanOrEqual(350);
    expect(result.durationMs).toBeLessThan(1_100);
  });

  it('a name resolving to a loopback address is blocked without allowPrivate, and no connection is made', async () => {
    const server = await tcpServer((socket) => socket.destroy());
    const resolve = tableResolver({ 'hooks.example.test': ['127.0.0.1'] });
    const result = await postOnce(`https://hooks.example.test:${server.port}/`, HEADERS, BODY, { timeoutMs: 2_000, allowPrivate: false, resolve });
    expect(result).toMatchObject({ outcome: 'blocked', httpStatus: null, retryAfterSeconds: null });
    expect(result.error).toMatch(/resolves to 127\.0\.0\.1, a loopback address/);
    expect(resolve.calls).toEqual(['hooks.example.test']);
    await new Promise((r) => setTimeout(r, 50));
    expect(server.connections).toBe(0);
  });

  it('a name with one private address among public ones is blocked', async () => {
    const resolve = tableResolver({ 'hooks.example.test': ['93.184.215.14', '192.168.0.10'] });
    const result = await postOnce('https://hooks.example.test/', HEADERS, BODY, { timeoutMs: 2_000, allowPrivate: false, resolve });
    expect(result).toMatchObject({ outcome: 'blocked', httpStatus: null });
    expect(result.error).toMatch(/192\.168\.0\.10/);
  });

  it.each([
    ['http: without allowPrivate', (port: number) => `http://example.com:${port}/`, /https:/],
    ['an https: loopback literal', (port: number) => `https://127.0.0.1:${port}/`, /127\.0\.0\.1 is a loopback address/],
    ['a decimal loopback literal', () => 'https://2130706433/', /127\.0\.0\.1 is a loopback address/],
    ['an IPv4-mapped literal', (port: number) => `https://[::ffff:127.0.0.1]:${port}/`, /IPv4-mapped/],
    ['user info', (port: number) => `https://u:p@example.com:${port}/`, /user name or password/],
  ])('blocks %s without resolving or connecting', async (_name, url, detail) => {
    const server = await tcpServer((socket) => socket.destroy());
    const result = await postOnce(url(server.port), HEADERS, BODY, { timeoutMs: 2_000, allowPrivate: false, resolve: refusingResolver });
    expect(result).toMatchObject({ outcome: 'blocked', httpStatus: null });
    expect(result.error).toMatch(detail);
    expect(server.connections).toBe(0);
  });

  it('a name that does not resolve is blocked', async () => {
    const result = await postOnce('https://nowhere.example.test/', HEADERS, BODY, { timeoutMs: 2_000, allowPrivate: false, resolve: tableResolver({}) });
    expect(result).toMatchObject({ outcome: 'blocked', httpStatus: null, error: expect.stringMatching(/ENOTFOUND/) });
  });

  it('connects to the checked address while keeping the host name: resolved once, Host is the URL host', async () => {
    const server = await httpServer((_req, res) => res.writeHead(200).end());
    // A second answer would point elsewhere (rebinding); it must never be asked for.
    let answers = 0;
    const resolve: Resolve = async (hostname) => {
      answers++;
      if (hostname !== 'hooks.example.test') throw Object.assign(new Error('unknown'), { code: 'ENOTFOUND' });
      return answers === 1 ? [{ address: '127.0.0.1', family: 4 }] : [{ address: '192.0.2.1', family: 4 }];
    };
    const result = await postOnce(`http://hooks.example.test:${server.port}/in`, { ...HEADERS, Host: 'evil.example.com' }, BODY, { timeoutMs: 3_000, allowPrivate: true, resolve });
    expect(result).toMatchObject({ outcome: 'delivered', httpStatus: 200 });
    expect(answers).toBe(1);
    expect(server.seen).toHaveLength(1);
    expect(server.seen[0]!.headers.host).toBe(`hooks.example.test:${server.port}`);
    expect(server.seen[0]!.url).toBe('/in');
  });

  it('over https: connects to the checked address and fails the TLS handshake against a plain HTTP server', async () => {
    const server = await httpServer((_req, res) => res.writeHead(200).end());
    const resolve = tableResolver({ 'hooks.example.test': ['127.0.0.1'] });
    const result = await postOnce(`https://hooks.example.test:${server.port}/`, HEADERS, BODY, { timeoutMs: 3_000, allowPrivate: true, resolve });
    expect(result).toMatchObject({ outcome: 'failed', httpStatus: null, error: expect.stringMatching(/^TLS error/) });
    expect(server.connections).toBe(1);
    expect(server.seen).toHaveLength(0);
  });

  it('a caller abort ends the attempt as failed, aborted', async () => {
    const server = await tcpServer(() => {});
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const result = await postOnce(`http://127.0.0.1:${server.port}/`, HEADERS, BODY, { timeoutMs: 5_000, allowPrivate: true, signal: controller.signal });
    expect(result).toMatchObject({ outcome: 'failed', httpStatus: null, error: 'aborted' });
    expect(result.durationMs).toBeLessThan(2_000);
    const before = await postOnce(`http://127.0.0.1:${server.port}/`, HEADERS, BODY, { timeoutMs: 5_000, allowPrivate: true, signal: AbortSignal.abort() });
    expect(before).toMatchObject({ outcome: 'failed', error: 'aborted' });
  });

  it('never throws: a header value Node refuses is a failed attempt', async () => {
    const server = await httpServer((_req, res) => res.writeHead(200).end());
    const result = await postOnce(`http://127.0.0.1:${server.port}/`, { 'x-bad': 'a\r\nb' }, BODY, LOCAL);
    expect(result).toMatchObject({ outcome: 'failed', httpStatus: null });
    expect(result.error).toBeTruthy();
    expect(server.seen).toHaveLength(0);
  });
});
