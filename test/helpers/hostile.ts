/**
 * The harness of the hostile-input tests (test/hostile/*.test.ts), property-based
 * (fast-check), through both doors.
 *
 * For every write endpoint, the list endpoints' query strings and every path id, random and
 * adversarial requests (wrong types, nulls, arrays, huge / negative / fractional / NaN-like
 * numbers, numbers beyond 2^53 written raw in the JSON text, very long strings, emoji, NUL,
 * lone surrogates as \ud800 escapes, prototype-pollution keys, 1000-level nesting) must get:
 *
 *   - a 2xx, or the error envelope of API-CONTRACT.md §2 with a 4xx status (never a 5xx,
 *     never a hang), and
 *   - when rejected, no change at all: a digest of every row of every table a request could
 *     write is the same before and after (the checks written out by hand also compare the
 *     victim's list pages, byte for byte: `snapshot`).
 *
 * The tRPC door is exercised twice over: through the typed client (random JS values, cast
 * to any; superjson carries NaN, -0, Infinity, BigInt, Date, Map, Set, undefined) and with
 * raw HTTP requests to /trpc whose JSON text is written by hand (raw big numbers, __proto__
 * keys, which the typed client refuses to send).
 *
 * Then the limits (100 KiB, name 100, description 10,000, label 1,000 in code points),
 * far pages, huge ids, and SQL / HTML metacharacters stored verbatim.
 *
 * Counterexamples these properties found are pinned as plain tests ("pinned: …", "an
 * oversized request line…"), so that they stay fixed:
 *   - POST /api/users/authorizations with a NUL in the username was a 500 (both doors);
 *   - the tRPC door answered unreadable input (invalid JSON, `null`, bad superjson metadata,
 *     a batch whose input is not an object) with a 500;
 *   - a request line or header above 16 KiB got Node's bare 431, without the envelope;
 *   - the framing property sent query inputs over 16 KiB in the URL, whose 431 came in
 *     REST's envelope, which it took for a tRPC error "without data", reported as a 500; a
 *     tRPC client cannot read that envelope either, and the 431 under /trpc is now a tRPC
 *     error (API-CONTRACT.md §8).
 * HOSTILE_RUNS=<n> runs every property n times (default 60) for a deeper search.
 */
import fc from 'fast-check';
import { TRPCClientError } from '@trpc/client';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_TIMESTAMP } from '../../src/core/fields.js';
import { PROJECT_PAGE_SIZE } from '../../src/projects/project.schema.js';
import { TASK_PAGE_SIZE } from '../../src/tasks/task.schema.js';
import { DAY, T0, seconds, useTestApp, type ApiResponse, type TestApp } from './test-app.js';

/** Runs per property; the whole file stays well under a minute. */
export const RUNS = Number(process.env.HOSTILE_RUNS ?? 60);
/** A response slower than this counts as a hang. */
export const DEADLINE_MS = 10_000;
export const PROPERTY_TIMEOUT = 50_000;
export { MAX_TIMESTAMP };
export const NOW = seconds(T0);
export const JSON_UTF8 = 'application/json; charset=utf-8';

/** The app of the hostile file that called useHostileApp (one per file). */
let app: TestApp;
let otherVictim: Victim | undefined;
const prototypeKeysAtStart = {
  object: Object.getOwnPropertyNames(Object.prototype).sort(),
  array: Object.getOwnPropertyNames(Array.prototype).sort(),
  func: Object.getOwnPropertyNames(Function.prototype).sort(),
};

/**
 * The file's app (useTestApp) and another user, made first, whose ids serve as "foreign"
 * ids; their rows must never move either (checked by describeAfterTheRun).
 */
export function useHostileApp(): TestApp {
  app = useTestApp();
  beforeAll(async () => {
    otherVictim = await newVictim('other');
  });
  return app;
}

/** The other user of useHostileApp. */
export function other(): Victim {
  if (!otherVictim) throw new Error('the other user is only there once the tests run');
  return otherVictim;
}

export interface Victim {
  id: number;
  username: string;
  token: string;
  projectIds: number[];
  taskIds: number[];
}

let victims = 0;
/** A fresh user with a newed and a started project and three tasks (loose, linked, planned). */
export async function newVictim(prefix = 'victim'): Promise<Victim> {
  const user = await app.register(`${prefix}${++victims}_${Math.random().toString(36).slice(2, 8)}`);
  const { token } = user;
  const ok = async (method: string, path: string, body: unknown) => {
    const res = await app.request(method, path, { token, body });
    if (res.status >= 300) throw new Error(`fixture ${method} ${path}: ${res.status} ${res.text}`);
    return res.body;
  };
  const alpha = (await ok('POST', '/api/users/me/projects', { project: { name: 'Alpha' } })).data.id as number;
  const beta = (await ok('POST', '/api/users/me/projects', { project: { name: 'Beta' } })).data.id as number;
  await ok('PUT', `/api/projects/${beta}/state`, { project: { state: 'started', due_at: NOW + 10 * DAY } });
  const loose = (await ok('POST', '/api/users/me/tasks', { task: { label: 'Loose' } })).data.id as number;
  const linked = (await ok('POST', '/api/users/me/tasks', { task: { label: 'Linked', project_id: alpha } })).data.id as number;
  const planned = (await ok('POST', '/api/users/me/tasks', { task: { label: 'Planned', planned_at: NOW + DAY } })).data.id as number;
  return { ...user, projectIds: [alpha, beta], taskIds: [loose, linked, planned] };
}

// ---------------------------------------------------------------------------------------------
// Raw JSON text
// ---------------------------------------------------------------------------------------------

/** A token written verbatim into the JSON text; `js` is what JSON.parse makes of it. */
export class RawJson {
  readonly js: unknown;
  constructor(readonly text: string) {
    this.js = JSON.parse(text);
  }
  toString() {
    return `raw(${this.text})`;
  }
}
export const raw = (text: string) => new RawJson(text);

export const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
export const isPlain = (v: unknown): v is Record<string, unknown> =>
  isRecord(v) && (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null);

/** An object with exactly these own members, `__proto__` included (never a prototype change). */
export function own(entries: Iterable<[string, unknown]>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of entries) {
    Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** The JSON text of a value, raw tokens and bigints written as they are. */
export function toJsonText(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) {
    return `[${Array.from(value, (v) => (v === undefined || typeof v === 'function' || typeof v === 'symbol' ? 'null' : toJsonText(v))).join(',')}]`;
  }
  if (isPlain(value)) {
    const parts: string[] = [];
    for (const key of Object.keys(value)) {
      const v = value[key];
      if (v === undefined || typeof v === 'function' || typeof v === 'symbol') continue;
      parts.push(`${JSON.stringify(key)}:${toJsonText(v)}`);
    }
    return `{${parts.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** The JS value the typed tRPC client sends: raw tokens replaced by what they parse to. */
export function toJs(value: unknown): unknown {
  if (value instanceof RawJson) return value.js;
  if (Array.isArray(value)) return value.map(toJs);
  if (isPlain(value)) return own(Object.keys(value).map((k) => [k, toJs(value[k])]));
  return value;
}

export const PROTO_KEYS = ['__proto__', 'constructor', 'prototype'];
/** superjson (the typed client) refuses to send these keys; such inputs go over raw HTTP. */
export function hasProtoKey(value: unknown, depth = 0): boolean {
  if (depth > 1100) return false;
  if (Array.isArray(value)) return value.some((v) => hasProtoKey(v, depth + 1));
  if (isPlain(value)) return Object.keys(value).some((k) => PROTO_KEYS.includes(k) || hasProtoKey(value[k], depth + 1));
  return false;
}

export function describeValue(value: unknown): string {
  const text = toJsonText(value);
  return text.length > 300 ? `${text.slice(0, 300)}… (${text.length} chars)` : text;
}

// ---------------------------------------------------------------------------------------------
// Arbitraries
// ---------------------------------------------------------------------------------------------

export const deepArray = (() => {
  let v: unknown = 1;
  for (let i = 0; i < 1000; i++) v = [v];
  return v;
})();
export const deepObject = (() => {
  let v: unknown = 'bottom';
  for (let i = 0; i < 1000; i++) v = { a: v };
  return v;
})();

export const SPECIAL_CHARS = [
  '\u0000', '\ud800', '\udbff', '\udc00', '\udfff', '😀', '👨‍👩‍👧', '\u200d', '\ufeff', '\u202e', 'é', 'e\u0301',
  "'", '"', '\\', '%', '_', '$1', '?', '<', '>', '&', ';', '--', '/*', '\n', '\r', '\t', ' ', '\u2028', '\u00a0', '~', '/',
];
/**
 * One code point of all of Unicode but the surrogates, as fast-check's `binary` unit draws
 * them. Not that unit itself: the first string arbitrary made of it maps all 1.1 million code
 * points to their index (over a second of CPU, once per worker process).
 */
export const anyCodePoint = fc.integer({ min: 0, max: 0x10ffff - 0x800 }).map((n) => String.fromCodePoint(n < 0xd800 ? n : n + 0x800));

export const hostileChar = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...SPECIAL_CHARS) },
  { weight: 3, arbitrary: anyCodePoint },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }) },
);

export const INJECTIONS = [
  "'); drop table tasks; --",
  '<script>alert(1)</script>',
  '\\" OR 1=1 --',
  "' OR '1'='1",
  '1; select pg_sleep(10)',
  '%',
  '_',
  '$1',
  '?',
  '\\',
  '{{7*7}}',
  '${process.exit()}',
];

/** Strings at and around every length limit (50, 100, 200, 1,000, 10,000), in ASCII, emoji, NUL. */
export const longString = fc
  .tuple(
    fc.constantFrom('a', '😀', '\u0000', 'é', 'A_', ' '),
    fc.constantFrom(7, 8, 50, 51, 99, 100, 101, 199, 200, 201, 999, 1000, 1001, 9999, 10_000, 10_001, 12_000),
  )
  .map(([unit, n]) => unit.repeat(n));

export const hostileString = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: hostileChar, maxLength: 24 }) },
  { weight: 2, arbitrary: fc.constantFrom(...INJECTIONS, '', ' ', 'null', 'NaN', '1', '-1', '1e400', '0x10', 'started', 'planned') },
  { weight: 1, arbitrary: longString },
);

export const RAW_NUMBERS = [
  '9007199254740993', '9007199254740992', '-9007199254740993', '123456789012345678901234567890', '1e400', '-1e400',
  '1e-400', '-0', '0.0', '1.0', '1E2', '2.5e-3', '1e30', '-1', '0', '2147483647', '2147483648', '4294967296',
  '253402300799', '253402300800', '0.1', '-0.0', '1e+2',
];
export const rawNumber = fc.constantFrom(...RAW_NUMBERS).map(raw);
export const rawString = fc.constantFrom('"\\ud800"', '"\\udfff"', '"a\\u0000b"', '"\\u0000"', '"\\ud83d\\ude00"', '"x\\udc00y"').map(raw);

export const jsNumber = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.integer({ min: -3, max: 12 }),
  fc.constantFrom(NaN, Infinity, -Infinity, -0, 0.5, Number.MAX_SAFE_INTEGER, 2 ** 53, 2 ** 31, -(2 ** 31), Number.MIN_VALUE, Number.MAX_VALUE, 1e30),
);

/** Values the JSON door cannot carry but superjson can (REST sees their JSON form). */
export const superjsonOnly = fc.oneof(
  fc.bigInt(),
  fc.date(),
  fc.constantFrom(undefined, new Map([['project', { name: 'x' }]]), new Set([1, 'a']), /re/g, new Date(NaN), new URL('http://x/')),
);

export const hostileScalar = fc.oneof(
  { weight: 4, arbitrary: hostileString },
  { weight: 3, arbitrary: jsNumber },
  { weight: 2, arbitrary: rawNumber },
  { weight: 1, arbitrary: rawString },
  { weight: 2, arbitrary: fc.constantFrom(null, true, false) },
  { weight: 1, arbitrary: superjsonOnly },
);

export const protoPayloads = fc.constantFrom(
  () => JSON.parse('{"__proto__": {"polluted": "yes", "isAdmin": true}}'),
  () => JSON.parse('{"constructor": {"prototype": {"polluted": "yes"}}}'),
  () => JSON.parse('{"prototype": {"polluted": "yes"}}'),
).map((make) => make() as unknown);

export const keyArb = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 8 }) },
  { weight: 2, arbitrary: fc.constantFrom(...PROTO_KEYS) },
  { weight: 2, arbitrary: fc.constantFrom('project', 'task', 'user', 'id', 'name', 'label', 'state', 'order', 'page', 'password') },
  { weight: 1, arbitrary: fc.string({ unit: hostileChar, maxLength: 6 }) },
);

export const { value: hostileValue } = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { weight: 6, arbitrary: hostileScalar },
    { weight: 2, arbitrary: fc.array(tie('value'), { maxLength: 3 }) },
    { weight: 2, arbitrary: fc.dictionary(keyArb, tie('value'), { maxKeys: 3 }) },
    { weight: 1, arbitrary: protoPayloads },
    { weight: 1, arbitrary: fc.constantFrom(deepArray, deepObject) },
  ),
}));

/** Adds members to an object, as own properties (so `__proto__` stays a key). */
export const withExtras = (base: Record<string, unknown>, extras: Record<string, unknown>) =>
  own([...Object.entries(extras), ...Object.entries(base)]);

export type FieldArbs = Record<string, fc.Arbitrary<unknown>>;

/**
 * A request body for an endpoint: sometimes entirely random, sometimes a random wrapper,
 * mostly the right wrapper with each member either plausible or hostile, plus random extra
 * members (prototype keys included) inside the wrapper and next to it.
 */
export function bodyArb(wrapper: string | null, fields: FieldArbs): fc.Arbitrary<unknown> {
  const members = fc.record(
    Object.fromEntries(
      Object.entries(fields).map(([name, valid]) => [
        name,
        fc.oneof({ weight: 2, arbitrary: valid }, { weight: 3, arbitrary: hostileValue }),
      ]),
    ),
    { requiredKeys: [] },
  );
  const extras = fc.oneof(
    { weight: 3, arbitrary: fc.constant({}) },
    { weight: 2, arbitrary: fc.dictionary(keyArb, hostileValue, { maxKeys: 2 }) },
    { weight: 1, arbitrary: protoPayloads.map((p) => p as Record<string, unknown>) },
  );
  const inner = fc.tuple(members, extras).map(([m, e]) => withExtras(m as Record<string, unknown>, e));
  const wrapped = wrapper
    ? fc.tuple(inner, extras).map(([i, e]) => withExtras({ [wrapper]: i }, e))
    : inner;
  return fc.oneof(
    { weight: 1, arbitrary: hostileValue },
    { weight: 1, arbitrary: wrapper ? hostileValue.map((v) => own([[wrapper, v]])) : hostileValue },
    { weight: 5, arbitrary: wrapped },
  );
}

// ---------------------------------------------------------------------------------------------
// Sending a request through a door, and judging the answer
// ---------------------------------------------------------------------------------------------

export type Door = 'rest' | 'trpc';

export interface Outcome {
  /** How the request went out, for the report. */
  request: string;
  /** HTTP status (for the typed client, the httpStatus in the error data, or 200). */
  status: number;
  /** What is wrong with the answer; empty when it keeps the contract. */
  problems: string[];
  /** The answer, shortened. */
  response: string;
  /** The parsed answer (REST and raw tRPC HTTP). */
  body?: unknown;
}

export const accepted = (o: Outcome) => o.status >= 200 && o.status < 300;

export async function withDeadline<T>(what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`HANG: no answer within ${DEADLINE_MS} ms to ${what}`)), DEADLINE_MS);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

export const ERROR_MEMBERS = new Set(['status', 'code', 'title', 'detail', 'source']);
export const short = (text: string) => (text.length > 600 ? `${text.slice(0, 600)}… (${text.length} chars)` : text);

/** Problems of an `errors` array answered with `status`. */
export function errorProblems(errors: unknown, status: number): string[] {
  const problems: string[] = [];
  if (status < 400 || status > 499) problems.push(`status ${status} is not a 4xx`);
  if (!Array.isArray(errors) || errors.length === 0) return [...problems, 'errors is not a non-empty array'];
  for (const error of errors) {
    if (!isRecord(error)) {
      problems.push('an error is not an object');
      continue;
    }
    for (const key of Object.keys(error)) if (!ERROR_MEMBERS.has(key)) problems.push(`error has an unexpected member ${key}`);
    if (error.status !== String(status)) problems.push(`error status ${JSON.stringify(error.status)} != "${status}"`);
    if (typeof error.code !== 'string' || !/^[a-z]+(_[a-z]+)*$/.test(error.code)) problems.push(`bad code ${JSON.stringify(error.code)}`);
    if (error.code === 'internal_error') problems.push('internal_error');
    for (const key of ['title', 'detail'] as const) {
      if (typeof error[key] !== 'string' || (error[key] as string).length === 0) problems.push(`${key} is not a non-empty string`);
    }
    if (/\n\s+at |node_modules|ZodError|TRPCError|DomainError|\.ts:\d+/.test(String(error.detail))) problems.push('detail leaks internals');
    if ('source' in error) {
      const source = error.source;
      if (!isRecord(source) || Object.keys(source).length === 0) problems.push('source is not a non-empty object');
      else {
        for (const [key, value] of Object.entries(source)) {
          // A member of the body, a query parameter, or a request header (API-CONTRACT.md §2, §15).
          if (key !== 'pointer' && key !== 'parameter' && key !== 'header') problems.push(`source has an unexpected member ${key}`);
          if (typeof value !== 'string') problems.push(`source.${key} is not a string`);
        }
        if (typeof source.pointer === 'string' && !source.pointer.startsWith('/')) problems.push('pointer does not start with /');
      }
    }
  }
  return problems;
}

/** Judges a REST answer: a 2xx, or exactly {errors:[…]} with a 4xx, as JSON. */
export function judgeRest(request: string, res: ApiResponse): Outcome {
  const problems: string[] = [];
  if (res.status === 204) {
    if (res.text !== '') problems.push('204 with a body');
  } else if (res.status === 200 || res.status === 201) {
    if (res.headers.get('content-type') !== JSON_UTF8) problems.push(`content-type ${res.headers.get('content-type')}`);
    // Every answer is a document with `data`, but the account's export (API-CONTRACT.md §16): `{user, projects, tasks, webhooks}`.
    const exported = isRecord(res.body) && ['user', 'projects', 'tasks', 'webhooks'].every((k) => k in (res.body as object));
    if (!isRecord(res.body) || !('data' in res.body || exported)) problems.push('2xx without data');
  } else {
    if (res.headers.get('content-type') !== JSON_UTF8) problems.push(`content-type ${res.headers.get('content-type')}`);
    if (!isRecord(res.body)) problems.push('error body is not a JSON object');
    else {
      const keys = Object.keys(res.body);
      if (keys.length !== 1 || keys[0] !== 'errors') problems.push(`top-level members ${JSON.stringify(keys)}`);
      problems.push(...errorProblems(res.body.errors, res.status));
    }
  }
  return { request, status: res.status, problems, response: `${res.status} ${short(res.text)}`, body: res.body };
}

/** Judges an answer of the /trpc door given as HTTP. */
export function judgeTrpcHttp(request: string, status: number, text: string): Outcome {
  const problems: string[] = [];
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    problems.push('answer is not JSON');
  }
  if (status >= 200 && status < 300) {
    if (!isRecord(body) || !isRecord(body.result)) problems.push('2xx without result');
  } else {
    const data = isRecord(body) && isRecord(body.error) && isRecord(body.error.json) ? body.error.json.data : undefined;
    if (!isRecord(data)) problems.push('error without data');
    else {
      if (data.httpStatus !== status) problems.push(`data.httpStatus ${String(data.httpStatus)} != HTTP ${status}`);
      problems.push(...errorProblems(data.errors, status));
      if (Array.isArray(data.errors) && isRecord(data.errors[0]) && data.code !== data.errors[0].code) problems.push('data.code is not the first error code');
    }
  }
  return { request, status, problems, response: `${status} ${short(text)}`, body };
}

/** Judges a call of the typed client. */
export async function judgeTrpcClient(request: string, call: () => Promise<unknown>): Promise<Outcome> {
  try {
    const result = await call();
    return { request, status: 200, problems: [], response: `ok ${short(JSON.stringify(result) ?? 'undefined')}` };
  } catch (error) {
    if (!(error instanceof TRPCClientError) || !isRecord(error.data)) {
      return { request, status: 0, problems: [`no tRPC error data: ${String(error)}`], response: String(error) };
    }
    const data = error.data as Record<string, unknown>;
    const status = typeof data.httpStatus === 'number' ? data.httpStatus : 0;
    const problems = errorProblems(data.errors, status);
    if (Array.isArray(data.errors) && isRecord(data.errors[0]) && data.code !== data.errors[0].code) problems.push('data.code is not the first error code');
    return { request, status, problems, response: `${status} ${short(JSON.stringify(data))}` };
  }
}

export function expectContract(outcome: Outcome): void {
  if (outcome.problems.length > 0) {
    throw new Error(`Contract broken: ${outcome.problems.join('; ')}\n  request:  ${outcome.request}\n  response: ${outcome.response}`);
  }
}

export async function rest(method: string, path: string, token: string | undefined, body: unknown): Promise<Outcome> {
  const rawBody = body === undefined ? undefined : toJsonText(body);
  const request = `${method} ${path}${rawBody === undefined ? '' : ` body=${short(rawBody)}`}`;
  const res = await withDeadline(
    request,
    app.request(method, path, {
      token,
      rawBody,
      headers: rawBody === undefined ? {} : { 'Content-Type': 'application/json' },
    }),
  );
  return judgeRest(request, res);
}

/** A raw HTTP call of a tRPC procedure, its input written as JSON text by hand. */
export async function trpcRaw(procedure: string, kind: 'query' | 'mutation', token: string | undefined, inputText: string): Promise<Outcome> {
  const headers: Record<string, string> = token ? { Authorization: token } : {};
  let url = `${app.baseUrl}/trpc/${procedure}`;
  let body: string | undefined;
  if (kind === 'query') url += `?input=${encodeURIComponent(inputText)}`;
  else {
    body = inputText;
    headers['Content-Type'] = 'application/json';
  }
  const request = `${kind === 'query' ? 'GET' : 'POST'} /trpc/${procedure}${kind === 'query' ? `?input=${short(inputText)}` : ` body=${short(inputText)}`}`;
  const res = await withDeadline(request, fetch(url, { method: kind === 'query' ? 'GET' : 'POST', headers, body }));
  return judgeTrpcHttp(request, res.status, await res.text());
}

/** The tRPC door: the typed client when it can carry the input, raw HTTP otherwise or when asked. */
export async function trpc(procedure: string, kind: 'query' | 'mutation', token: string | undefined, input: unknown, viaRaw: boolean): Promise<Outcome> {
  if (viaRaw || hasProtoKey(input)) {
    return trpcRaw(procedure, kind, token, input === undefined ? '{}' : `{"json":${toJsonText(input)}}`);
  }
  const [namespace, name] = procedure.split('.') as [string, string];
  const client = app.trpc(token) as any;
  const js = toJs(input);
  return withDeadline(
    `tRPC ${procedure}`,
    judgeTrpcClient(`tRPC client ${procedure}(${describeValue(input)})`, () => client[namespace][name][kind === 'query' ? 'query' : 'mutate'](js)),
  );
}

// ---------------------------------------------------------------------------------------------
// What "nothing changed" means: every row of every table a request writes (the change log
// and webhooks included), and the victim's list pages
// ---------------------------------------------------------------------------------------------

/** Every table a refused request could write, with the order its rows are digested in. */
const DIGESTED: ReadonlyArray<[table: string, order: string]> = [
  ['users', 'r.id'],
  ['usernames', 'r.username'],
  ['access_tokens', 'r.id'],
  ['projects', 'r.id'],
  ['tasks', 'r.id'],
  ['events', 'r.user_id, r.seq'],
  ['webhooks', 'r.id'],
  ['webhook_deliveries', 'r.user_id, r.id'],
  ['idempotency_keys', 'r.user_id, r.key'],
  ['event_stream_tickets', 'r.ticket_hash'],
];

export const DIGEST_SQL = `select ${DIGESTED.map(
  ([table, order]) => `(select count(*) from ${table})::int as ${table}, (select md5(coalesce(string_agg(r::text, '|' order by ${order}), '')) from ${table} r) as ${table}_digest`,
).join(',\n  ')}`;

export async function listPages(token: string, path: string): Promise<string[]> {
  const pages: string[] = [];
  for (let page = 1; page <= 40; page++) {
    const res = await app.request('GET', `${path}?page=${page}`, { token });
    if (res.status !== 200) throw new Error(`snapshot ${path}: ${res.status} ${res.text}`);
    pages.push(res.text);
    if (!res.body.links.next) break;
  }
  return pages;
}

export interface Snapshot {
  sql: unknown;
  projects: string[];
  tasks: string[];
}

export async function snapshot(victim: Victim): Promise<Snapshot> {
  const [sql] = await app.orm.em.fork().execute(DIGEST_SQL);
  return {
    sql,
    projects: await listPages(victim.token, '/api/users/me/projects'),
    tasks: await listPages(victim.token, '/api/users/me/tasks'),
  };
}

/** Every row of the tables of the user's data a refused request could change (DIGESTED), as counts and digests. */
async function rowsDigest(): Promise<unknown> {
  const [rows] = await app.orm.em.fork().execute(DIGEST_SQL);
  return rows;
}

/**
 * Runs a property whose every run sends one request: the answer must keep the contract, and
 * a rejected request must leave every row as it was. The rows are what the victim's list pages
 * are made from, so a run compares the rows alone (the pages would add two requests a run and
 * no change the rows do not show); the pages are read once the property has run, so that what
 * accepted requests stored is still served (`listPages` throws on any answer but 200).
 */
export async function assertHostile<T>(
  victim: Victim,
  arb: fc.Arbitrary<T>,
  send: (input: T) => Promise<Outcome>,
  options: { numRuns?: number; seed?: number; examples?: T[]; before?: (input: T) => Promise<void> } = {},
): Promise<void> {
  let baseline: unknown;
  await fc.assert(
    fc.asyncProperty(arb, async (input) => {
      let ok = false;
      try {
        if (options.before) {
          await options.before(input);
          baseline = undefined;
        }
        baseline ??= await rowsDigest();
        const outcome = await send(input);
        expectContract(outcome);
        const after = await rowsDigest();
        if (!accepted(outcome)) {
          if (JSON.stringify(after) !== JSON.stringify(baseline)) {
            expect(after, `a rejected request changed data\n  request:  ${outcome.request}\n  response: ${outcome.response}`).toEqual(baseline);
          }
        }
        baseline = after;
        ok = true;
      } finally {
        if (!ok) baseline = undefined;
      }
    }),
    {
      numRuns: options.numRuns ?? RUNS,
      ...(options.seed === undefined ? {} : { seed: options.seed }),
      examples: (options.examples ?? []).map((e) => [e] as [T]),
    },
  );
  await snapshot(victim);
}

// ---------------------------------------------------------------------------------------------
// Path ids
// ---------------------------------------------------------------------------------------------

export interface IdEndpoint {
  procedure: string;
  method: string;
  path: (id: string) => string;
  resource: 'project' | 'task';
  kind: 'query' | 'mutation';
  /** A body that would be accepted on one of the user's own records. */
  body?: Record<string, unknown>;
}

export const ID_ENDPOINTS: IdEndpoint[] = [
  { procedure: 'projects.get', method: 'GET', path: (id) => `/api/projects/${id}`, resource: 'project', kind: 'query' },
  { procedure: 'projects.update', method: 'PATCH', path: (id) => `/api/projects/${id}`, resource: 'project', kind: 'mutation', body: { project: { description: 'moved' } } },
  { procedure: 'projects.changeState', method: 'PUT', path: (id) => `/api/projects/${id}/state`, resource: 'project', kind: 'mutation', body: { project: { state: 'started', due_at: NOW + 5 * DAY } } },
  { procedure: 'projects.delete', method: 'DELETE', path: (id) => `/api/projects/${id}`, resource: 'project', kind: 'mutation' },
  { procedure: 'tasks.get', method: 'GET', path: (id) => `/api/tasks/${id}`, resource: 'task', kind: 'query' },
  { procedure: 'tasks.update', method: 'PATCH', path: (id) => `/api/tasks/${id}`, resource: 'task', kind: 'mutation', body: { task: { label: 'moved', project_id: null } } },
  { procedure: 'tasks.changeState', method: 'PUT', path: (id) => `/api/tasks/${id}/state`, resource: 'task', kind: 'mutation', body: { task: { state: 'abandoned' } } },
  { procedure: 'tasks.reorder', method: 'PUT', path: (id) => `/api/tasks/${id}/order`, resource: 'task', kind: 'mutation', body: { task: { order: 1 } } },
];

export function safeEncode(segment: string): string {
  try {
    return encodeURIComponent(segment);
  } catch {
    return '%ED%A0%80';
  }
}

export const LISTS = [
  { procedure: 'projects.list', path: '/api/users/me/projects', size: PROJECT_PAGE_SIZE },
  { procedure: 'tasks.list', path: '/api/users/me/tasks', size: TASK_PAGE_SIZE },
];

/** Node's limit on the request line and headers together (--max-http-header-size). */
export const MAX_HEADER_BYTES = 16 * 1024;

/**
 * GET /trpc/<procedure>?input=<text>, the text put in the URL as it is (URL-encoded).
 * A URL over Node's header limit never reaches a procedure: Node refuses it with a 431,
 * answered as a tRPC error like every answer under /trpc (src/http/http-server.ts); below
 * the limit by more than the other headers' size, that is a problem.
 */
export async function trpcRawQueryText(procedure: string, token: string, text: string): Promise<Outcome> {
  const encoded = /^%/.test(text) ? text : encodeURIComponent(text);
  const request = `GET /trpc/${procedure}?input=${short(encoded)} (${encoded.length} chars)`;
  const res = await withDeadline(request, fetch(`${app.baseUrl}/trpc/${procedure}?input=${encoded}`, { headers: { Authorization: token } }));
  const outcome = judgeTrpcHttp(request, res.status, await res.text());
  if (res.status !== 431) return outcome;
  if (encoded.length < MAX_HEADER_BYTES - 1024) outcome.problems.push(`431 for a URL of only ${encoded.length} chars`);
  if (errorCode(outcome) !== 'headers_too_large') outcome.problems.push('a 431 that is not headers_too_large');
  return outcome;
}

/** The first error code of an HTTP answer of either door (REST envelope or tRPC error data). */
export function errorCode(outcome: Outcome): unknown {
  const body = outcome.body as any;
  return body?.errors?.[0]?.code ?? body?.error?.json?.data?.code;
}

// ---------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------

export async function expectUnchanged(victim: Victim, before: Snapshot) {
  expect(await snapshot(victim)).toEqual(before);
}

/** The tRPC error of a call that must fail. */
export async function trpcError(call: Promise<unknown>): Promise<{ code: string; httpStatus: number; errors: any[] }> {
  const error = await call.then(
    (value) => {
      throw new Error(`expected a tRPC error, got ${JSON.stringify(value)?.slice(0, 300)}`);
    },
    (e: unknown) => e,
  );
  if (!(error instanceof TRPCClientError) || !isRecord(error.data)) throw error;
  return error.data as { code: string; httpStatus: number; errors: any[] };
}
// ---------------------------------------------------------------------------------------------
// After everything
// ---------------------------------------------------------------------------------------------

/**
 * The last tests of a hostile file: nothing it sent polluted a prototype of this process
 * (the app runs in it), and the other user is untouched.
 */
export function describeAfterTheRun() {
  describe('after the run', () => {
    it('Object.prototype, Array.prototype and Function.prototype are not polluted', () => {
      const probe: any = {};
      expect(probe.polluted).toBeUndefined();
      expect(probe.isAdmin).toBeUndefined();
      expect(({} as any).constructor.prototype.polluted).toBeUndefined();
      expect(([] as any).polluted).toBeUndefined();
      expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeKeysAtStart.object);
      expect(Object.getOwnPropertyNames(Array.prototype).sort()).toEqual(prototypeKeysAtStart.array);
      expect(Object.getOwnPropertyNames(Function.prototype).sort()).toEqual(prototypeKeysAtStart.func);
    });

    it('the other user, whose ids were used as foreign ids all along, is untouched', async () => {
      for (const id of other().projectIds) {
        const res = await app.request('GET', `/api/projects/${id}`, { token: other().token });
        expect(res.status).toBe(200);
        expect(['Alpha', 'Beta']).toContain(res.body.data.attributes.name);
        expect(res.body.data.attributes.description).toBe('');
      }
      const tasks = await app.request('GET', '/api/users/me/tasks', { token: other().token });
      expect(tasks.body.data.map((t: any) => [t.attributes.label, t.attributes.order])).toEqual([
        ['Loose', 1],
        ['Linked', 2],
        ['Planned', 3],
      ]);
    });
  });
}
