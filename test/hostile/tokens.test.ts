/**
 * Hostile tests of access tokens (API-CONTRACT.md §2, §3, §16), on both doors (REST and /trpc,
 * raw HTTP and the typed client), against the real database:
 *
 *   1. Another user's ids: user A, with a session token, a personal token of every scope and a
 *      personal token of each single scope, calls every operation of openapi.json that takes an
 *      id with the real ids of user B (projects, a task, a webhook, B's personal and session
 *      tokens), with a body B would be answered 2xx with: each answer is 404 record_not_found
 *      (pointer `/<resource>`), or 403 insufficient_scope where the table (src/app/scopes.ts)
 *      says A's token lacks the scope, never a 2xx nor a 5xx. The operations without an id get
 *      B's ids where they take one (a task's project, a list's filter, a batch's steps): never
 *      B's data in an answer. Every row of B, in every table with a user, is the same after.
 *   2. tokens.create with hostile bodies, property-based (fast-check): scopes lists of 10,000
 *      entries, unknown names, duplicates, wrong types at every level, odd and huge numbers for
 *      expires_at (1e308, -0, NaN as text, 2^53, floats, exponents), names of odd encodings
 *      (lone surrogates, NUL, RTL marks, emoji, 100 vs 101 code points), a 1 MB name (413),
 *      keys written twice, deep nesting. An oracle written from §1, §2 and §16 says what each
 *      body must get: 413 over 100 KiB, 400 invalid_json over 64 levels, 201 for a valid token
 *      (its stored row exactly what was asked), else 422; always the envelope, never a hang;
 *      a refusal stores no token.
 *   3. A token revoking itself while 30 of its requests are in flight on both doors, many
 *      rounds: no 5xx, and every request sent after the revocation's answer is 401.
 *   4. The minting rule, property-based: random scopes for a parent (made by a session) and
 *      for the child it asks for; 201 exactly when the parent has every requested scope
 *      (`allows`, `:write` implying `:read`) and none is tokens:manage or account; otherwise 403
 *      insufficient_scope naming a scope at fault (meta.required_scope and WWW-Authenticate).
 *
 * Found by these tests, and pinned: tokens.current of a token revoked while its request was in
 * flight answered 404 record_not_found; it is 401 unauthorized.
 *
 * HOSTILE_RUNS=<n> runs every property n times (default 60).
 */
import fc from 'fast-check';
import superjson from 'superjson';
import { beforeAll, describe, expect, it } from 'vitest';
import { ACCESS } from '../../src/app/scopes.js';
import { SCOPES, SESSION_ONLY_SCOPES, allows, type Access, type Scope } from '../../src/core/scopes.js';
import { BODY_LIMIT_BYTES, MAX_JSON_DEPTH } from '../../src/core/limits.js';
import { MAX_TOKEN_DAYS } from '../../src/users/token.schema.js';
import {
  describeAfterTheRun,
  errorCode,
  expectContract,
  hasProtoKey,
  hostileValue,
  isPlain,
  judgeRest,
  judgeTrpcClient,
  keyArb,
  type Outcome,
  PROPERTY_TIMEOUT,
  raw,
  RUNS,
  short,
  toJs,
  toJsonText,
  judgeTrpcHttp,
  useHostileApp,
  withDeadline,
} from '../helpers/hostile.js';
import { operations } from '../helpers/openapi-document.js';
import { DAY, seconds, type ApiResponse } from '../helpers/test-app.js';

const app = useHostileApp();
const TOKENS = '/api/users/me/tokens';
const now = () => seconds(app.clock.now().getTime());
type Door = 'rest' | 'trpc';
const DOORS: Door[] = ['rest', 'trpc'];

const sql = <T = any>(text: string, params: unknown[] = []) => app.orm.em.fork().execute<T[]>(text, params);

interface User {
  id: number;
  username: string;
  token: string;
}

async function personal(session: string, scopes: readonly string[], name = scopes.join(' ').slice(0, 100) || 'none'): Promise<{ id: number; secret: string }> {
  const res = await app.request('POST', TOKENS, { token: session, body: { token: { name, scopes, expires_at: now() + DAY } } });
  if (res.status !== 201) throw new Error(`fixture token ${JSON.stringify(scopes)}: ${res.status} ${res.text}`);
  return { id: res.body.data.id, secret: res.body.meta.secret };
}

/** A user's tokens, all kinds, as the database has them. */
const tokenCount = async (userId: number) => Number((await sql<{ n: string }>('select count(*)::text as n from access_tokens where user_id = ?', [userId]))[0]!.n);
/** Forgets a user's personal tokens (kept under the 50 live a user may have). */
const dropPersonalTokens = (userId: number) => sql(`delete from access_tokens where user_id = ? and kind = 'personal'`, [userId]);
/** Forgets a user's personal tokens but those of these secrets. */
async function dropPersonalTokensExcept(userId: number, keep: string[]) {
  const { hashAccessToken } = await import('../../src/users/credentials.js');
  await sql(`delete from access_tokens where user_id = ? and kind = 'personal' and not (token_hash = any(?::text[]))`, [userId, `{${keep.map(hashAccessToken).join(',')}}`]);
}

/**
 * A REST answer judged by the harness; a 403 insufficient_scope carries `meta.required_scope`
 * beside `errors` (§16), the one other member it may have.
 */
function judge(request: string, res: ApiResponse): Outcome {
  if (res.status === 403 && isPlain(res.body) && 'meta' in res.body) {
    const { meta, ...envelope } = res.body;
    const outcome = judgeRest(request, { ...res, body: envelope });
    if (!isPlain(meta) || Object.keys(meta).join() !== 'required_scope' || !(SCOPES as readonly unknown[]).includes(meta.required_scope)) {
      outcome.problems.push(`403 meta ${JSON.stringify(meta)}`);
    }
    if (errorCode(outcome) !== 'insufficient_scope') outcome.problems.push('a 403 with meta that is not insufficient_scope');
    return { ...outcome, body: res.body };
  }
  return judgeRest(request, res);
}

async function restText(method: string, path: string, token: string | undefined, text: string | undefined): Promise<Outcome & { header: string | null }> {
  const request = `${method} ${path}${text === undefined ? '' : ` body=${short(text)}`}`;
  const res = await withDeadline(
    request,
    app.request(method, path, { token, rawBody: text, headers: text === undefined ? {} : { 'Content-Type': 'application/json' } }),
  );
  return { ...judge(request, res), header: res.headers.get('www-authenticate') };
}

/** A raw /trpc call whose input is JSON text written by hand (`{"json": …}`), with its WWW-Authenticate header. */
async function trpcText(procedure: string, kind: 'query' | 'mutation', token: string | undefined, inputText: string | undefined): Promise<Outcome & { header: string | null }> {
  const wrapped = inputText === undefined ? undefined : `{"json":${inputText}}`;
  const headers: Record<string, string> = token ? { Authorization: token } : {};
  let url = `${app.baseUrl}/trpc/${procedure}`;
  if (kind === 'query') {
    if (wrapped !== undefined) url += `?input=${encodeURIComponent(wrapped)}`;
  } else headers['Content-Type'] = 'application/json';
  const request = `${kind === 'query' ? 'GET' : 'POST'} /trpc/${procedure}${wrapped === undefined ? '' : ` input=${short(wrapped)}`}`;
  const res = await withDeadline(request, fetch(url, { method: kind === 'query' ? 'GET' : 'POST', headers, body: kind === 'query' ? undefined : (wrapped ?? '') }));
  return { ...judgeTrpcHttp(request, res.status, await res.text()), header: res.headers.get('www-authenticate') };
}

/** The error data of a tRPC answer (raw HTTP). */
const trpcData = (o: Outcome): any => (o.body as any)?.error?.json?.data;
/** The errors of an answer of either door. */
const errorsOf = (door: Door, o: Outcome): any[] => (door === 'rest' ? (o.body as any)?.errors : trpcData(o)?.errors) ?? [];
const requiredScopeOf = (door: Door, o: Outcome): unknown => (door === 'rest' ? (o.body as any)?.meta?.required_scope : trpcData(o)?.meta?.required_scope);

// ---------------------------------------------------------------------------------------------
// 1. User A on user B's ids, every operation, both doors
// ---------------------------------------------------------------------------------------------

interface Owner extends User {
  marker: string;
  ids: { project: number[]; task: number[]; webhook: number[]; token: number[] };
}

/** User B: two projects (one started), a task in one, a loose one, a webhook, a personal token; every text holds `marker`. */
async function victimB(): Promise<Owner> {
  const marker = `bsecret${Math.random().toString(36).slice(2, 8)}`;
  const user = await app.register(`b_${marker}`);
  const ok = async (method: string, path: string, body?: unknown) => {
    const res = await app.request(method, path, { token: user.token, body });
    if (res.status >= 300) throw new Error(`fixture ${method} ${path}: ${res.status} ${res.text}`);
    return res.body;
  };
  const newed = (await ok('POST', '/api/users/me/projects', { project: { name: `${marker}_one` } })).data.id as number;
  const started = (await ok('POST', '/api/users/me/projects', { project: { name: `${marker}_two` } })).data.id as number;
  await ok('PATCH', `/api/projects/${started}`, { project: { description: `${marker} notes` } });
  await ok('PUT', `/api/projects/${started}/state`, { project: { state: 'started', due_at: now() + 10 * DAY } });
  // The webhook first, so that the tasks' events make deliveries (rows of B that must not move).
  const webhook = (await ok('POST', '/api/users/me/webhooks', { webhook: { url: `https://${marker}.example.com/hook`, description: `${marker} hook` } })).data.id as number;
  const linked = (await ok('POST', '/api/users/me/tasks', { task: { label: `${marker} linked`, project_id: started } })).data.id as number;
  const loose = (await ok('POST', '/api/users/me/tasks', { task: { label: `${marker} loose` } })).data.id as number;
  const pat = await personal(user.token, ['tasks:read', 'projects:write'], `${marker} token`);
  const [session] = await sql<{ id: string }>(`select id::text from access_tokens where user_id = ? and kind = 'session'`, [user.id]);
  return { ...user, marker, ids: { project: [newed, started], task: [linked, loose], webhook: [webhook], token: [pat.id, Number(session!.id)] } };
}

/** Every row of a user in every table that has a user (and the user's own row), as counts and digests. */
async function rowsOf(userId: number): Promise<Record<string, unknown>> {
  const tables = await sql<{ table_name: string }>(
    `select c.table_name from information_schema.columns c join information_schema.tables t using (table_schema, table_name)
      where c.column_name = 'user_id' and c.table_schema = current_schema() and t.table_type = 'BASE TABLE' order by c.table_name`,
  );
  const out: Record<string, unknown> = {};
  out.users = (await sql(`select md5(r::text) as digest from users r where r.id = ?`, [userId]))[0];
  for (const { table_name: table } of tables) {
    out[table] = (await sql(`select count(*)::int as n, md5(coalesce(string_agg(r::text, '|' order by r::text), '')) as digest from "${table}" r where r.user_id = ?`, [userId]))[0];
  }
  return out;
}

interface IdOperation {
  procedure: keyof typeof ACCESS;
  method: string;
  path: string;
  kind: 'query' | 'mutation';
  resource: keyof Owner['ids'];
  access: Access;
  hasBody: boolean;
}

const procedureOf = (operationId: string) => operationId.replace('-', '.') as keyof typeof ACCESS;
const RESOURCES: Record<string, keyof Owner['ids']> = { projects: 'project', tasks: 'task', webhooks: 'webhook', tokens: 'token' };

/** The operations of openapi.json that take an id in their path. */
const ID_OPERATIONS: IdOperation[] = operations
  .filter((o) => o.path.includes('{id}'))
  .map((o) => ({
    procedure: procedureOf(o.id),
    method: o.method.toUpperCase(),
    path: o.path,
    kind: o.method === 'get' ? 'query' : 'mutation',
    resource: RESOURCES[o.path.split('/')[2]!]!,
    access: ACCESS[procedureOf(o.id)] as Access,
    hasBody: Boolean(o.op.requestBody),
  }));

/** A body the owner of the id would be answered 2xx with (so that only the ownership refuses it). */
const OWNER_BODIES: Record<string, (b: Owner) => Record<string, unknown>> = {
  'projects.update': (b) => ({ project: { name: 'Taken', description: 'pwned', due_at: now() + 30 * DAY } }),
  'projects.changeState': () => ({ project: { state: 'paused' } }),
  'tasks.update': () => ({ task: { label: 'taken', project_id: null } }),
  'tasks.changeState': () => ({ task: { state: 'abandoned' } }),
  'tasks.reorder': () => ({ task: { order: 1 } }),
  'webhooks.update': () => ({ webhook: { url: 'https://attacker.example.com/', state: 'disabled', description: 'pwned' } }),
  'webhooks.replay': () => ({ replay: { after: '0' } }),
};

/**
 * The operations without an id in their path, with B's ids wherever they take one: each case's
 * REST query and body, its tRPC input, and what A must get (a 2xx of A's own, or the refusal).
 * `throwaway`: the call ends the token that makes it.
 */
interface PlainCase {
  query?: (b: Owner) => string;
  body?: (b: Owner, n: number) => unknown;
  input?: (b: Owner, n: number) => unknown;
  refused?: { status: number; code: string; pointer?: string };
  /** The scopes the call needs beyond the operation's (a batch's steps; the scopes a new token is given). */
  needs?: Scope[];
  throwaway?: boolean;
  public?: boolean;
}
const PLAIN_CASES: Record<string, PlainCase> = {
  'users.register': { public: true },
  'users.authorize': { public: true },
  'users.me': {},
  'users.update': { body: () => ({ user: { time_zone: 'Europe/Paris' } }) },
  'users.revoke': { throwaway: true },
  // A's own account, with a wrong password: refused, and nothing of A's changes either.
  'users.changePassword': {
    body: () => ({ user: { current_password: 'not the password', password: 'another password' } }),
    refused: { status: 422, code: 'invalid', pointer: '/user/current_password' },
  },
  'users.delete': { body: () => ({ user: { password: 'not the password' } }), refused: { status: 422, code: 'invalid', pointer: '/user/password' } },
  'users.export': {},
  'tokens.create': { body: (_b, n) => ({ token: { name: `a ${n}`, scopes: ['tasks:read'], expires_at: now() + DAY } }), needs: ['tasks:read'] },
  'tokens.list': {},
  'tokens.current': {},
  'projects.create': { body: (_b, n) => ({ project: { name: `a_project_${n}` } }) },
  'projects.list': { query: (b) => `?q=${b.marker}`, input: (b) => ({ q: b.marker }) },
  'tasks.create': {
    body: (b) => ({ task: { label: 'into a foreign project', project_id: b.ids.project[1] } }),
    refused: { status: 422, code: 'record_not_found', pointer: '/task/project_id' },
  },
  'tasks.list': { query: (b) => `?project_id=${b.ids.project.join(',')}`, input: (b) => ({ project_id: b.ids.project }) },
  'batch.apply': {
    body: (b) => ({ operations: [{ op: 'projects.delete', input: { id: b.ids.project[1] } }, { op: 'tasks.update', input: { id: b.ids.task[0], task: { label: 'taken' } } }] }),
    refused: { status: 404, code: 'record_not_found', pointer: '/operations/0/project' },
    needs: ['projects:write', 'tasks:write'],
  },
  'events.list': { query: () => '?after=0', input: () => ({ after: '0' }) },
  'events.ticket': {},
  'webhooks.create': { body: (_b, n) => ({ webhook: { url: `https://a${n}.example.com/` } }) },
  'webhooks.list': {},
};

describe("user A on user B's ids, every operation of openapi.json, both doors", () => {
  let a: User;
  let b: Owner;
  /** A's tokens: the session, a personal token of every scope, one of each single scope. */
  let tokens: Array<{ label: string; secret: string; scopes: readonly Scope[] | null }>;

  beforeAll(async () => {
    a = await app.register();
    b = await victimB();
    const all = await personal(a.token, SCOPES);
    tokens = [
      { label: 'session', secret: a.token, scopes: null },
      { label: 'personal, every scope', secret: all.secret, scopes: SCOPES },
    ];
    for (const scope of SCOPES) tokens.push({ label: `personal, ${scope} alone`, secret: (await personal(a.token, [scope])).secret, scopes: [scope] });
  });

  it('every operation of openapi.json is covered: an id operation by its resource (and a body where it takes one), the others by a case', () => {
    expect(ID_OPERATIONS.length).toBeGreaterThanOrEqual(17);
    for (const op of ID_OPERATIONS) {
      expect(op.resource, op.path).toBeDefined();
      expect(op.access, op.procedure).toBeDefined();
      expect(op.hasBody, `${op.procedure} takes a body: OWNER_BODIES needs one`).toBe(op.procedure in OWNER_BODIES);
    }
    const plain = operations.filter((o) => !o.path.includes('{id}')).map((o) => procedureOf(o.id));
    expect(plain.filter((p) => !(p in PLAIN_CASES)), 'operations without a case').toEqual([]);
    expect(Object.keys(PLAIN_CASES).filter((p) => !plain.includes(p as keyof typeof ACCESS)), 'cases without an operation').toEqual([]);
  });

  it("B's rows are read from every table that has a user", async () => {
    const rows = await rowsOf(b.id);
    for (const table of ['access_tokens', 'projects', 'tasks', 'webhooks', 'webhook_deliveries', 'events', 'idempotency_keys']) expect(rows, table).toHaveProperty(table);
    for (const table of ['access_tokens', 'projects', 'tasks', 'webhooks', 'events']) expect((rows[table] as { n: number }).n, `B has ${table} to guard`).toBeGreaterThan(0);
  });

  for (const op of ID_OPERATIONS) {
    it(`${op.method} ${op.path} (${op.procedure}) with B's ${op.resource} ids: 404 record_not_found, or 403 without the scope; B unchanged`, async () => {
      const before = await rowsOf(b.id);
      for (const token of tokens) {
        for (const id of b.ids[op.resource]) {
          const body = OWNER_BODIES[op.procedure]?.(b);
          for (const door of DOORS) {
            const outcome =
              door === 'rest'
                ? await restText(op.method, op.path.replace('{id}', String(id)), token.secret, body === undefined ? undefined : JSON.stringify(body))
                : await trpcText(op.procedure, op.kind, token.secret, JSON.stringify({ id, ...body }));
            const where = `${token.label}: ${outcome.request} → ${outcome.response}`;
            expectContract(outcome);
            if (allows(token.scopes, op.access)) {
              expect(outcome.status, where).toBe(404);
              expect(errorsOf(door, outcome), where).toEqual([expect.objectContaining({ status: '404', code: 'record_not_found', source: { pointer: `/${op.resource}` } })]);
            } else {
              expect(outcome.status, where).toBe(403);
              expect(errorCode(outcome), where).toBe('insufficient_scope');
              expect(requiredScopeOf(door, outcome), where).toBe(op.access);
              expect(outcome.header, where).toBe(`Bearer error="insufficient_scope", scope="${op.access}"`);
            }
            expect(outcome.response, where).not.toContain(b.marker);
          }
        }
      }
      expect(await rowsOf(b.id)).toEqual(before);
    });
  }

  let n = 0;
  for (const o of operations.filter((x) => !x.path.includes('{id}'))) {
    const procedure = procedureOf(o.id);
    const method = o.method.toUpperCase();
    it(`${method} ${o.path} (${procedure}) with B's ids where it takes one: never B's data, B unchanged`, async () => {
      const c = PLAIN_CASES[procedure]!;
      if (c.public) return; // No token in play: registration and login are tested with the users.
      const before = await rowsOf(b.id);
      const access = ACCESS[procedure] as Access;
      const kind = o.method === 'get' ? 'query' : 'mutation';
      for (const token of tokens) {
        for (const door of DOORS) {
          const secret = c.throwaway ? (await personal(a.token, token.scopes ?? SCOPES.filter((s) => !SESSION_ONLY_SCOPES.includes(s)))).secret : token.secret;
          const body = c.body?.(b, ++n);
          const input = c.input ? c.input(b, n) : body;
          const outcome =
            door === 'rest'
              ? await restText(method, o.path + (c.query?.(b) ?? ''), secret, body === undefined ? undefined : JSON.stringify(body))
              : await trpcText(procedure, kind, secret, input === undefined ? undefined : JSON.stringify(input));
          const where = `${token.label}: ${outcome.request} → ${outcome.response}`;
          expectContract(outcome);
          // A list's links repeat its query (`q=<marker>`): only that may name B's marker.
          expect(outcome.response.replaceAll(`q=${b.marker}`, ''), where).not.toContain(b.marker);
          const needed = [access, ...(c.needs ?? [])].find((s): s is Scope => s !== undefined && s !== 'token' && s !== 'public' && !allows(token.scopes, s));
          if (needed) {
            expect(outcome.status, where).toBe(403);
            expect(requiredScopeOf(door, outcome), where).toBe(needed);
            expect(outcome.header, where).toBe(`Bearer error="insufficient_scope", scope="${needed}"`);
          } else if (c.refused) {
            expect(outcome.status, where).toBe(c.refused.status);
            expect(errorsOf(door, outcome)[0], where).toMatchObject({ code: c.refused.code, ...(c.refused.pointer ? { source: { pointer: c.refused.pointer } } : {}) });
          } else {
            expect(outcome.status, where).toBeLessThan(300);
          }
          if (procedure === 'tokens.list' && outcome.status === 200) {
            const listed = door === 'rest' ? (outcome.body as any).data : (outcome.body as any).result.data.json.data;
            const own = new Set((await sql<{ id: string }>('select id::text from access_tokens where user_id = ?', [a.id])).map((r) => Number(r.id)));
            expect(listed.length, where).toBeGreaterThan(0);
            for (const t of listed) expect(own.has(t.id), `${where}: token ${t.id} is not A's`).toBe(true);
          }
        }
      }
      expect(await rowsOf(b.id)).toEqual(before);
      await dropPersonalTokensExcept(a.id, tokens.map((t) => t.secret));
    });
  }

  it("B's ids still answer B, and B's personal token still works", async () => {
    for (const id of b.ids.project) expect((await app.request('GET', `/api/projects/${id}`, { token: b.token })).status).toBe(200);
    for (const id of b.ids.task) expect((await app.request('GET', `/api/tasks/${id}`, { token: b.token })).status).toBe(200);
    for (const id of b.ids.webhook) expect((await app.request('GET', `/api/webhooks/${id}`, { token: b.token })).status).toBe(200);
    for (const id of b.ids.token) expect((await app.request('GET', `/api/tokens/${id}`, { token: b.token })).status).toBe(200);
  });
});

// ---------------------------------------------------------------------------------------------
// 2. tokens.create with hostile bodies
// ---------------------------------------------------------------------------------------------

/** An object written member by member, in order: a key may come twice, as JSON text allows (the last counts). */
class Members {
  constructor(readonly list: Array<[string, unknown]>) {}
}
function textOf(value: unknown): string {
  if (value instanceof Members) return `{${value.list.map(([k, v]) => `${JSON.stringify(k)}:${textOf(v)}`).join(',')}}`;
  if (Array.isArray(value) && value.some((v) => v instanceof Members)) return `[${value.map(textOf).join(',')}]`;
  return toJsonText(value);
}

/** How deep JSON text nests (a scalar is 0, `[]` is 1), read from the text itself. */
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

const codePoints = (v: string) => [...v].length;
const wellFormed = (v: string) => !v.includes('\u0000') && v.isWellFormed();

type Verdict =
  | { status: 413; code: 'payload_too_large' }
  | { status: 400; code: 'invalid_json' }
  | { status: 201; token: { name: string; scopes: string[]; expires_at: number } }
  | { status: 422 };

/**
 * What §1, §2 and §16 say a body must get, from the JSON text as sent (its bytes, its depth)
 * and the value it stands for (`seen`: JSON.parse's reading, a key written twice counting
 * last; on /trpc what superjson gives the procedure).
 */
function verdict(text: string, seen: unknown, nowSeconds: number): Verdict {
  if (Buffer.byteLength(text) > BODY_LIMIT_BYTES) return { status: 413, code: 'payload_too_large' };
  if (depthOf(text) > MAX_JSON_DEPTH) return { status: 400, code: 'invalid_json' };
  const token = isPlain(seen) ? seen.token : undefined;
  if (!isPlain(token)) return { status: 422 };
  const { name, scopes, expires_at: expiresAt } = token;
  const nameOk = typeof name === 'string' && wellFormed(name) && codePoints(name) >= 1 && codePoints(name) <= 100;
  const scopesOk =
    Array.isArray(scopes) && scopes.length >= 1 && scopes.every((s) => (SCOPES as readonly unknown[]).includes(s)) && new Set(scopes).size === scopes.length;
  const expiresOk = typeof expiresAt === 'number' && Number.isInteger(expiresAt) && expiresAt > nowSeconds && expiresAt <= nowSeconds + MAX_TOKEN_DAYS * DAY;
  return nameOk && scopesOk && expiresOk ? { status: 201, token: { name: name as string, scopes: scopes as string[], expires_at: expiresAt as number } } : { status: 422 };
}

const NOW_S = () => now();
const ONE_MB_NAME = 'n'.repeat(1_048_576);
const nested = (levels: number, inner: unknown): unknown => (levels === 0 ? inner : [nested(levels - 1, inner)]);

const nameArb = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }) },
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      '😀'.repeat(100), '😀'.repeat(101), 'é'.repeat(100), 'é'.repeat(101), 'x'.repeat(100), 'x'.repeat(101), 'e\u0301'.repeat(50), 'e\u0301'.repeat(51),
      '👨‍👩‍👧'.repeat(20), '👨‍👩‍👧'.repeat(21), '\u202eevil\u202c', '\u200fRTL mark\u200f', '\u2067isolate\u2069', 'a\u0000b', '\u0000', '\ufeffbom', ' ', '\n', '',
      '\u2028', 'Calendar sync', "'); drop table access_tokens; --", '<script>x</script>', '\ud800', 'a\udfff', '😀'.slice(0, 1),
    ),
  },
  { weight: 2, arbitrary: fc.constantFrom('"\\ud800"', '"a\\udc00b"', '"\\ud83d\\ude00"', '"\\u0000"', '"x\\ud83d"', '"\\u202e\\u0041"').map(raw) },
  { weight: 1, arbitrary: fc.constant(ONE_MB_NAME) },
  { weight: 2, arbitrary: hostileValue },
);

const scopeName = fc.constantFrom(...SCOPES);
const oddScope = fc.constantFrom(
  'admin', '*', 'tasks:*', 'TASKS:READ', 'tasks:read ', ' tasks:read', 'tasks:read\u0000', 'tasks:reaD', 'projects:write\n', 'tasks', 'read', '', 'tasks:read,projects:read',
  '__proto__', 'constructor', 'toString',
);
const TEN_THOUSAND = 10_000;
const scopesArb = fc.oneof(
  { weight: 5, arbitrary: fc.uniqueArray(scopeName, { minLength: 1, maxLength: SCOPES.length }) },
  { weight: 2, arbitrary: fc.array(fc.oneof(scopeName, oddScope), { minLength: 0, maxLength: 10 }) },
  { weight: 2, arbitrary: fc.uniqueArray(scopeName, { minLength: 1, maxLength: 4 }).chain((list) => fc.shuffledSubarray([...list, ...list], { minLength: list.length + 1 })) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      // 10,000 entries: small ones that fit in 100 KiB (refused as a list), long ones that do not (413).
      Array(TEN_THOUSAND).fill('account'), Array(TEN_THOUSAND).fill(1), Array(TEN_THOUSAND).fill(null), Array(TEN_THOUSAND).fill('a'), Array(TEN_THOUSAND).fill([]),
      Array(TEN_THOUSAND).fill('tasks:read'), Array.from({ length: TEN_THOUSAND }, (_, i) => SCOPES[i % SCOPES.length]), Array.from({ length: TEN_THOUSAND }, (_, i) => i),
    ),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom<unknown>(
      'tasks:read', 1, 0, null, true, {}, { 0: 'tasks:read' }, [['tasks:read']], [{ name: 'tasks:read' }], [null], [1], [1.5], ['tasks:read', null],
      nested(63, 'tasks:read'), nested(64, 'tasks:read'), nested(65, 'tasks:read'), nested(300, 'tasks:read'),
    ),
  },
  { weight: 1, arbitrary: hostileValue },
);

const expiresArb = (nowSeconds: number) =>
  fc.oneof(
    { weight: 5, arbitrary: fc.integer({ min: nowSeconds + 1, max: nowSeconds + MAX_TOKEN_DAYS * DAY }) },
    { weight: 2, arbitrary: fc.constantFrom(nowSeconds, nowSeconds - 1, nowSeconds + 1, nowSeconds + MAX_TOKEN_DAYS * DAY, nowSeconds + MAX_TOKEN_DAYS * DAY + 1, 0, -1) },
    {
      weight: 3,
      arbitrary: fc
        .constantFrom(
          '1e308', '-1e308', '1e400', '-0', '-0.0', '0.0', '9007199254740992', '9007199254740993', '4503599627370496.5', '253402300799', '253402300800',
          `${nowSeconds + DAY}.0`, `${nowSeconds + DAY}.5`, `${nowSeconds + DAY}e0`, `${(nowSeconds + DAY) * 10}e-1`, `${(nowSeconds + DAY) / 100}e2`, `${nowSeconds + DAY}E+0`,
          '1e-400', '5e-324', '123456789012345678901234567890',
        )
        .map(raw),
    },
    {
      weight: 2,
      arbitrary: fc.constantFrom<unknown>('NaN', 'Infinity', '-Infinity', String(nowSeconds + DAY), '', null, true, [nowSeconds + DAY], { value: nowSeconds + DAY }, 2 ** 53, -(2 ** 53), 2 ** 31, nowSeconds + DAY + 0.25, Number.MIN_VALUE),
    },
    { weight: 1, arbitrary: fc.double() },
    { weight: 1, arbitrary: hostileValue },
  );

/** A member list: each of the three present or not, some written twice, extra keys (prototype keys too) among them. */
function membersArb(fields: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<Members> {
  const entry = (key: string, arb: fc.Arbitrary<unknown>) => fc.tuple(fc.constant(key), arb);
  const present = Object.entries(fields).map(([key, arb]) => fc.option(entry(key, arb), { freq: 6, nil: undefined }));
  const twice = fc.array(fc.oneof(...Object.entries(fields).map(([key, arb]) => entry(key, arb))), { maxLength: 2 });
  const extras = fc.array(fc.tuple(keyArb, hostileValue), { maxLength: 2 });
  return fc
    .tuple(fc.tuple(...present), fc.oneof({ weight: 4, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: twice }), fc.oneof({ weight: 3, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: extras }), fc.boolean())
    .map(([own, dup, extra, dupFirst]) => {
      const base = own.filter((e): e is [string, unknown] => e !== undefined);
      return new Members(dupFirst ? [...dup, ...extra, ...base] : [...base, ...extra, ...dup]);
    });
}

const bodyArb = (nowSeconds: number) => {
  // Each member plausible more often than not, so that a good share of the bodies is a token (and its row is checked).
  const mostly = (valid: fc.Arbitrary<unknown>, hostile: fc.Arbitrary<unknown>) => fc.oneof({ weight: 3, arbitrary: valid }, { weight: 2, arbitrary: hostile });
  const token = membersArb({
    name: mostly(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 100 }), nameArb),
    scopes: mostly(fc.uniqueArray(scopeName, { minLength: 1, maxLength: SCOPES.length }), scopesArb),
    expires_at: mostly(fc.integer({ min: nowSeconds + 1, max: nowSeconds + MAX_TOKEN_DAYS * DAY }), expiresArb(nowSeconds)),
  });
  return fc.oneof(
    { weight: 8, arbitrary: token.map((t) => new Members([['token', t]])) },
    { weight: 1, arbitrary: fc.tuple(token, token).map(([first, last]) => new Members([['token', first], ['token', last]])) },
    { weight: 1, arbitrary: fc.tuple(token, fc.tuple(keyArb, hostileValue)).map(([t, extra]) => new Members([extra, ['token', t]])) },
    { weight: 1, arbitrary: hostileValue.map((v) => new Members([['token', v]])) },
    { weight: 1, arbitrary: fc.oneof(hostileValue, token.map((t) => [t])) },
  );
};

describe('tokens.create with hostile bodies, property-based, on both doors', () => {
  let u: User;
  beforeAll(async () => {
    u = await app.register();
  });

  /** Sends one body as JSON text through a door and checks the answer against the verdict, and the rows. */
  async function check(door: Door, bodyText: string): Promise<Outcome> {
    const nowSeconds = NOW_S();
    const sentText = door === 'rest' ? bodyText : `{"json":${bodyText}}`;
    let seen: unknown;
    try {
      seen = JSON.parse(bodyText);
    } catch {
      seen = undefined;
    }
    const expected = verdict(sentText, seen, nowSeconds);
    const before = await tokenCount(u.id);
    const outcome = door === 'rest' ? await restText('POST', TOKENS, u.token, bodyText) : await trpcText('tokens.create', 'mutation', u.token, bodyText);
    const where = `${outcome.request}\n  → ${outcome.response}\n  expected ${JSON.stringify(expected).slice(0, 300)}`;
    expectContract(outcome);
    if (expected.status === 201) {
      expect(outcome.status, where).toBe(door === 'rest' ? 201 : 200);
      const doc = door === 'rest' ? (outcome.body as any) : (outcome.body as any).result.data.json;
      expect(doc.data.attributes, where).toMatchObject({ name: expected.token.name, scopes: expected.token.scopes, expiresAt: expected.token.expires_at, kind: 'personal', lastUsedAt: 0 });
      expect(doc.meta.secret, where).toMatch(/^plnr_/);
      const rows = await sql<{ user_id: string; kind: string; name: string; scopes: string[]; expires: string }>(
        'select user_id::text, kind, name, scopes, extract(epoch from expires_at)::bigint::text as expires from access_tokens where id = ?',
        [doc.data.id],
      );
      expect(rows, where).toEqual([{ user_id: String(u.id), kind: 'personal', name: expected.token.name, scopes: expected.token.scopes, expires: String(expected.token.expires_at) }]);
      expect(await tokenCount(u.id), where).toBe(before + 1);
      await dropPersonalTokens(u.id);
    } else {
      expect(outcome.status, where).toBe(expected.status);
      if ('code' in expected) expect(errorCode(outcome), where).toBe(expected.code);
      expect(await tokenCount(u.id), `a refused body stored a token\n  ${where}`).toBe(before);
    }
    return outcome;
  }

  for (const door of DOORS) {
    it(
      `${door}: every body gets its verdict (201 with exactly the token asked, 413, 400 or 422), never a 5xx or a hang; a refusal stores nothing`,
      async () => {
        let accepted = 0;
        const statuses = new Map<number, number>();
        await fc.assert(
          fc.asyncProperty(bodyArb(NOW_S()), async (body) => {
            const outcome = await check(door, textOf(body));
            if (outcome.status < 300) accepted++;
            statuses.set(outcome.status, (statuses.get(outcome.status) ?? 0) + 1);
          }),
          { numRuns: RUNS },
        );
        // The generator is not all refusals: a property that never stores a token tests half the rule.
        expect(accepted).toBeGreaterThan(0);
        expect([...statuses.keys()].filter((status) => status >= 400).length, 'refusals of more than one kind').toBeGreaterThan(1);
      },
      PROPERTY_TIMEOUT * 2,
    );
  }

  for (const door of DOORS) {
    it(`${door}: the pinned bodies (1 MB name, 10,000 scopes, odd numbers, keys twice, nesting) get their verdicts`, async () => {
      const t = NOW_S() + DAY;
      const ok = (members: string) => `{"token":{${members}}}`;
      const good = `"name":"n","scopes":["tasks:read"],"expires_at":${t}`;
      const cases: Array<[string, number]> = [
        [ok(`"name":"${ONE_MB_NAME}","scopes":["tasks:read"],"expires_at":${t}`), 413],
        [ok(`"name":"n","scopes":${JSON.stringify(Array(TEN_THOUSAND).fill('tasks:read'))},"expires_at":${t}`), 413],
        [ok(`"name":"n","scopes":${JSON.stringify(Array(TEN_THOUSAND).fill('account'))},"expires_at":${t}`), 422],
        [ok(`"name":"n","scopes":${JSON.stringify(Array(TEN_THOUSAND).fill(1))},"expires_at":${t}`), 422],
        ...['1e308', '-0', '"NaN"', String(2 ** 53), `${t}.5`, '1e400', 'null', '[]', '{}'].map((e): [string, number] => [ok(`"name":"n","scopes":["tasks:read"],"expires_at":${e}`), 422]),
        [ok(`"name":"n","scopes":["tasks:read"],"expires_at":${t}e0`), 201],
        [ok(`"name":"n","scopes":["tasks:read"],"expires_at":${t * 10}e-1`), 201],
        [ok(`"name":"${'😀'.repeat(100)}","scopes":["tasks:read"],"expires_at":${t}`), 201],
        [ok(`"name":"${'😀'.repeat(101)}","scopes":["tasks:read"],"expires_at":${t}`), 422],
        [ok(`"name":"\\ud800","scopes":["tasks:read"],"expires_at":${t}`), 422],
        [ok(`"name":"a\\u0000","scopes":["tasks:read"],"expires_at":${t}`), 422],
        [ok(`"name":"\\u202eRTL","scopes":["tasks:read"],"expires_at":${t}`), 201],
        [ok(`${good},"scopes":["admin"]`), 422],
        [ok(`"scopes":["admin"],${good}`), 201],
        [`{"token":{"name":"n"},"token":{${good}}}`, 201],
        [`{"token":{${good}},"token":{"name":"n"}}`, 422],
        [ok(`"name":"n","scopes":${JSON.stringify(nested(80, 'tasks:read'))},"expires_at":${t}`), 400],
        [`{"__proto__":{"token":{${good}}}}`, 422],
        [ok(`"__proto__":{"scopes":["tasks:read"]},"name":"n","expires_at":${t}`), 422],
      ];
      for (const [text, status] of cases) {
        const outcome = await check(door, text);
        expect(outcome.status === 200 ? 201 : outcome.status, outcome.request.slice(0, 200)).toBe(status);
      }
    });
  }

  it('the typed client: values only superjson carries (NaN, -0, BigInt, Date, undefined, Map, Set) as members get their verdict', async () => {
    const t = NOW_S() + DAY;
    const bodies = fc.record({
      name: fc.oneof(nameArb.filter((v) => v !== ONE_MB_NAME), fc.constantFrom(undefined, new Date(0), new Set(['n']), 10n)),
      scopes: fc.oneof(fc.uniqueArray(scopeName, { minLength: 1 }), fc.constantFrom(undefined, new Set(['tasks:read']), new Map([[0, 'tasks:read']]), [undefined], ['tasks:read', undefined])),
      expires_at: fc.oneof(fc.constant(t), fc.constantFrom(NaN, -0, Infinity, -Infinity, BigInt(t), new Date(t * 1000), undefined, t + 0.5, 2 ** 53, 1e308)),
    }, { requiredKeys: [] });
    await fc.assert(
      fc.asyncProperty(bodies.filter((m) => !hasProtoKey(m)), async (members) => {
        const input = { token: toJs(members) };
        const text = JSON.stringify(superjson.serialize(input as any));
        const seen = superjson.deserialize(JSON.parse(text));
        const expected = verdict(text, seen, NOW_S());
        const before = await tokenCount(u.id);
        const outcome = await withDeadline('tokens.create', judgeTrpcClient(`tokens.create ${text.slice(0, 300)}`, () => app.trpc(u.token).tokens.create.mutate(input as any)));
        const where = `${outcome.request} → ${outcome.response}`;
        expectContract(outcome);
        expect(outcome.status === 200 ? 201 : outcome.status, where).toBe(expected.status);
        expect(await tokenCount(u.id), where).toBe(before + (expected.status === 201 ? 1 : 0));
        await dropPersonalTokens(u.id);
      }),
      { numRuns: RUNS },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// 3. A token racing its own revocation
// ---------------------------------------------------------------------------------------------

const RACE_ROUNDS = Math.max(8, Math.ceil(RUNS / 5));
const IN_FLIGHT = 30;

describe('a token racing its own revocation, both doors', () => {
  it(`${RACE_ROUNDS} rounds of ${IN_FLIGHT} requests in flight while it revokes itself: no 5xx, each answer 2xx or 401, and every request sent after the revocation's answer is 401`, async () => {
    const u = await app.register();
    for (let round = 0; round < RACE_ROUNDS; round++) {
      const token = await personal(u.token, ['tokens:manage', 'tasks:write']);
      const label = (i: number) => `race ${round} ${i}`;
      // What a request may be: writes and reads on both doors, the token's own routes among them.
      const calls: Array<(i: number) => Promise<Outcome & { creates?: boolean }>> = [
        async (i) => ({ ...(await restText('POST', '/api/users/me/tasks', token.secret, JSON.stringify({ task: { label: label(i) } }))), creates: true }),
        async (i) => ({ ...(await trpcText('tasks.create', 'mutation', token.secret, JSON.stringify({ task: { label: label(i) } }))), creates: true }),
        () => restText('GET', '/api/users/me/tasks', token.secret, undefined),
        () => trpcText('tasks.list', 'query', token.secret, undefined),
        () => restText('GET', TOKENS, token.secret, undefined),
        () => trpcText('tokens.get', 'query', token.secret, JSON.stringify({ id: token.id })),
        () => restText('GET', '/api/users/me/tokens/current', token.secret, undefined),
        () => trpcText('users.me', 'query', token.secret, undefined),
      ];
      const sent: Array<Promise<{ outcome: Outcome & { creates?: boolean }; sentAt: number }>> = [];
      const fire = (i: number) => {
        const sentAt = performance.now();
        sent.push(calls[(i + round) % calls.length]!(i).then((outcome) => ({ outcome, sentAt })));
      };
      let revokedAt = Infinity;
      for (let i = 0; i < IN_FLIGHT / 3; i++) fire(i);
      const revocation = (round % 2 === 0
        ? restText('DELETE', `/api/tokens/${token.id}`, token.secret, undefined)
        : trpcText('tokens.revoke', 'mutation', token.secret, JSON.stringify({ id: token.id }))
      ).then((outcome) => {
        revokedAt = performance.now();
        return outcome;
      });
      // The rest go out over the next milliseconds, before and after the revocation's answer.
      await new Promise<void>((resolve) => {
        let left = IN_FLIGHT - IN_FLIGHT / 3;
        for (let i = IN_FLIGHT / 3; i < IN_FLIGHT; i++) {
          setTimeout(() => {
            fire(i);
            if (--left === 0) resolve();
          }, Math.floor(Math.random() * 40));
        }
      });
      const revoked = await revocation;
      expectContract(revoked);
      expect(revoked.status, revoked.response).toBe(round % 2 === 0 ? 204 : 200);
      // And after it, on both doors: all refused.
      for (let i = IN_FLIGHT; i < IN_FLIGHT + calls.length; i++) fire(i);
      const answers = await Promise.all(sent);
      let created = 0;
      for (const { outcome, sentAt } of answers) {
        const where = `round ${round}: ${outcome.request} → ${outcome.response}`;
        expectContract(outcome);
        // In flight, a request may pass (it was authenticated before the revocation) or be 401; reading
        // the token by its id may find it gone (404, as for anyone reading a revoked token's id).
        const gone = outcome.request.includes('tokens.get') && outcome.status === 404 && errorCode(outcome) === 'record_not_found';
        expect(outcome.status < 300 || outcome.status === 401 || gone, where).toBe(true);
        if (sentAt > revokedAt) expect(outcome.status, `sent after the revocation's answer: ${where}`).toBe(401);
        if (outcome.status === 401) expect(errorCode(outcome), where).toBe('unauthorized');
        if (outcome.creates && outcome.status < 300) created++;
      }
      expect(answers.filter((a) => a.sentAt > revokedAt).length).toBeGreaterThanOrEqual(calls.length);
      // What passed is exactly what is stored: one task for each creation answered 2xx.
      const [row] = await sql<{ n: string }>(`select count(*)::text as n from tasks where user_id = ? and label like ?`, [u.id, `race ${round} %`]);
      expect(Number(row!.n), `round ${round}`).toBe(created);
      expect(await sql('select id from access_tokens where id = ?', [token.id])).toEqual([]);
    }
  }, 120_000);
});

describe('pinned: what the race found', () => {
  // Found by the race above: tokens.current of a token revoked after its request was authenticated
  // answered 404 record_not_found ("no token with this id"), on both doors. The token no longer
  // works: 401 unauthorized, as every later request with it. The window is made here by hand, the
  // operation called with the context of a request authenticated before the revocation.
  it('tokens.current of a token revoked after the request was authenticated is 401 unauthorized, not 404', async () => {
    const u = await app.register();
    const token = await personal(u.token, ['tasks:read']);
    const { hashAccessToken } = await import('../../src/users/credentials.js');
    const { currentToken } = await import('../../src/users/manage-tokens.js');
    const { DomainError } = await import('../../src/core/errors.js');
    const ctx = {
      em: app.orm.em.fork(),
      clock: app.clock,
      user: { id: u.id, username: u.username, timeZone: 'UTC' },
      tokenHash: hashAccessToken(token.secret),
      token: { id: token.id, kind: 'personal', scopes: ['tasks:read'] },
    } as unknown as Parameters<typeof currentToken>[0];
    expect((await currentToken(ctx)).data).toMatchObject({ id: token.id, attributes: { current: true } });
    expect((await app.request('DELETE', `/api/tokens/${token.id}`, { token: u.token })).status).toBe(204);
    const failure = await currentToken(ctx).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(DomainError);
    expect((failure as InstanceType<typeof DomainError>).errors).toEqual([expect.objectContaining({ status: '401', code: 'unauthorized' })]);
    // And over HTTP, once revoked: 401 on both doors.
    expect((await restText('GET', '/api/users/me/tokens/current', token.secret, undefined)).status).toBe(401);
    expect((await trpcText('tokens.current', 'query', token.secret, undefined)).status).toBe(401);
  });
});

// ---------------------------------------------------------------------------------------------
// 4. The minting rule
// ---------------------------------------------------------------------------------------------

describe('the minting rule, property-based, on both doors', () => {
  const subset = fc.uniqueArray(fc.constantFrom(...SCOPES), { minLength: 1, maxLength: SCOPES.length });
  /** A child's request: any scopes, or (as often) some of the parent's own, `:read` for a `:write` it has. */
  const request = (parent: Scope[]) =>
    fc.oneof(
      subset,
      fc.shuffledSubarray(
        [...new Set(parent.flatMap((s): Scope[] => (s === 'tasks:write' ? [s, 'tasks:read'] : s === 'projects:write' ? [s, 'projects:read'] : [s])))],
        { minLength: 1 },
      ),
    );
  const cases = fc.tuple(subset, fc.constantFrom(...DOORS)).chain(([parent, door]) => fc.tuple(fc.constant(parent), request(parent), fc.constantFrom(door)));

  it('201 exactly when the parent has every scope asked and none is tokens:manage or account; else 403 insufficient_scope naming a scope at fault', async () => {
    const u = await app.register();
    const seen = { created: 0, refused: 0 };
    await fc.assert(
      fc.asyncProperty(cases, async ([parentScopes, childScopes, door]) => {
        await dropPersonalTokens(u.id);
        const parent = await personal(u.token, parentScopes);
        const expiresAt = now() + 7 * DAY;
        const body = JSON.stringify({ token: { name: 'child', scopes: childScopes, expires_at: expiresAt } });
        const before = await tokenCount(u.id);
        const outcome = door === 'rest' ? await restText('POST', TOKENS, parent.secret, body) : await trpcText('tokens.create', 'mutation', parent.secret, body);
        const where = `parent ${JSON.stringify(parentScopes)}: ${outcome.request} → ${outcome.response}`;
        expectContract(outcome);
        // Without tokens:manage the operation itself is refused; with it, each scope asked is judged.
        const atFault: Scope[] = !allows(parentScopes, 'tokens:manage')
          ? ['tokens:manage']
          : childScopes.filter((scope) => SESSION_ONLY_SCOPES.includes(scope) || !allows(parentScopes, scope));
        if (atFault.length === 0) {
          seen.created++;
          expect(outcome.status, where).toBe(door === 'rest' ? 201 : 200);
          const doc = door === 'rest' ? (outcome.body as any) : (outcome.body as any).result.data.json;
          expect(doc.data.attributes, where).toMatchObject({ scopes: childScopes, expiresAt, kind: 'personal' });
          const [row] = await sql<{ scopes: string[] }>('select scopes from access_tokens where id = ? and user_id = ?', [doc.data.id, u.id]);
          expect(row?.scopes, where).toEqual(childScopes);
          // The child works within its scopes only.
          const child: string = doc.meta.secret;
          const probe = await app.request('GET', '/api/users/me/tasks', { token: child });
          expect(probe.status, where).toBe(allows(childScopes, 'tasks:read') ? 200 : 403);
        } else {
          seen.refused++;
          expect(outcome.status, where).toBe(403);
          expect(errorCode(outcome), where).toBe('insufficient_scope');
          const named = requiredScopeOf(door, outcome) as Scope;
          expect(atFault, `${where}\n  names ${named}, not one of ${JSON.stringify(atFault)}`).toContain(named);
          expect(outcome.header, where).toBe(`Bearer error="insufficient_scope", scope="${named}"`);
          expect(errorsOf(door, outcome)[0].detail, where).toContain(named);
          expect(await tokenCount(u.id), `a refused child was stored: ${where}`).toBe(before);
        }
      }),
      {
        numRuns: RUNS,
        examples: [
          [[['tokens:manage', 'tasks:write'], ['tasks:read'], 'rest']],
          [[['tokens:manage', 'tasks:write'], ['tasks:read', 'tasks:write'], 'trpc']],
          [[['tokens:manage', 'tasks:read'], ['tasks:write'], 'rest']],
          [[['tokens:manage', 'projects:read'], ['projects:write'], 'trpc']],
          [[[...SCOPES], ['account'], 'rest']],
          [[[...SCOPES], ['tasks:read', 'tokens:manage'], 'trpc']],
          [[['tasks:write'], ['tasks:read'], 'rest']],
          [[['account', 'webhooks:manage'], ['webhooks:manage'], 'trpc']],
        ],
      },
    );
    // Both outcomes were met, not only refusals.
    expect(seen.created, JSON.stringify(seen)).toBeGreaterThan(0);
    expect(seen.refused, JSON.stringify(seen)).toBeGreaterThan(0);
    await dropPersonalTokens(u.id);
  }, PROPERTY_TIMEOUT * 2);
});

describeAfterTheRun();
