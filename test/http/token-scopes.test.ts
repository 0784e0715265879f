/**
 * Every scope × every operation, on both doors (API-CONTRACT.md §16), generated from the one
 * table (src/app/scopes.ts) and openapi.json: an operation added without a row fails here (and
 * when the router is made). For each scope, a personal token with that scope alone calls every
 * operation with an unknown id and an empty body: without the scope it is 403
 * `insufficient_scope` (with `WWW-Authenticate` and `meta.required_scope`), checked before the
 * input; with it, whatever the operation answers that input (404 for the unknown id, 422 for the
 * empty body, 200), never a 403. A batch needs the scope of each operation, before any runs; the
 * event stream (REST's `Accept: text/event-stream`, and tRPC's subscription) needs `events:read`.
 */
import { describe, expect, it } from 'vitest';
import { ACCESS } from '../../src/app/scopes.js';
import { SCOPES, allows, type Access, type Scope } from '../../src/core/scopes.js';
import { operations } from '../helpers/openapi-document.js';
import { openTrpcStream } from '../helpers/sse.js';
import { seconds, useTestAppWithSql } from '../helpers/test-app.js';

const { app, db } = useTestAppWithSql();
const UNKNOWN_ID = 987_654_321;

interface Operation {
  procedure: keyof typeof ACCESS;
  access: Access;
  method: string;
  path: string;
  kind: 'query' | 'mutation';
}

/** REST's operations, from openapi.json, with their rows. Logging out (it would end the token) is tried apart. */
const OPERATIONS: Operation[] = operations
  .map(({ id, method, path }) => {
    const procedure = id.replace('-', '.') as keyof typeof ACCESS;
    return { procedure, access: ACCESS[procedure] as Access, method: method.toUpperCase(), path: path.replace('{id}', String(UNKNOWN_ID)), kind: method === 'get' ? 'query' : 'mutation' } as const;
  })
  .filter((op) => op.access !== 'public' && op.procedure !== 'users.revoke');

async function tokenWith(sessionToken: string, scopes: Scope[]): Promise<string> {
  const res = await app.request('POST', '/api/users/me/tokens', {
    token: sessionToken,
    body: { token: { name: scopes.join(' '), scopes, expires_at: seconds(app.clock.now().getTime()) + 86_400 } },
  });
  expect(res.status, res.text).toBe(201);
  return res.body.meta.secret;
}

function expectScopeRefusal(status: number, body: any, header: string | null, scope: string, where: string) {
  expect(status, where).toBe(403);
  expect(body, where).toEqual({
    errors: [{ status: '403', code: 'insufficient_scope', title: expect.any(String), detail: expect.stringContaining(scope) }],
    meta: { required_scope: scope },
  });
  expect(header, where).toBe(`Bearer error="insufficient_scope", scope="${scope}"`);
}

/** A tRPC call sent as bytes, so that every procedure is reached the same way. */
async function trpcCall(op: Operation, token: string, input: unknown) {
  const url = `${app.baseUrl}/trpc/${op.procedure}`;
  const headers = { Authorization: token, 'Content-Type': 'application/json' };
  const res =
    op.kind === 'query'
      ? await fetch(`${url}?input=${encodeURIComponent(JSON.stringify({ json: input }))}`, { headers })
      : await fetch(url, { method: 'POST', headers, body: JSON.stringify({ json: input }) });
  const body = (await res.json()) as any;
  return { status: res.status, header: res.headers.get('www-authenticate'), error: body.error?.json?.data };
}

describe('every scope × every operation', () => {
  it('the table covers every operation of openapi.json, and REST has all but the subscription', () => {
    expect(OPERATIONS.length).toBeGreaterThan(30);
    const documented = new Set(operations.map(({ id }) => id.replace('-', '.')));
    expect(Object.keys(ACCESS).filter((p) => !documented.has(p))).toEqual(['events.onChange']);
  });

  for (const scope of SCOPES) {
    it(`a token with ${scope} alone: 403 exactly where the table needs another scope, on both doors`, async () => {
      const u = await app.register();
      const token = await tokenWith(u.token, [scope]);
      for (const op of OPERATIONS) {
        const input = op.path.includes(String(UNKNOWN_ID)) ? { id: UNKNOWN_ID } : {};
        const rest = await app.request(op.method, op.path, { token, body: op.kind === 'mutation' ? {} : undefined });
        const trpc = await trpcCall(op, token, op.kind === 'mutation' ? input : op.path.includes(String(UNKNOWN_ID)) ? input : undefined);
        const where = `${scope} → ${op.method} ${op.path} (${op.procedure})`;
        if (allows([scope], op.access)) {
          expect(rest.status, `${where}: ${rest.text}`).not.toBe(403);
          expect(rest.status, `${where}: ${rest.text}`).toBeLessThan(500);
          expect(trpc.status, `/trpc ${where}: ${JSON.stringify(trpc.error)}`).not.toBe(403);
          expect(trpc.status, `/trpc ${where}`).toBeLessThan(500);
          // An unknown id is still 404 for a token that has the scope (or 422 for the empty body, read first).
          if (op.path.includes(String(UNKNOWN_ID))) expect([404, 422], where).toContain(rest.status);
        } else {
          expectScopeRefusal(rest.status, rest.body, rest.headers.get('www-authenticate'), op.access, where);
          expect(trpc.status, `/trpc ${where}`).toBe(403);
          expect(trpc.header, `/trpc ${where}`).toBe(`Bearer error="insufficient_scope", scope="${op.access}"`);
          expect(trpc.error, `/trpc ${where}`).toMatchObject({ code: 'insufficient_scope', httpStatus: 403, meta: { required_scope: op.access } });
        }
      }
    });
  }

  it('a session token has every scope: no operation answers it 403', async () => {
    const u = await app.register();
    for (const op of OPERATIONS) {
      const res = await app.request(op.method, op.path, { token: u.token, body: op.kind === 'mutation' ? {} : undefined });
      expect(res.status, `${op.method} ${op.path}: ${res.text}`).not.toBe(403);
    }
  });

  it('logging out and the token in use need no scope: any token may see and end itself', async () => {
    const u = await app.register();
    const token = await tokenWith(u.token, ['events:read']);
    expect((await app.request('GET', '/api/users/me/tokens/current', { token })).status).toBe(200);
    expect((await app.request('GET', '/api/users/me', { token })).status).toBe(200);
    expect((await app.request('DELETE', '/api/users/me/authorizations/current', { token })).status).toBe(204);
    expect((await app.request('GET', '/api/users/me', { token })).status).toBe(401);
  });
});

describe('the order of the checks', () => {
  it('401 before the scope; the scope before the path id, the query, the media type and the body', async () => {
    const u = await app.register();
    const reader = await tokenWith(u.token, ['tasks:read']);
    expect((await app.request('POST', '/api/users/me/tasks', { body: { task: {} } })).status).toBe(401);
    const refused = [
      await app.request('POST', '/api/users/me/tasks', { token: reader, body: { task: { label: '' } } }),
      await app.request('PATCH', '/api/tasks/abc', { token: reader, body: { task: { label: 'x' } } }),
      await app.request('GET', '/api/users/me/projects?page=0', { token: reader }),
      await app.request('POST', '/api/users/me/tasks', { token: reader, body: '{"task":', headers: { 'Content-Type': 'application/json' } }),
      await app.request('POST', '/api/users/me/tasks', { token: reader, body: 'x', headers: { 'Content-Type': 'text/plain' } }),
    ];
    expect(refused.map((r) => [r.status, r.body?.meta?.required_scope])).toEqual([
      [403, 'tasks:write'], [403, 'tasks:write'], [403, 'projects:read'], [403, 'tasks:write'], [403, 'tasks:write'],
    ]);
    // With the scope, the same requests meet their own refusals.
    expect((await app.request('PATCH', '/api/tasks/abc', { token: u.token, body: { task: { label: 'x' } } })).status).toBe(404);
    expect((await app.request('GET', '/api/users/me/projects?page=0', { token: u.token })).status).toBe(400);
  });

  it('another user\'s id is 404 for a token with the scope, 403 for one without', async () => {
    const owner = await app.register();
    const task = await app.request('POST', '/api/users/me/tasks', { token: owner.token, body: { task: { label: 'theirs' } } });
    const u = await app.register();
    const reader = await tokenWith(u.token, ['tasks:read']);
    const projects = await tokenWith(u.token, ['projects:read']);
    expect((await app.request('GET', `/api/tasks/${task.body.data.id}`, { token: reader })).status).toBe(404);
    expect((await app.request('GET', `/api/tasks/${task.body.data.id}`, { token: projects })).status).toBe(403);
  });
});

describe('a batch and the streams', () => {
  it('a batch needs the scope of each of its operations, checked before any runs', async () => {
    const u = await app.register();
    const writer = await tokenWith(u.token, ['tasks:write']);
    const batch = {
      operations: [
        { op: 'tasks.create', input: { task: { label: 'first' } } },
        { op: 'projects.create', input: { project: { name: 'Nope' } } },
      ],
    };
    const res = await app.request('POST', '/api/batch', { token: writer, body: batch });
    expectScopeRefusal(res.status, res.body, res.headers.get('www-authenticate'), 'projects:write', 'batch');
    const trpc = await fetch(`${app.baseUrl}/trpc/batch.apply`, { method: 'POST', headers: { Authorization: writer, 'Content-Type': 'application/json' }, body: JSON.stringify({ json: batch }) });
    expect(trpc.status).toBe(403);
    const { rows } = await db.query('select count(*)::int as n from tasks where user_id = $1', [u.id]);
    expect(rows[0].n).toBe(0);
    // Within its scopes it runs; an unknown operation name is the batch's validation.
    const ok = await app.request('POST', '/api/batch', { token: writer, body: { operations: [batch.operations[0]] } });
    expect(ok.status, ok.text).toBe(200);
    expect((await app.request('POST', '/api/batch', { token: writer, body: { operations: [{ op: 'users.delete', input: {} }] } })).status).toBe(422);
  });

  it('the change log stream needs events:read, on REST (Accept: text/event-stream) and on tRPC (events.onChange)', async () => {
    const u = await app.register();
    // A first event, which an open tRPC stream from id 0 sends at once.
    expect((await app.request('POST', '/api/users/me/tasks', { token: u.token, body: { task: { label: 'an event' } } })).status).toBe(201);
    const reader = await tokenWith(u.token, ['tasks:read']);
    const events = await tokenWith(u.token, ['events:read']);
    const rest = `${app.baseUrl}/api/users/me/events`;
    const refused = await fetch(rest, { headers: { Accept: 'text/event-stream', Authorization: reader } });
    expectScopeRefusal(refused.status, await refused.json(), refused.headers.get('www-authenticate'), 'events:read', 'REST stream');
    const abort = new AbortController();
    const opened = await fetch(rest, { headers: { Accept: 'text/event-stream', Authorization: events }, signal: abort.signal });
    expect(opened.status).toBe(200);
    expect(opened.headers.get('content-type')).toMatch(/^text\/event-stream/);
    abort.abort();
    // tRPC answers a subscription's refusal inside its stream, as every refusal of one.
    const trpcRefused = await openTrpcStream(app.baseUrl, reader);
    trpcRefused.stream.close();
    expect(trpcRefused.refusal).toMatchObject({ data: { code: 'insufficient_scope', httpStatus: 403, meta: { required_scope: 'events:read' } } });
    const trpcOpened = await openTrpcStream(app.baseUrl, events);
    trpcOpened.stream.close();
    expect(trpcOpened.refusal).toBeNull();
  });
});
