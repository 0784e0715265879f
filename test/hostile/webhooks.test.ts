/**
 * Hostile webhook requests (API-CONTRACT.md §1, §2, §14) on both doors: POST
 * /api/users/me/webhooks, PATCH /api/webhooks/:id and POST /api/webhooks/:id/replay, and
 * their procedures webhooks.create, webhooks.update and webhooks.replay (the typed client
 * with values only superjson carries, and raw HTTP with `{"json": …}` written by hand).
 *
 * Properties (fast-check):
 *   - random JSON at every level of the three bodies: the whole body, the wrapper, each member
 *     and the members' insides; wrong types, huge and odd numbers written raw, `__proto__`
 *     and other prototype keys, keys that come twice in the JSON text (the last one counts),
 *     NUL, lone surrogates, odd unicode, very long strings, nesting just under, at and over
 *     the 64-level limit and 1,000 levels deep;
 *   - random URL-ish strings: schemes, slashes and backslashes, user info, IPv4 addresses
 *     written in decimal, octal, hex and short forms, IPv6 forms (IPv4-mapped and
 *     -compatible, zones, no brackets), ports, percent-encoding, whitespace and control
 *     characters, names resolving to public and private addresses or to none.
 * Every answer must be a 2xx or a 4xx in the error envelope (never a 5xx, never a hang); a body
 * nested over 64 levels is 400 invalid_json; a webhook is created or its URL changed only for
 * an `https:` URL without user info whose host is public (a name under example.com or a
 * public IP literal, as the URL parser reads it); a clean request the contract allows lands;
 * a refusal changes no row (webhooks, users, events); the rows created are exactly the
 * creations answered with success. The harness is test/helpers/hostile.ts.
 */
import net from 'node:net';
import fc from 'fast-check';
import superjson from 'superjson';
import { beforeAll, describe, expect, it } from 'vitest';
import { EVENT_PATTERNS } from '../../src/webhooks/webhook.schema.js';
import {
  anyCodePoint,
  describeAfterTheRun,
  describeValue,
  errorCode,
  expectContract,
  hasProtoKey,
  hostileValue,
  isPlain,
  isRecord,
  judgeRest,
  judgeTrpcClient,
  keyArb,
  longString,
  newVictim,
  other,
  type Outcome,
  own,
  PROPERTY_TIMEOUT,
  RUNS,
  short,
  superjsonOnly,
  toJs,
  toJsonText,
  trpcError,
  trpcRaw,
  useHostileApp,
  type Victim,
  withDeadline,
} from '../helpers/hostile.js';
import type { ApiResponse } from '../helpers/test-app.js';

const app = useHostileApp();

/** The other user's webhook, made first: hostile requests aimed at its id must never move it. */
let othersWebhook: { id: number; rows: unknown };
beforeAll(async () => {
  const res = await app.request('POST', '/api/users/me/webhooks', { token: other().token, body: { webhook: { url: 'https://other.example.com/' } } });
  expect(res.status, res.text).toBe(201);
  othersWebhook = { id: res.body.data.id, rows: await app.orm.em.fork().execute('select * from webhooks where user_id = ? order by id', [other().id]) };
});

const HOOKS = '/api/users/me/webhooks';
const MAX_DEPTH = 64;
const EVENT_ID = /^(0|[1-9][0-9]{0,17})$/;

type Door = 'rest' | 'trpc';
type Procedure = 'create' | 'update' | 'replay';

// ---------------------------------------------------------------------------------------------
// What the contract lets through: the oracle, written from the URL parser and the test resolver
// ---------------------------------------------------------------------------------------------

const PUBLIC_V4 = ['93.184.215.14', '8.8.8.8', '1.1.1.1', '11.0.0.1', '100.128.0.1', '172.32.0.1', '192.0.1.1', '198.20.0.1', '126.0.0.1', '223.255.255.254'];
const PRIVATE_V4 = [
  '127.0.0.1', '127.1.2.3', '10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.64.0.1',
  '100.127.255.255', '0.0.0.0', '0.1.2.3', '224.0.0.1', '239.255.255.250', '240.0.0.1', '255.255.255.255', '192.0.2.1', '198.51.100.7',
  '203.0.113.9', '198.18.0.1', '192.0.0.8', '192.88.99.1',
];
const PUBLIC_V6 = ['2606:4700:4700::1111', '2001:4860:4860::8888', '2a00:1450:4001:82b::200e', '2400:cb00::1', '2606:4700:4700:0:0:0:0:1111'];
const PRIVATE_V6 = [
  '::1', '::', '0:0:0:0:0:0:0:1', 'fd00::1', 'fc00::1', 'fe80::1', 'fec0::1', 'ff02::1', '::ffff:127.0.0.1', '::ffff:8.8.8.8', '::ffff:7f00:1',
  '0000:0000:0000:0000:0000:ffff:7f00:0001', '::127.0.0.1', '::8.8.8.8', '64:ff9b::8.8.8.8', '64:ff9b:1::1', '2001:db8::1', '2002:c0a8:101::1',
  '100::1', '2001::1', '2001:2::1', '3fff::1', '4000::1', '::ffff:93.184.215.14',
];
const PUBLIC_NAMES = ['hooks.example.com', 'example.com', 'A.B.Example.COM', 'hooks.example.com.', 'private.test.example.com', '127.0.0.1.example.com', 'xn--bcher-kva.example.com'];
const PRIVATE_NAMES = ['loopback.private.test', 'metadata.private.test', 'ten.private.test', 'v6.private.test', 'mixed.private.test', 'LOOPBACK.PRIVATE.TEST.'];
const UNKNOWN_NAMES = ['localhost', 'nowhere.invalid', 'example.com.private.test', 'example.comx', 'hooks.example.com..', 'internal'];

/** IPv6 literals as the URL parser writes them (compressed, lower case, in brackets). */
const canonicalV6 = (address: string) => new URL(`https://[${address}]/`).hostname;
/** The literals known to be public: the only ones a plain URL must be accepted with. */
const PUBLIC_HOSTS = new Set([...PUBLIC_V4, ...PUBLIC_V6.map(canonicalV6)]);

/** The ranges §14 names as not public: loopback, private, link-local, CGNAT, multicast, unspecified, unique-local, IPv4-mapped (and broadcast). */
const NOT_PUBLIC_V4 = new net.BlockList();
for (const [network, prefix] of [['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12], ['192.168.0.0', 16], ['224.0.0.0', 4], ['255.255.255.255', 32]] as const) {
  NOT_PUBLIC_V4.addSubnet(network, prefix, 'ipv4');
}
// A list of its own: a BlockList holding ::ffff:0:0/96 matches every IPv4 address checked against it.
const NOT_PUBLIC_V6 = new net.BlockList();
for (const [network, prefix] of [['::', 128], ['::1', 128], ['::ffff:0:0', 96], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8]] as const) {
  NOT_PUBLIC_V6.addSubnet(network, prefix, 'ipv6');
}

const isIpv4Host = (hostname: string) => /^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$/.test(hostname);
const isNamePublic = (hostname: string) => {
  const name = hostname.toLowerCase().replace(/\.$/, '');
  return name === 'example.com' || name.endsWith('.example.com');
};

/** Whether a host, as the URL parser gives it, may be taken: a name the test resolver makes public, or a literal outside §14's ranges. */
function mayBePublicHost(hostname: string): boolean {
  if (hostname.startsWith('[')) return !NOT_PUBLIC_V6.check(hostname.slice(1, -1), 'ipv6');
  if (isIpv4Host(hostname)) return !NOT_PUBLIC_V4.check(hostname, 'ipv4');
  return isNamePublic(hostname);
}

/** Whether a host is surely public: a name the test resolver makes public, or one of the public literals above. */
function surelyPublicHost(hostname: string): boolean {
  if (hostname.startsWith('[') || isIpv4Host(hostname)) return PUBLIC_HOSTS.has(hostname);
  return isNamePublic(hostname);
}

/**
 * A URL the service may take (§14): at most 2,048 code points of well-formed text without NUL
 * or backslash, an absolute `https:` URL without user name or password, whose host is public.
 * It is kept as its serialization (`href`).
 */
function parsedUrl(raw: unknown): URL | undefined {
  if (typeof raw !== 'string' || raw.includes('\u0000') || raw.includes('\\') || !raw.isWellFormed() || [...raw].length > 2_048) return undefined;
  // Only `https://host…` names the host to every common parser (API-CONTRACT.md §14; tabs and newlines dropped first).
  if (!/^https:\/\/[^/]/i.test(raw.replace(/[\t\n\r]/g, ''))) return undefined;
  try {
    const url = new URL(raw);
    return url.protocol === 'https:' && url.username === '' && url.password === '' ? url : undefined;
  } catch {
    return undefined;
  }
}

function mayBeAccepted(raw: unknown): boolean {
  const url = parsedUrl(raw);
  return url !== undefined && mayBePublicHost(url.hostname);
}

/** A URL the service must take: a surely public one written plainly (no whitespace, control characters, backslash, `@` or `%`), of at most 2,048 UTF-16 units. */
function mustBeAccepted(raw: unknown): boolean {
  const url = parsedUrl(raw);
  return url !== undefined && surelyPublicHost(url.hostname) && typeof raw === 'string' && raw.length <= 2_048
    && !/[\s\u0000-\u001f\u007f-\u00a0\\@%\u2028\u2029\ufeff]/.test(raw);
}

const codePoints = (s: string) => [...s].length;
const wellFormedText = (v: unknown, max: number): v is string => typeof v === 'string' && !v.includes('\u0000') && v.isWellFormed() && codePoints(v) <= max;
const validEvents = (v: unknown): v is string[] =>
  Array.isArray(v) && v.length >= 1 && v.length <= EVENT_PATTERNS.length && v.every((p) => (EVENT_PATTERNS as readonly unknown[]).includes(p));
/** A member the service reads as given (superjson carries `undefined` members, which count as absent). */
const has = (o: Record<string, unknown>, key: string) => Object.hasOwn(o, key) && o[key] !== undefined;

// ---------------------------------------------------------------------------------------------
// Bodies whose JSON text may hold a key twice
// ---------------------------------------------------------------------------------------------

/** An object written member by member, in order: a key may come twice, as JSON text allows. */
class Members {
  constructor(readonly list: Array<[string, unknown]>) {}
}

/** The JSON text of a body: Members as written, anything else by the harness (raw tokens kept). */
function textOf(value: unknown): string {
  if (value instanceof Members) return `{${value.list.map(([k, v]) => `${JSON.stringify(k)}:${textOf(v)}`).join(',')}}`;
  return toJsonText(value);
}

/** The value a body stands for in JavaScript: of a key written twice, the last one (as JSON.parse reads it). */
function valueOf(value: unknown): unknown {
  if (value instanceof Members) return own(value.list.map(([k, v]) => [k, valueOf(v)] as [string, unknown]));
  return value;
}

function hasDuplicateKeys(value: unknown): boolean {
  if (!(value instanceof Members)) return false;
  const keys = value.list.map(([k]) => k);
  return new Set(keys).size !== keys.length || value.list.some(([, v]) => hasDuplicateKeys(v));
}

/** How deep JSON text nests (a scalar is 0, `[]` is 1), read from the text: a member written twice counts too. */
function depthOf(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '[' || c === '{') deepest = Math.max(deepest, ++depth);
    else if (c === ']' || c === '}') depth--;
  }
  return deepest;
}

/** What the typed client sends of a value (superjson's JSON text), and what the service reads of it. */
function throughSuperjson(value: unknown): { text: string; seen: unknown } | undefined {
  try {
    const text = JSON.stringify(superjson.serialize(toJs(value) as any));
    return { text, seen: superjson.deserialize(JSON.parse(text)) };
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Sending through a door
// ---------------------------------------------------------------------------------------------

const PATHS: Record<Procedure, { method: string; path: (id: number) => string }> = {
  create: { method: 'POST', path: () => HOOKS },
  update: { method: 'PATCH', path: (id) => `/api/webhooks/${id}` },
  replay: { method: 'POST', path: (id) => `/api/webhooks/${id}/replay` },
};

/**
 * Judges a REST answer; a 202 (replay) is a success with `data`, as 200 and 201 are, and a 410
 * cursor_expired carries a top-level `meta` beside `errors` (§10, the one exception of §2).
 */
function judge(request: string, res: ApiResponse): Outcome {
  if (res.status === 410 && isPlain(res.body) && 'meta' in res.body) {
    const { meta, ...envelope } = res.body;
    const outcome = judgeRest(request, { ...res, body: envelope });
    if (!isPlain(meta) || Object.keys(meta).join() !== 'last_event_id' || typeof meta.last_event_id !== 'string') outcome.problems.push(`410 meta ${JSON.stringify(meta)}`);
    if (errorCode(outcome) !== 'cursor_expired') outcome.problems.push('a 410 with meta that is not cursor_expired');
    return { ...outcome, body: res.body };
  }
  if (res.status !== 202) return judgeRest(request, res);
  const problems = isRecord(res.body) && isRecord(res.body.data) ? [] : ['202 without data'];
  if (!String(res.headers.get('content-type')).startsWith('application/json')) problems.push(`content-type ${res.headers.get('content-type')}`);
  return { request, status: 202, problems, response: `202 ${short(res.text)}`, body: res.body };
}

/** A call of the typed client, judged by the harness; a refusal keeps its errors as `body.errors`. */
async function typed(procedure: Procedure, token: string, value: unknown): Promise<Outcome> {
  const client = app.trpc(token).webhooks as any;
  let data: any;
  const outcome = await withDeadline(
    `tRPC client webhooks.${procedure}`,
    judgeTrpcClient(`tRPC client webhooks.${procedure}(${describeValue(value)})`, () =>
      client[procedure].mutate(toJs(value)).catch((error: any) => {
        data = error?.data;
        throw error;
      })),
  );
  return { ...outcome, body: data === undefined ? undefined : { errors: data.errors } };
}

interface Sent {
  outcome: Outcome;
  /** The input as the procedure reads it (REST: the body's members and the path id); undefined when unknown. */
  seen: Record<string, unknown> | undefined;
  /** How deep the JSON text nests as the door reads it; undefined when the typed client could not say. */
  depth?: number;
}

const asInput = (v: unknown): Record<string, unknown> => (isPlain(v) ? v : {});

/**
 * The wrapper as the service reads it: a plain object; undefined when it is anything else (also
 * a Date, Map, Set or RegExp the typed client sends, which is no object: parameter_missing).
 */
const wrapperOf = (seen: Record<string, unknown> | undefined, name: string): Record<string, unknown> | undefined => {
  const value = seen?.[name];
  return isPlain(value) ? value : undefined;
};

/** Sends a body through a door: REST as JSON text, tRPC raw or through the typed client. */
async function send(door: Door, viaRaw: boolean, procedure: Procedure, token: string, body: unknown, id: number): Promise<Sent> {
  if (door === 'rest') {
    const text = textOf(body);
    const { method, path } = PATHS[procedure];
    const request = `${method} ${path(id)} body=${short(text)}`;
    const res = await withDeadline(request, app.request(method, path(id), { token, rawBody: text, headers: { 'Content-Type': 'application/json' } }));
    const parsed = JSON.parse(text);
    const seen = procedure === 'create' ? asInput(parsed) : { ...(isRecord(parsed) && !Array.isArray(parsed) ? parsed : {}), id };
    return { outcome: judge(request, res), seen, depth: depthOf(text) };
  }
  const input = procedure !== 'create' && body instanceof Members ? new Members([['id', id], ...body.list]) : body;
  if (viaRaw || hasDuplicateKeys(input) || hasProtoKey(valueOf(input))) {
    const text = `{"json":${textOf(input)}}`;
    const outcome = await trpcRaw(`webhooks.${procedure}`, 'mutation', token, text);
    // The limit counts the input, not superjson's {"json": …} around it.
    return { outcome, seen: asInput(JSON.parse(text).json), depth: depthOf(text) - 1 };
  }
  const value = valueOf(input);
  const outcome = await typed(procedure, token, value);
  const read = throughSuperjson(value);
  return { outcome, seen: read ? asInput(read.seen) : undefined, depth: read ? depthOf(read.text) - 1 : undefined };
}

// ---------------------------------------------------------------------------------------------
// Rows: what a refusal must leave as it was
// ---------------------------------------------------------------------------------------------

const sql = <T = any>(text: string, params: unknown[] = []) => app.orm.em.fork().execute<T[]>(text, params);

async function digest(): Promise<Record<string, unknown>> {
  const [row] = await sql(`select
    (select count(*) from webhooks)::int as webhooks,
    (select md5(coalesce(string_agg(w::text, '|' order by w.user_id, w.id), '')) from webhooks w) as webhooks_digest,
    (select md5(coalesce(string_agg(u::text, '|' order by u.id), '')) from users u) as users_digest,
    (select count(*) from events)::int as events,
    (select count(*) from webhook_deliveries)::int as deliveries`);
  return row!;
}

interface WebhookRow {
  id: number;
  url: string;
  events: string[];
  description: string;
  state: string;
  cursor: string;
}

async function webhookRows(userId: number): Promise<WebhookRow[]> {
  return sql<WebhookRow>('select id, url, events, description, state, cursor::text as cursor from webhooks where user_id = ? order by id', [userId]);
}

/** Users that create webhooks, a new one whenever the last has 10 (the limit is not what these properties test). */
class Creators {
  readonly users: Victim[] = [];
  successes = 0;
  async current(): Promise<Victim> {
    const last = this.users.at(-1);
    if (last && (await webhookRows(last.id)).length < 10) return last;
    const fresh = await newVictim('creator');
    this.users.push(fresh);
    return fresh;
  }
  /** Every creation answered with success made one row, and no other row was made. */
  async expectRowsMatch(): Promise<void> {
    let rows = 0;
    for (const user of this.users) rows += (await webhookRows(user.id)).length;
    expect(rows).toBe(this.successes);
  }
}

/**
 * Sends one request and holds it to the contract: a 2xx or a 4xx envelope in time; a body
 * nested over 64 levels is invalid_json; a refusal changes no row; `check` then judges what
 * was accepted or refused against what the service read.
 */
async function hostileRequest(
  door: Door,
  viaRaw: boolean,
  procedure: Procedure,
  token: string,
  body: unknown,
  id: number,
  check: (accepted: boolean, sent: Sent, what: string) => Promise<void>,
): Promise<void> {
  const before = await digest();
  const sent = await send(door, viaRaw, procedure, token, body, id);
  const { outcome } = sent;
  expectContract(outcome);
  const what = `${door}${door === 'trpc' ? (outcome.request.startsWith('tRPC client') ? ' (typed)' : ' (raw)') : ''} ${outcome.request}\n  -> ${outcome.response}`;
  const accepted = outcome.status >= 200 && outcome.status < 300;
  if (sent.depth !== undefined && outcome.status !== 413) {
    expect(errorCode(outcome) === 'invalid_json', `depth ${sent.depth}: ${what}`).toBe(sent.depth > MAX_DEPTH);
  }
  if (!accepted) expect(await digest(), `a refusal changed rows: ${what}`).toEqual(before);
  await check(accepted, sent, what);
}

// ---------------------------------------------------------------------------------------------
// Arbitraries
// ---------------------------------------------------------------------------------------------

const ipv4Parts = (address: string) => address.split('.').map(Number) as [number, number, number, number];
const ipv4Number = (address: string) => ipv4Parts(address).reduce((n, part) => n * 256 + part, 0);

/** An IPv4 address written in one of the forms the URL parser reads (and some it refuses). */
const ipv4Form = (address: string) => {
  const [a, b, c, d] = ipv4Parts(address);
  const n = ipv4Number(address);
  return fc.constantFrom(
    address,
    `${address}.`,
    String(n),
    `0x${n.toString(16)}`,
    `0X${n.toString(16).toUpperCase()}`,
    `0${n.toString(8)}`,
    [a, b, c, d].map((p) => `0${p.toString(8)}`).join('.'),
    [a, b, c, d].map((p) => `0x${p.toString(16)}`).join('.'),
    `${a}.${b}.${c * 256 + d}`,
    `${a}.${b * 65_536 + c * 256 + d}`,
    `0x${a.toString(16)}.${b}.0${c.toString(8)}.${d}`,
    String(n + 2 ** 32),
    `${a}.${b}.${c}.${d + 256}`,
    `${a + 256}.${b}.${c}.${d}`,
  );
};

/** An IPv6 address in brackets, in upper case, with a zone, without brackets, half closed. */
const ipv6Form = (address: string) =>
  fc.constantFrom(`[${address}]`, `[${address.toUpperCase()}]`, `[${address}%25eth0]`, `[${address}%eth0]`, address, `[${address}`, `[[${address}]]`);

/** Some of a host's characters written as %XX. */
const percentEncoded = (host: string) =>
  fc.array(fc.boolean(), { minLength: host.length, maxLength: host.length }).map((which) =>
    [...host].map((c, i) => (which[i] && c.charCodeAt(0) < 128 ? `%${c.charCodeAt(0).toString(16).padStart(2, '0').toUpperCase()}` : c)).join(''));

const hostArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...PUBLIC_NAMES) },
  { weight: 2, arbitrary: fc.constantFrom(...PRIVATE_NAMES) },
  { weight: 1, arbitrary: fc.constantFrom(...UNKNOWN_NAMES) },
  { weight: 3, arbitrary: fc.constantFrom(...PUBLIC_V4, ...PRIVATE_V4).chain(ipv4Form) },
  { weight: 2, arbitrary: fc.constantFrom(...PUBLIC_V6, ...PRIVATE_V6).chain(ipv6Form) },
  { weight: 1, arbitrary: fc.constantFrom(...PUBLIC_NAMES, ...PRIVATE_NAMES, ...PUBLIC_V4, ...PRIVATE_V4).chain(percentEncoded) },
  { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom('a', '1', '.', '-', '[', ']', ':', '%', '0', 'x', '\u00ad', 'ß', 'Ｅ', '。'), maxLength: 12 }) },
);

/** The usual value of a part most of the time, else one of the odd ones. */
const mostly = (usual: string, ...odd: string[]) => fc.oneof({ weight: 3, arbitrary: fc.constant(usual) }, { weight: 1, arbitrary: fc.constantFrom(...odd) });

const urlParts = fc.record({
  lead: mostly('', ' ', '\t', '\n', '\u0000', '\u00a0', '\ufeff'),
  scheme: mostly('https:', 'HTTPS:', 'HtTpS:', 'http:', 'ftp:', 'wss:', 'file:', 'javascript:', 'data:', '', 'https;', 'hxxps:', 'https :'),
  slashes: mostly('//', '/', '///', '\\\\', '/\\', '', '\\/'),
  userinfo: mostly('', 'u@', 'u:p@', ':@', '@', 'hooks.example.com@', '127.0.0.1@', '%40@', 'u%3Ap@', 'user:pa ss@', 'a@b@'),
  host: hostArb,
  port: mostly('', ':443', ':8443', ':0', ':65535', ':65536', ':', ':-1', ':abc', ':0443', ':4\u0000'),
  rest: mostly('/', '', '/hook', '/a?b=c#d', '/@loopback.private.test', '?@127.0.0.1', '#@10.0.0.1', '\\path', '/%2F%2F127.0.0.1', '/ü/😀', `/${'x'.repeat(2_030)}`),
  trail: mostly('', ' ', '\t', '\r\n', '\u0000'),
});

/** Characters dropped into a URL at a random place. */
const STRAY = [' ', '\t', '\n', '\r', '\\', '%', '%2', '@', '#', '?', '/', ':', '[', ']', '.', '\u0000', '\ud800', '\udc00', '😀', '\u200b', '\u3002'];

const urlArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 8, arbitrary: urlParts.map((p) => p.lead + p.scheme + p.slashes + p.userinfo + p.host + p.port + p.rest + p.trail) },
  {
    weight: 3,
    arbitrary: fc.tuple(urlParts, fc.nat(), fc.constantFrom(...STRAY)).map(([p, at, stray]) => {
      const url = p.lead + p.scheme + p.slashes + p.userinfo + p.host + p.port + p.rest + p.trail;
      const i = at % (url.length + 1);
      return url.slice(0, i) + stray + url.slice(i);
    }),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 40 }) },
);

/** `n` arrays or objects around a value: depth n plus the value's own. */
function nested(n: number, kind: 'array' | 'object', inner: unknown): unknown {
  let v = inner;
  for (let i = 0; i < n; i++) v = kind === 'array' ? [v] : { a: v };
  return v;
}

/**
 * Nesting just under, at and over the limit (the member's own level decides where the body
 * crosses it), and far over. Far over is 300 levels: the test's own walks of a value (superjson
 * on the typed client's side, fast-check printing a counterexample) recurse per level, and at
 * 1,000 levels they ran out of stack in a worker that had run other files before.
 */
const nestedArb = (inner: fc.Arbitrary<unknown>) =>
  fc.tuple(fc.oneof(fc.integer({ min: 58, max: 66 }), fc.constant(300)), fc.constantFrom('array', 'object') as fc.Arbitrary<'array' | 'object'>, inner).map(([n, kind, v]) => nested(n, kind, v));

const ABSENT = Symbol('absent');

/** A member: absent, plausible, hostile, nested around a plausible value, or a value only superjson carries. */
const memberArb = (plausible: fc.Arbitrary<unknown>) =>
  fc.oneof(
    { weight: 2, arbitrary: fc.constant<unknown>(ABSENT) },
    { weight: 5, arbitrary: plausible },
    { weight: 4, arbitrary: hostileValue },
    { weight: 1, arbitrary: nestedArb(plausible) },
    { weight: 1, arbitrary: superjsonOnly },
  );

const PLAUSIBLE_URLS = ['https://hooks.example.com/in', 'https://93.184.215.14/', 'https://[2606:4700:4700::1111]/', 'https://loopback.private.test/', 'https://10.0.0.1/', 'http://hooks.example.com/'];
const plausibleUrl = fc.oneof(fc.constantFrom(...PLAUSIBLE_URLS), urlArb);
const plausibleEvents = fc.oneof(
  fc.subarray([...EVENT_PATTERNS], { minLength: 1 }),
  fc.array(fc.constantFrom(...EVENT_PATTERNS, 'task.deleted', '*.*', 'TASK.*', 'webhook.test', ''), { minLength: 0, maxLength: 10 }),
);
const plausibleDescription = fc.oneof(fc.string({ maxLength: 20 }), fc.string({ unit: anyCodePoint, maxLength: 20 }), longString);
const plausibleAfter = fc.oneof(
  fc.constantFrom('0', '1', '2', '3', '4', '5', '6', '7', '8', '99', '01', '-1', '', ' 1', '1.0', '1e1', '0x1', '999999999999999999', '9999999999999999999'),
  fc.nat().map(String),
  fc.bigInt({ min: 0n, max: 10n ** 20n }).map(String),
);

/** The members of a wrapper: each field absent or given, extra members, and some written twice. */
function wrapperArb(fields: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<Members> {
  const names = Object.keys(fields);
  return fc
    .tuple(
      fc.tuple(...names.map((name) => memberArb(fields[name]!))),
      fc.array(fc.tuple(keyArb, hostileValue), { maxLength: 2 }),
      fc.array(fc.tuple(fc.constantFrom(...names), fc.integer({ min: 0, max: names.length - 1 })), { maxLength: 2 }),
      fc.boolean(),
    )
    .chain(([values, extras, twice, extrasFirst]) =>
      fc.tuple(...twice.map(([name]) => memberArb(fields[name]!))).map((again) => {
        const given = names.map((name, i) => [name, values[i]] as [string, unknown]).filter(([, v]) => v !== ABSENT);
        const dups = twice.map(([name], i) => [name, again[i]] as [string, unknown]).filter(([, v]) => v !== ABSENT);
        const list = extrasFirst ? [...extras, ...given, ...dups] : [...given, ...extras, ...dups];
        return new Members(list as Array<[string, unknown]>);
      }),
    );
}

/** A body: mostly the wrapper with hostile members (and extra or repeated members beside it), sometimes anything at all. */
function bodyArb(wrapper: string, fields: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<unknown> {
  const inner = wrapperArb(fields);
  return fc.oneof(
    { weight: 6, arbitrary: fc.tuple(inner, fc.array(fc.tuple(keyArb, hostileValue), { maxLength: 1 })).map(([w, extras]) => new Members([[wrapper, w], ...extras])) },
    { weight: 1, arbitrary: fc.tuple(inner, inner).map(([a, b]) => new Members([[wrapper, a], [wrapper, b]])) },
    { weight: 1, arbitrary: fc.oneof(hostileValue, nestedArb(inner.map(valueOf))).map((v) => new Members([[wrapper, v]])) },
    { weight: 1, arbitrary: hostileValue },
    { weight: 1, arbitrary: nestedArb(fc.constant(1)) },
  );
}

const viaRawArb = fc.boolean();

// ---------------------------------------------------------------------------------------------
// The properties
// ---------------------------------------------------------------------------------------------

const DOORS: Door[] = ['rest', 'trpc'];

/** Whether a create's members are all ones the contract takes: then it must land. */
function cleanCreate(webhook: Record<string, unknown>): boolean {
  return mustBeAccepted(webhook.url)
    && (!has(webhook, 'events') || validEvents(webhook.events))
    && (!has(webhook, 'description') || wellFormedText(webhook.description, 1_000));
}

describe.each(DOORS)('webhooks.create with hostile URLs, through %s', (door) => {
  it('creates a webhook only for an https URL without user info whose host is public; a plain one lands; rows equal the successes', async () => {
    const creators = new Creators();
    await fc.assert(
      fc.asyncProperty(urlArb, viaRawArb, async (url, viaRaw) => {
        const creator = await creators.current();
        const before = await webhookRows(creator.id);
        await hostileRequest(door, viaRaw, 'create', creator.token, new Members([['webhook', new Members([['url', url]])]]), 0, async (accepted, _sent, what) => {
          const after = await webhookRows(creator.id);
          if (accepted) {
            creators.successes += 1;
            expect(mayBeAccepted(url), `created for a URL that is not public https: ${JSON.stringify(url)}\n  ${what}`).toBe(true);
            expect(after.length, what).toBe(before.length + 1);
            expect(after.at(-1)!.url, what).toBe(new URL(url).href);
          } else {
            expect(mustBeAccepted(url), `refused a plain public https URL: ${JSON.stringify(url)}\n  ${what}`).toBe(false);
          }
        });
      }),
      { numRuns: RUNS * 2 },
    );
    await creators.expectRowsMatch();
  }, PROPERTY_TIMEOUT);
});

describe.each(DOORS)('webhooks.create with hostile bodies, through %s', (door) => {
  it('answers a 2xx or a 4xx envelope, invalid_json over 64 levels, creates only with a public URL and stores what it read', async () => {
    const creators = new Creators();
    const arb = bodyArb('webhook', { url: plausibleUrl, events: plausibleEvents, description: plausibleDescription });
    await fc.assert(
      fc.asyncProperty(arb, viaRawArb, async (body, viaRaw) => {
        const creator = await creators.current();
        const before = await webhookRows(creator.id);
        await hostileRequest(door, viaRaw, 'create', creator.token, body, 0, async (accepted, { seen, depth }, what) => {
          const after = await webhookRows(creator.id);
          const webhook = wrapperOf(seen, 'webhook');
          if (accepted) {
            creators.successes += 1;
            expect(after.length, what).toBe(before.length + 1);
            if (seen === undefined) return;
            expect(webhook, what).toBeDefined();
            expect(mayBeAccepted(webhook!.url), `created for a URL that is not public https\n  ${what}`).toBe(true);
            const row = after.at(-1)!;
            expect(row.url, what).toBe(new URL(webhook!.url as string).href);
            expect(row.description, what).toBe(has(webhook!, 'description') ? webhook!.description : '');
            const events = has(webhook!, 'events') ? (webhook!.events as string[]) : ['*'];
            expect([...row.events].sort(), what).toEqual([...new Set(events)].sort());
          } else if (webhook && (depth === undefined || depth <= MAX_DEPTH)) {
            expect(cleanCreate(webhook), `refused a create the contract takes\n  ${what}`).toBe(false);
          }
        });
      }),
      { numRuns: RUNS * 2 },
    );
    await creators.expectRowsMatch();
  }, PROPERTY_TIMEOUT);
});

/** A user with one webhook and some events in the log, for update and replay. */
async function targetUser(): Promise<{ victim: Victim; id: number; last: bigint }> {
  const victim = await newVictim('target');
  const res = await app.request('POST', HOOKS, { token: victim.token, body: { webhook: { url: 'https://target.example.com/' } } });
  expect(res.status, res.text).toBe(201);
  const [{ last }] = await sql<{ last: string }>('select last_event_seq::text as last from users where id = ?', [victim.id]) as [{ last: string }];
  expect(BigInt(last)).toBeGreaterThan(0n);
  return { victim, id: res.body.data.id, last: BigInt(last) };
}

describe.each(DOORS)('webhooks.update with hostile bodies, through %s', (door) => {
  it('answers a 2xx or a 4xx envelope; changes the webhook only to a public URL and as read; a clean edit lands', async () => {
    const { victim, id } = await targetUser();
    const arb = bodyArb('webhook', {
      url: plausibleUrl,
      events: plausibleEvents,
      description: plausibleDescription,
      state: fc.constantFrom('enabled', 'disabled', 'paused', 'ENABLED', ''),
    });
    await fc.assert(
      fc.asyncProperty(arb, viaRawArb, async (body, viaRaw) => {
        const [before] = await webhookRows(victim.id);
        await hostileRequest(door, viaRaw, 'update', victim.token, body, id, async (accepted, { seen, depth }, what) => {
          const [after] = await webhookRows(victim.id);
          const webhook = wrapperOf(seen, 'webhook');
          if (accepted) {
            if (seen === undefined) return;
            expect(seen.id, what).toBe(id);
            expect(webhook, what).toBeDefined();
            if (has(webhook!, 'url')) {
              expect(mayBeAccepted(webhook!.url), `moved to a URL that is not public https\n  ${what}`).toBe(true);
              expect(after!.url, what).toBe(new URL(webhook!.url as string).href);
            } else {
              expect(after!.url, what).toBe(before!.url);
            }
            expect(after!.description, what).toBe(has(webhook!, 'description') ? webhook!.description : before!.description);
            expect(after!.state, what).toBe(has(webhook!, 'state') ? webhook!.state : before!.state);
          } else if (seen !== undefined && seen.id === id && webhook && (depth === undefined || depth <= MAX_DEPTH)) {
            const clean = (!has(webhook, 'url') || mustBeAccepted(webhook.url))
              && (!has(webhook, 'events') || validEvents(webhook.events))
              && (!has(webhook, 'description') || wellFormedText(webhook.description, 1_000))
              && (!has(webhook, 'state') || webhook.state === 'enabled' || webhook.state === 'disabled');
            expect(clean, `refused an edit the contract takes\n  ${what}`).toBe(false);
          }
        });
      }),
      { numRuns: RUNS * 2 },
    );
  }, PROPERTY_TIMEOUT);
});

describe.each(DOORS)('webhooks.replay with hostile bodies, through %s', (door) => {
  it('answers a 2xx or a 4xx envelope; replays only from an event id of the log, to that place; beyond the log is 410', async () => {
    const { victim, id, last } = await targetUser();
    const arb = bodyArb('replay', { after: plausibleAfter });
    await fc.assert(
      fc.asyncProperty(arb, viaRawArb, async (body, viaRaw) => {
        const [before] = await webhookRows(victim.id);
        await hostileRequest(door, viaRaw, 'replay', victim.token, body, id, async (accepted, { outcome, seen, depth }, what) => {
          const [after] = await webhookRows(victim.id);
          const replay = wrapperOf(seen, 'replay');
          const given = replay?.after;
          const wellFormed = typeof given === 'string' && EVENT_ID.test(given);
          if (accepted) {
            if (seen === undefined) return;
            expect(seen.id, what).toBe(id);
            expect(wellFormed && BigInt(given) <= last, `replayed from ${JSON.stringify(given)}\n  ${what}`).toBe(true);
            const place = BigInt(before!.cursor) < BigInt(given as string) ? before!.cursor : given;
            expect(after!.cursor, what).toBe(place);
          } else if (seen !== undefined && seen.id === id && wellFormed && (depth === undefined || depth <= MAX_DEPTH)) {
            expect(BigInt(given), `refused a replay from a kept id\n  ${what}`).toBeGreaterThan(last);
            expect(outcome.status, what).toBe(410);
            expect(errorCode(outcome), what).toBe('cursor_expired');
          }
        });
      }),
      { numRuns: RUNS * 2 },
    );
  }, PROPERTY_TIMEOUT);
});

// ---------------------------------------------------------------------------------------------
// Pinned cases
// ---------------------------------------------------------------------------------------------

describe.each(DOORS)('pinned bodies, through %s', (door) => {
  let victim: Victim;
  beforeAll(async () => {
    victim = await newVictim('pinned');
  });

  /** Sends raw JSON text through the door (on /trpc inside `{"json": …}`). */
  async function rawCreate(text: string): Promise<Outcome> {
    if (door === 'trpc') return trpcRaw('webhooks.create', 'mutation', victim.token, `{"json":${text}}`);
    const request = `POST ${HOOKS} body=${short(text)}`;
    return judge(request, await withDeadline(request, app.request('POST', HOOKS, { token: victim.token, rawBody: text, headers: { 'Content-Type': 'application/json' } })));
  }

  const createdUrl = async () => (await webhookRows(victim.id)).at(-1)?.url;

  it('nesting: a body 64 levels deep is read, 65 levels is 400 invalid_json, and nothing is stored', async () => {
    // The input's own levels: the top object and the wrapper (on /trpc, superjson's `json` member is not counted).
    const own = 2;
    const at = (levels: number) => `{"webhook":{"url":"https://deep.example.com/","x":${'['.repeat(levels - own)}${']'.repeat(levels - own)}}}`;
    const before = await digest();
    const deep = await rawCreate(at(MAX_DEPTH + 1));
    expectContract(deep);
    expect(deep.status).toBe(400);
    expect(errorCode(deep)).toBe('invalid_json');
    expect(await digest()).toEqual(before);
    const fits = await rawCreate(at(MAX_DEPTH));
    expectContract(fits);
    expect(fits.status, fits.response).toBe(door === 'rest' ? 201 : 200);
    expect(await createdUrl()).toBe('https://deep.example.com/');
  });

  it('a key written twice: the last one counts, a private URL last is refused, a public one last lands', async () => {
    const before = await digest();
    const refused = await rawCreate('{"webhook":{"url":"https://last.example.com/","url":"https://loopback.private.test/"}}');
    expectContract(refused);
    expect(refused.status).toBe(422);
    expect(await digest()).toEqual(before);
    const wrappers = await rawCreate('{"webhook":{"url":"https://first.example.com/"},"webhook":{"url":"https://10.0.0.1/"}}');
    expect(wrappers.status).toBe(422);
    expect(await digest()).toEqual(before);
    const landed = await rawCreate('{"webhook":{"url":"https://169.254.169.254/","url":"https://last.example.com/"}}');
    expectContract(landed);
    expect(landed.status, landed.response).toBe(door === 'rest' ? 201 : 200);
    expect(await createdUrl()).toBe('https://last.example.com/');
  });

  it('__proto__ carries nothing: a URL or wrapper only under __proto__ is missing, and no prototype changes', async () => {
    const before = await digest();
    for (const [text, pointer] of [
      ['{"webhook":{"__proto__":{"url":"https://proto.example.com/"}}}', '/webhook/url'],
      ['{"__proto__":{"webhook":{"url":"https://proto.example.com/"}}}', '/webhook'],
      ['{"webhook":{"constructor":{"prototype":{"url":"https://proto.example.com/"}}}}', '/webhook/url'],
    ] as const) {
      const outcome = await rawCreate(text);
      expectContract(outcome);
      expect(outcome.status, outcome.response).toBe(422);
      expect(errorCode(outcome)).toBe('parameter_missing');
      const errors = door === 'rest' ? (outcome.body as any).errors : (outcome.body as any).error.json.data.errors;
      expect(errors.map((e: any) => e.source?.pointer)).toEqual([pointer]);
    }
    expect(await digest()).toEqual(before);
    expect(({} as any).url).toBeUndefined();
    expect(({} as any).webhook).toBeUndefined();
  });

  it('odd text in every string member: NUL, lone surrogates, raw escapes, 1,001 code points; a 1,000-emoji description is stored whole', async () => {
    const before = await digest();
    for (const text of [
      '{"webhook":{"url":"https://a.example.com/\\u0000"}}',
      '{"webhook":{"url":"https://a.example.com/\\ud800"}}',
      '{"webhook":{"url":"https://a.example.com/","description":"\\udfff"}}',
      '{"webhook":{"url":"https://a.example.com/","events":["task.*\\u0000"]}}',
      `{"webhook":{"url":"https://a.example.com/","description":"${'é'.repeat(1_001)}"}}`,
      '{"webhook":{"url":"https://a.example.com/","events":[1e400]}}',
      '{"webhook":{"url":123456789012345678901234567890}}',
    ]) {
      const outcome = await rawCreate(text);
      expectContract(outcome);
      expect(outcome.status, outcome.response).toBe(422);
    }
    expect(await digest()).toEqual(before);
    const emoji = await rawCreate(`{"webhook":{"url":"https://emoji.example.com/","description":"${'\\ud83d\\ude00'.repeat(1_000)}"}}`);
    expect(emoji.status, emoji.response).toBe(door === 'rest' ? 201 : 200);
    expect((await webhookRows(victim.id)).at(-1)!.description).toBe('😀'.repeat(1_000));
  });
});

describe('objects of other kinds as the wrapper, through the typed client', () => {
  const OTHER_KINDS = () => [new Date(0), new Map([['url', 'https://map.example.com/'], ['description', 'from a Map']]), new Set(['x']), /x/g];

  it('change nothing: create and replay refuse them, update leaves the webhook as it was', async () => {
    const { victim, id } = await targetUser();
    const client = app.trpc(victim.token).webhooks as any;
    const [before] = await sql('select * from webhooks where user_id = ? and id = ?', [victim.id, id]);
    for (const wrapper of OTHER_KINDS()) {
      const created = await trpcError(client.create.mutate({ webhook: wrapper }));
      expect(created).toMatchObject({ code: 'parameter_missing', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/webhook' } })] });
      const replayed = await trpcError(client.replay.mutate({ id, replay: wrapper }));
      expect(replayed).toMatchObject({ code: 'parameter_missing', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/replay' } })] });
      await client.update.mutate({ id, webhook: wrapper }).catch(() => undefined);
      const [after] = await sql('select * from webhooks where user_id = ? and id = ?', [victim.id, id]);
      expect({ ...after, updated_at: null }).toEqual({ ...before, updated_at: null });
    }
    expect(await webhookRows(victim.id)).toHaveLength(1);
  });

  // §2: a wrapper that is not an object is parameter_missing. superjson carries a Date, Map, Set
  // or RegExp as itself, which zod's object would take as an object with no members.
  it('webhooks.update refuses a Date, Map, Set or RegExp as its webhook: 422 parameter_missing on /webhook', async () => {
    const { victim, id } = await targetUser();
    const client = app.trpc(victim.token).webhooks as any;
    for (const wrapper of OTHER_KINDS()) {
      const failure = await trpcError(client.update.mutate({ id, webhook: wrapper }));
      expect(failure).toMatchObject({ code: 'parameter_missing', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/webhook' } })] });
    }
  });

  it('projects.update and tasks.update refuse them as their wrapper too', async () => {
    const { victim } = await targetUser();
    const api = app.trpc(victim.token) as any;
    const project = await api.projects.create.mutate({ project: { name: `kinds_${Date.now()}` } });
    const task = await api.tasks.create.mutate({ task: { label: 'kinds' } });
    for (const wrapper of OTHER_KINDS()) {
      expect(await trpcError(api.projects.update.mutate({ id: project.data.id, project: wrapper }))).toMatchObject({ code: 'parameter_missing', httpStatus: 422 });
      expect(await trpcError(api.tasks.update.mutate({ id: task.data.id, task: wrapper }))).toMatchObject({ code: 'parameter_missing', httpStatus: 422 });
    }
  });
});

describe('the other user, after the run', () => {
  it('keeps its webhook untouched through hostile updates and replays aimed at its id, on both doors', async () => {
    const { id } = othersWebhook;
    const intruder = await newVictim('intruder');
    for (const door of DOORS) {
      for (const [procedure, body] of [
        ['update', new Members([['webhook', new Members([['url', 'https://taken.example.com/'], ['state', 'disabled']])]])],
        ['replay', new Members([['replay', new Members([['after', '0']])]])],
      ] as const) {
        const { outcome } = await send(door, true, procedure, intruder.token, body, id);
        expectContract(outcome);
        expect(outcome.status, outcome.response).toBe(404);
        expect(errorCode(outcome)).toBe('record_not_found');
      }
    }
    expect(await sql('select * from webhooks where user_id = ? order by id', [other().id])).toEqual(othersWebhook.rows);
  });
});

describeAfterTheRun();
