/**
 * Personal access tokens (API-CONTRACT.md §16), on both doors, against the real database: made
 * with a secret shown once (`plnr_`, only its hash kept), listed with the sessions (newest
 * first, `current`), read, revoked (at once), expiring, bounded (50 live), minted by a personal
 * token only within its own scopes, and `lastUsedAt` written at most once a minute.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SCOPES } from '../../src/core/scopes.js';
import { AUTHORIZATION_RECHECK_MS } from '../../src/changes/event-feed.js';
import { eventually, withinDeadline } from '../helpers/eventually.js';
import { openStream } from '../helpers/sse.js';
import { expectError } from '../helpers/envelope.js';
import { trpcError } from '../helpers/hostile.js';
import { seconds, useTestAppWithSql } from '../helpers/test-app.js';

const { app, db } = useTestAppWithSql({ resetClock: true });
const TOKENS = '/api/users/me/tokens';
const DAY = 86_400;
const now = () => seconds(app.clock.now().getTime());

async function makeToken(token: string, scopes: string[], extra: Record<string, unknown> = {}) {
  const res = await app.request('POST', TOKENS, { token, body: { token: { name: `token of ${scopes.length} scopes`, scopes, expires_at: now() + 30 * DAY, ...extra } } });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.data.id as number, secret: res.body.meta.secret as string, body: res.body };
}

describe('making a personal access token', () => {
  it('answers 201 with the token and its secret, shown once, beginning plnr_, of which only the hash is kept', async () => {
    const u = await app.register();
    const expiresAt = now() + 90 * DAY;
    const res = await app.request('POST', TOKENS, { token: u.token, body: { token: { name: 'Calendar sync', scopes: ['tasks:read'], expires_at: expiresAt } } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({
      data: {
        type: 'token',
        id: expect.any(Number),
        attributes: { name: 'Calendar sync', kind: 'personal', scopes: ['tasks:read'], createdAt: now(), expiresAt, lastUsedAt: 0, current: false },
      },
      meta: { secret: expect.stringMatching(/^plnr_[A-Za-z0-9_-]{54}$/) },
    });
    const secret: string = res.body.meta.secret;
    const { rows } = await db.query('select * from access_tokens where user_id = $1 and id = $2', [u.id, res.body.data.id]);
    expect(rows).toHaveLength(1);
    expect(rows[0].token_hash).toBe(createHash('sha256').update(secret).digest('hex'));
    expect(JSON.stringify(rows[0])).not.toContain(secret.slice(5));
    // Shown once: no later answer carries it.
    const read = await app.request('GET', `/api/tokens/${res.body.data.id}`, { token: u.token });
    expect(read.text).not.toContain(secret.slice(5));
    // It works, as `Authorization: <secret>` and as Bearer.
    expect((await app.request('GET', '/api/users/me/tasks', { token: secret })).status).toBe(200);
    expect((await app.request('GET', '/api/users/me/tasks', { headers: { Authorization: `Bearer ${secret}` } })).status).toBe(200);
  });

  it('is made on /trpc too (tokens.create), with the same answer', async () => {
    const u = await app.register();
    const made = await app.trpc(u.token).tokens.create.mutate({ token: { name: 'Script', scopes: ['tasks:write', 'projects:read'], expires_at: now() + DAY } });
    expect(made.data.attributes).toMatchObject({ name: 'Script', kind: 'personal', scopes: ['tasks:write', 'projects:read'], current: false });
    expect(made.meta.secret).toMatch(/^plnr_/);
    const me = await app.trpc(made.meta.secret).tokens.current.query();
    expect(me.data).toMatchObject({ id: made.data.id, attributes: { current: true, kind: 'personal' } });
  });

  it('refuses a bad name, scope list or expiry with every error of the request, on both doors', async () => {
    const u = await app.register();
    const send = (token: unknown) => app.request('POST', TOKENS, { token: u.token, body: { token } });
    const good = { name: 'ok', scopes: ['tasks:read' as const], expires_at: now() + DAY };
    expectError(await app.request('POST', TOKENS, { token: u.token, body: {} }), 422, 'parameter_missing', { pointer: '/token' });
    expectError(await send({ ...good, name: undefined }), 422, 'parameter_missing', { pointer: '/token/name' });
    expectError(await send({ ...good, name: '' }), 422, 'invalid', { pointer: '/token/name' });
    expectError(await send({ ...good, name: 'n'.repeat(101) }), 422, 'too_long', { pointer: '/token/name' });
    expect((await send({ ...good, name: 'é'.repeat(100) })).status).toBe(201);
    expectError(await send({ ...good, scopes: undefined }), 422, 'parameter_missing', { pointer: '/token/scopes' });
    expect((await send({ ...good, scopes: [] })).body.errors[0]).toMatchObject({ status: '422', source: { pointer: '/token/scopes' } });
    expect((await send({ ...good, scopes: ['tasks:read', 'admin'] })).body.errors[0]).toMatchObject({ code: 'invalid', source: { pointer: '/token/scopes/1' } });
    expect((await send({ ...good, scopes: ['tasks:read', 'tasks:read'] })).body.errors[0]).toMatchObject({ code: 'invalid', source: { pointer: '/token/scopes/1' } });
    expect((await send({ ...good, scopes: 'tasks:read' })).body.errors[0]).toMatchObject({ code: 'invalid', source: { pointer: '/token/scopes' } });
    expectError(await send({ ...good, expires_at: undefined }), 422, 'parameter_missing', { pointer: '/token/expires_at' });
    for (const expiresAt of [now(), now() - 1, 0, now() + 366 * DAY + 1, '1767225600', 1.5, -1]) {
      expectError(await send({ ...good, expires_at: expiresAt }), 422, 'invalid', { pointer: '/token/expires_at' });
    }
    expect((await send({ ...good, expires_at: now() + 366 * DAY })).status).toBe(201);
    // Several faults: all of them.
    const many = await send({ name: '', scopes: ['nope'], expires_at: 'soon' });
    expect(many.body.errors.map((e: { source: { pointer: string } }) => e.source.pointer).sort()).toEqual(['/token/expires_at', '/token/name', '/token/scopes/0']);
    const trpc = await trpcError(app.trpc(u.token).tokens.create.mutate({ token: { ...good, scopes: ['tasks:read' as const], name: 'n'.repeat(101) } }));
    expect(trpc.errors).toEqual([expect.objectContaining({ code: 'too_long', source: { pointer: '/token/name' } })]);
    // An expiry of the right type but out of its range is reported beside the other faults, on both doors.
    const codes = (errors: Array<{ code: string; source: { pointer: string } }>) => errors.map((e) => [e.code, e.source.pointer]);
    for (const [token, expected] of [
      [{ ...good, name: '', expires_at: now() - 5 }, [['invalid', '/token/name'], ['invalid', '/token/expires_at']]],
      [{ ...good, name: 'n'.repeat(101), expires_at: now() + 400 * DAY }, [['too_long', '/token/name'], ['invalid', '/token/expires_at']]],
      [{ ...good, scopes: ['admin'], expires_at: now() }, [['invalid', '/token/scopes/0'], ['invalid', '/token/expires_at']]],
    ] as const) {
      const rest = await send(token);
      expect(rest.status, rest.text).toBe(422);
      expect(codes(rest.body.errors)).toEqual(expected);
      expect(codes((await trpcError(app.trpc(u.token).tokens.create.mutate({ token } as any))).errors)).toEqual(expected);
    }
  });

  it('allows 50 live personal tokens per user, then 422 limit_reached on /token; a revoked or expired one makes room', async () => {
    const u = await app.register();
    const ids: number[] = [];
    for (let i = 0; i < 50; i++) ids.push((await makeToken(u.token, ['tasks:read'])).id);
    const refused = await app.request('POST', TOKENS, { token: u.token, body: { token: { name: 'one more', scopes: ['tasks:read'], expires_at: now() + DAY } } });
    expectError(refused, 422, 'limit_reached', { pointer: '/token' });
    const trpc = await trpcError(app.trpc(u.token).tokens.create.mutate({ token: { name: 'one more', scopes: ['tasks:read'], expires_at: now() + DAY } }));
    expect(trpc.errors[0]).toMatchObject({ code: 'limit_reached', source: { pointer: '/token' } });
    // Sessions do not count: logging in again still works, and still leaves no room.
    expect((await app.request('POST', '/api/users/authorizations', { body: { username: u.username, password: 'correct horse' } })).status).toBe(201);
    expect((await app.request('DELETE', `/api/tokens/${ids[0]}`, { token: u.token })).status).toBe(204);
    await makeToken(u.token, ['tasks:read']);
    expectError(await app.request('POST', TOKENS, { token: u.token, body: { token: { name: 'x', scopes: ['tasks:read'], expires_at: now() + DAY } } }), 422, 'limit_reached', { pointer: '/token' });
    const { rows } = await db.query(`select count(*)::int as n from access_tokens where user_id = $1 and kind = 'personal'`, [u.id]);
    expect(rows[0].n).toBe(50);
  });

  it('counts concurrent creations against each other: never more than 50', async () => {
    const u = await app.register();
    for (let i = 0; i < 45; i++) await makeToken(u.token, ['tasks:read']);
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => app.request('POST', TOKENS, { token: u.token, body: { token: { name: `race ${i}`, scopes: ['tasks:read'], expires_at: now() + DAY } } })),
    );
    expect(answers.filter((a) => a.status === 201)).toHaveLength(5);
    expect(answers.filter((a) => a.status === 422)).toHaveLength(7);
    const { rows } = await db.query(`select count(*)::int as n from access_tokens where user_id = $1 and kind = 'personal'`, [u.id]);
    expect(rows[0].n).toBe(50);
  });
});

describe('minting: what a token may give', () => {
  it('a session gives any scope; a personal token only what it has, never tokens:manage or account (403)', async () => {
    const u = await app.register();
    const all = await makeToken(u.token, [...SCOPES]);
    expect(all.body.data.attributes.scopes).toEqual([...SCOPES]);
    const manager = await makeToken(u.token, ['tokens:manage', 'tasks:write', 'projects:read']);
    // Within its scopes, and :read under its :write.
    const child = await makeToken(manager.secret, ['tasks:read', 'tasks:write', 'projects:read']);
    expect(child.body.data.attributes.scopes).toEqual(['tasks:read', 'tasks:write', 'projects:read']);
    for (const [scopes, missing] of [
      [['tokens:manage'], 'tokens:manage'],
      [['tasks:read', 'account'], 'account'],
      [['projects:write'], 'projects:write'],
      [['events:read'], 'events:read'],
    ] as const) {
      const res = await app.request('POST', TOKENS, { token: manager.secret, body: { token: { name: 'more', scopes, expires_at: now() + DAY } } });
      expect(res.status, res.text).toBe(403);
      expect(res.body).toMatchObject({ errors: [{ status: '403', code: 'insufficient_scope' }], meta: { required_scope: missing } });
      expect(res.headers.get('www-authenticate')).toBe(`Bearer error="insufficient_scope", scope="${missing}"`);
    }
    const trpc = await trpcError(app.trpc(manager.secret).tokens.create.mutate({ token: { name: 'more', scopes: ['account'], expires_at: now() + DAY } }));
    expect(trpc).toMatchObject({ httpStatus: 403, code: 'insufficient_scope', meta: { required_scope: 'account' } });
    // A personal token with every scope still cannot give the session-only ones.
    const res = await app.request('POST', TOKENS, { token: all.secret, body: { token: { name: 'x', scopes: ['account'], expires_at: now() + DAY } } });
    expect(res.body.meta).toEqual({ required_scope: 'account' });
  });
});

describe('the tokens of a user', () => {
  it('lists the live ones, sessions included, newest first, with current, in pages of 50 with links', async () => {
    const u = await app.register();
    const login = await app.request('POST', '/api/users/authorizations', { body: { username: u.username, password: 'correct horse' } });
    const a = await makeToken(u.token, ['tasks:read']);
    const b = await makeToken(u.token, ['projects:read', 'events:read']);
    const res = await app.request('GET', TOKENS, { token: u.token });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.map((t: { id: number }) => t.id)).toEqual([b.id, a.id, expect.any(Number), expect.any(Number)]);
    const session = res.body.data[3];
    // A session is used by the login that makes it.
    expect(res.body.data[2].attributes).toMatchObject({ kind: 'session', current: false, lastUsedAt: now() });
    expect(login.status).toBe(201);
    expect(session.attributes).toEqual({ name: null, kind: 'session', scopes: [...SCOPES], createdAt: expect.any(Number), expiresAt: expect.any(Number), lastUsedAt: now(), current: true });
    expect(res.body.data[0].attributes.current).toBe(false);
    expect(res.body.links).toEqual({ first: `${app.baseUrl}${TOKENS}?page=1`, last: `${app.baseUrl}${TOKENS}?page=1` });
    // The same on /trpc.
    const viaTrpc = await app.trpc(u.token).tokens.list.query();
    expect(viaTrpc.data).toEqual(res.body.data);
    for (let i = 0; i < 48; i++) await makeToken(u.token, ['tasks:read']);
    const page1 = await app.request('GET', `${TOKENS}?page=1`, { token: u.token });
    expect(page1.body.data).toHaveLength(50);
    expect(page1.body.data.at(-1).id).toBe(a.id);
    expect(page1.body.links).toEqual({ first: `${app.baseUrl}${TOKENS}?page=1`, last: `${app.baseUrl}${TOKENS}?page=2`, next: `${app.baseUrl}${TOKENS}?page=2` });
    const page2 = await app.request('GET', `${TOKENS}?page=2`, { token: u.token });
    expect(page2.body.data.map((t: { id: number }) => t.id)).toEqual([res.body.data[2].id, session.id]);
    expect((await app.request('GET', `${TOKENS}?page=3`, { token: u.token })).body.data).toEqual([]);
    expectError(await app.request('GET', `${TOKENS}?page=0`, { token: u.token }), 400, 'invalid', { parameter: 'page' });
  });

  it('reads one by id and the one in use; another user\'s, an unknown, a revoked or an expired id is 404 record_not_found on /token', async () => {
    const u = await app.register();
    const v = await app.register();
    const mine = await makeToken(u.token, ['tasks:read'], { expires_at: now() + 3600 });
    const theirs = await makeToken(v.token, ['tasks:read']);
    const got = await app.request('GET', `/api/tokens/${mine.id}`, { token: u.token });
    expect(got.body).toEqual({ data: mine.body.data });
    const current = await app.request('GET', `${TOKENS}/current`, { token: mine.secret });
    expect(current.body.data).toMatchObject({ id: mine.id, attributes: { current: true, lastUsedAt: now() } });
    for (const id of [theirs.id, 999_999_999]) {
      expectError(await app.request('GET', `/api/tokens/${id}`, { token: u.token }), 404, 'record_not_found', { pointer: '/token' });
      expectError(await app.request('DELETE', `/api/tokens/${id}`, { token: u.token }), 404, 'record_not_found', { pointer: '/token' });
    }
    expectError(await app.request('GET', '/api/tokens/abc', { token: u.token }), 404, 'record_not_found', { pointer: '/token' });
    // The other user's token was not touched.
    expect((await app.request('GET', '/api/users/me', { token: theirs.secret })).status).toBe(200);
    app.clock.advance(3601);
    expectError(await app.request('GET', `/api/tokens/${mine.id}`, { token: u.token }), 404, 'record_not_found', { pointer: '/token' });
  });

  it('revokes one by id: it stops working at once, the others stay', async () => {
    const u = await app.register();
    const a = await makeToken(u.token, ['tasks:read']);
    const b = await makeToken(u.token, ['tasks:read']);
    expect((await app.request('DELETE', `/api/tokens/${a.id}`, { token: u.token })).status).toBe(204);
    expectError(await app.request('GET', '/api/users/me/tasks', { token: a.secret }), 401, 'unauthorized');
    expect((await app.request('GET', '/api/users/me/tasks', { token: b.secret })).status).toBe(200);
    await app.trpc(u.token).tokens.revoke.mutate({ id: b.id });
    expectError(await app.request('GET', '/api/users/me/tasks', { token: b.secret }), 401, 'unauthorized');
    expect((await app.request('GET', TOKENS, { token: u.token })).body.data.map((t: { id: number }) => t.id)).not.toContain(a.id);
    // A token may revoke itself only with tokens:manage; logging out (users.revoke) needs none.
    const c = await makeToken(u.token, ['tasks:read']);
    expect((await app.request('DELETE', `/api/tokens/${c.id}`, { token: c.secret })).status).toBe(403);
    expect((await app.request('DELETE', '/api/users/me/authorizations/current', { token: c.secret })).status).toBe(204);
    expectError(await app.request('GET', '/api/users/me/tasks', { token: c.secret }), 401, 'unauthorized');
  });

  it('a revocation retried with its Idempotency-Key replays its 204 (without one it is 404); a bad key is 422', async () => {
    const u = await app.register();
    const a = await makeToken(u.token, ['tasks:read']);
    const key = { 'Idempotency-Key': `revoke-${a.id}` };
    expect((await app.request('DELETE', `/api/tokens/${a.id}`, { token: u.token, headers: key })).status).toBe(204);
    const again = await app.request('DELETE', `/api/tokens/${a.id}`, { token: u.token, headers: key });
    expect([again.status, again.text, again.headers.get('idempotent-replayed')]).toEqual([204, '', 'true']);
    expectError(await app.request('DELETE', `/api/tokens/${a.id}`, { token: u.token }), 404, 'record_not_found', { pointer: '/token' });
    const b = await makeToken(u.token, ['tasks:read']);
    expectError(await app.request('DELETE', `/api/tokens/${b.id}`, { token: u.token, headers: { 'Idempotency-Key': 'k'.repeat(256) } }), 422, 'invalid', { parameter: 'Idempotency-Key' });
    expect((await app.request('GET', '/api/users/me/tasks', { token: b.secret })).status).toBe(200);
  });

  it('a creation retried with its Idempotency-Key answers the token it made, secret included, on either door; one token is made; a bad key is 422', async () => {
    const u = await app.register();
    const body = { token: { name: 'retried', scopes: ['tasks:read'], expires_at: now() + DAY } };
    const key = { 'Idempotency-Key': `create-${u.id}` };
    const first = await app.request('POST', TOKENS, { token: u.token, body, headers: key });
    expect(first.status, first.text).toBe(201);
    const again = await app.request('POST', TOKENS, { token: u.token, body, headers: key });
    expect([again.status, again.text, again.headers.get('idempotent-replayed')]).toEqual([201, first.text, 'true']);
    const typed = await app.trpc(u.token).tokens.create.mutate(body as never, { context: { headers: key } });
    expect(typed).toEqual(first.body);
    expect((await app.request('GET', '/api/users/me/tasks', { token: first.body.meta.secret })).status).toBe(200);
    const named = await db.query("select count(*)::int as n from access_tokens where user_id = $1 and name = 'retried'", [u.id]);
    expect(named.rows[0].n).toBe(1);
    expectError(await app.request('POST', TOKENS, { token: u.token, body: { token: { ...body.token, name: 'other' } }, headers: key }), 422, 'idempotency_key_reused', { parameter: 'Idempotency-Key' });
    expectError(await app.request('POST', TOKENS, { token: u.token, body, headers: { 'Idempotency-Key': 'k'.repeat(256) } }), 422, 'invalid', { parameter: 'Idempotency-Key' });
    // Kept under the key too: the refusal of the 51st live token, which the work decided.
    await db.query("insert into access_tokens (token_hash, user_id, created_at, expires_at, kind, name, scopes) select md5(random()::text) || g, $1, to_timestamp($2), to_timestamp($2 + 86400), 'personal', 'filler', '{tasks:read}' from generate_series(1, 49) g", [u.id, now()]);
    const full = await app.request('POST', TOKENS, { token: u.token, body: { token: { ...body.token, name: 'one too many' } }, headers: { 'Idempotency-Key': `full-${u.id}` } });
    expectError(full, 422, 'limit_reached', { pointer: '/token' });
    const fullAgain = await app.request('POST', TOKENS, { token: u.token, body: { token: { ...body.token, name: 'one too many' } }, headers: { 'Idempotency-Key': `full-${u.id}` } });
    expect([fullAgain.status, fullAgain.text, fullAgain.headers.get('idempotent-replayed')]).toEqual([422, full.text, 'true']);
  });

  it('a keyed creation is replayed after its short expiry has passed, but never to a token that could not make it', async () => {
    const u = await app.register();
    const body = { token: { name: 'brief', scopes: ['tasks:write'], expires_at: now() + 60 } };
    const key = { 'Idempotency-Key': `brief-${u.id}` };
    const first = await app.request('POST', TOKENS, { token: u.token, body, headers: key });
    expect(first.status, first.text).toBe(201);
    app.clock.advance(120);
    const again = await app.request('POST', TOKENS, { token: u.token, body, headers: key });
    expect([again.status, again.text, again.headers.get('idempotent-replayed')]).toEqual([201, first.text, 'true']);
    // A personal token of the same user with fewer scopes (it may make tokens, not of tasks:write) gets no secret.
    const lesser = await makeToken(u.token, ['tasks:read', 'tokens:manage']);
    const refused = await app.request('POST', TOKENS, { token: lesser.secret, body, headers: key });
    expect([refused.status, refused.body.errors[0].code, refused.body.meta, refused.headers.get('idempotent-replayed')]).toEqual([403, 'insufficient_scope', { required_scope: 'tasks:write' }, null]);
    // Without the key, the same request is held to the clock: its expiry has passed.
    expectError(await app.request('POST', TOKENS, { token: u.token, body }), 422, 'invalid', { pointer: '/token/expires_at' });
  });

  it('a personal token expires at its expires_at', async () => {
    const u = await app.register();
    const t = await makeToken(u.token, ['tasks:read'], { expires_at: now() + 120 });
    expect((await app.request('GET', '/api/users/me/tasks', { token: t.secret })).status).toBe(200);
    app.clock.advance(119);
    expect((await app.request('GET', '/api/users/me/tasks', { token: t.secret })).status).toBe(200);
    app.clock.advance(1);
    expectError(await app.request('GET', '/api/users/me/tasks', { token: t.secret }), 401, 'unauthorized');
    await expect(app.trpc(t.secret).tasks.list.query()).rejects.toMatchObject({ data: { httpStatus: 401 } });
  });

  it('a busy event stream of a personal token ends with an error within 5 s of its expiry, events flowing all along', async () => {
    const u = await app.register();
    const t = await makeToken(u.token, ['events:read'], { expires_at: now() + 120 });
    const stream = await openStream(`${app.baseUrl}/api/users/me/events`, { Authorization: t.secret });
    expect(stream.status).toBe(200);
    let writing = true;
    // The user keeps writing with the session (paced as a person typing; nothing waits on it).
    const writer = (async () => {
      while (writing) {
        await app.request('POST', '/api/users/me/tasks', { token: u.token, body: { task: { label: 'busy' } } });
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    try {
      expect((await stream.nextEvent()).event).toBe('task.created');
      app.clock.advance(120);
      // Events of writes before the next check may still come; the stream must end with the error.
      const last = await withinDeadline(
        AUTHORIZATION_RECHECK_MS + 2_000,
        'the stream of an expired token kept delivering',
        (async () => {
          for (;;) {
            const message = await stream.nextEvent();
            if (message.event === 'error') return message;
          }
        })(),
      );
      expect(JSON.parse(last.data).errors[0].code).toBe('unauthorized');
      await stream.ended;
    } finally {
      writing = false;
      await writer;
    }
  });

  it('a stream of a personal token sends no event from its expiry on: the next one is the error, on both doors', async () => {
    const u = await app.register();
    const t = await makeToken(u.token, ['events:read'], { expires_at: now() + 120 });
    const stream = await openStream(`${app.baseUrl}/api/users/me/events`, { Authorization: t.secret });
    expect(stream.status).toBe(200);
    const events: Array<{ type: string }> = [];
    const subscription = app.trpc(t.secret).events.onChange.subscribe({ lastEventId: '0' }, {
      onData: (event: { data: { type: string } }) => events.push(event.data),
      onError: (error: unknown) => events.push({ type: `error ${(error as { data?: { code?: string } }).data?.code}` }),
    });
    try {
      expect((await app.request('POST', '/api/users/me/tasks', { token: u.token, body: { task: { label: 'before' } } })).status).toBe(201);
      expect((await stream.nextEvent()).event).toBe('task.created');
      await eventually(() => events.length === 1);
      app.clock.advance(120);
      expect((await app.request('POST', '/api/users/me/tasks', { token: u.token, body: { task: { label: 'after' } } })).status).toBe(201);
      const next = await stream.nextEvent();
      expect(next.event).toBe('error');
      expect(JSON.parse(next.data).errors[0].code).toBe('unauthorized');
      await stream.ended;
      await eventually(() => events.length === 2);
      expect(events.map((e) => e.type)).toEqual(['task.created', 'error unauthorized']);
    } finally {
      subscription.unsubscribe();
    }
  });

  it('lastUsedAt: 0 until used, then the time of a use, written at most once a minute', async () => {
    const u = await app.register();
    const t = await makeToken(u.token, ['tasks:read']);
    const lastUsed = async () => (await app.request('GET', `/api/tokens/${t.id}`, { token: u.token })).body.data.attributes.lastUsedAt;
    // Counted by a trigger of this test's own (the service has none): every UPDATE of the token's row.
    await db.query(`create table if not exists token_row_updates (id bigint)`);
    await db.query(`create or replace function count_token_update() returns trigger language plpgsql as $$
      begin insert into token_row_updates values (new.id); return new; end $$`);
    await db.query(`create or replace trigger count_token_update after update on access_tokens for each row execute function count_token_update()`);
    const writes = async () => (await db.query('select count(*)::int as n from token_row_updates where id = $1', [t.id])).rows[0].n;
    expect(await lastUsed()).toBe(0);
    const used = now();
    await app.request('GET', '/api/users/me/tasks', { token: t.secret });
    expect(await lastUsed()).toBe(used);
    app.clock.advance(59);
    for (let i = 0; i < 5; i++) await app.request('GET', '/api/users/me/tasks', { token: t.secret });
    expect(await lastUsed()).toBe(used);
    app.clock.advance(1);
    await app.request('GET', '/api/users/me/tasks', { token: t.secret });
    expect(await lastUsed()).toBe(used + 60);
    // The database's own count of updated rows: ten requests within a minute write the row once.
    app.clock.advance(60);
    const before = await writes();
    await Promise.all(Array.from({ length: 10 }, () => app.request('GET', '/api/users/me/tasks', { token: t.secret })));
    expect((await writes()) - before).toBe(1);
    expect(await lastUsed()).toBe(used + 120);
    await db.query('drop trigger count_token_update on access_tokens');
  });
});
