/**
 * The account (API-CONTRACT.md §16, "The account"): changing the password and deleting the
 * account, on both doors (REST and the typed tRPC client), against the real database.
 *
 * - Password: the new one logs in and the old one no longer does; the token of the request and
 *   personal tokens keep working, every other session token is 401 and its open event stream
 *   ends; a login that checked the old password while the change was under way makes no
 *   session; a wrong current password, a new one out of §3's bounds, missing members; attempts
 *   counted against the login's rate limit.
 * - Deletion: a wrong password changes nothing; after the 204 no row of the user is left in
 *   any table, read from PostgreSQL's catalogue (every table of the schema with a `user_id`,
 *   and `users.id`), so a table added later is held to it at once; another user's rows are
 *   untouched; the token is 401, the open stream ends, the name can be registered again.
 * - Hostile: a deletion among 30 writes of the same user sent at once; a deletion while a
 *   webhook request of the user is under way (a slow name resolution, then a slow receiver).
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { createLogger } from '../../src/core/logger.js';
import { hashAccessToken, hashPassword, newAccessToken } from '../../src/users/credentials.js';
import { WebhookDeliverer } from '../../src/webhooks/deliverer.js';
import { eventually, withinDeadline } from '../helpers/eventually.js';
import { openStream } from '../helpers/sse.js';
import { T0, onlyError, seconds, startTestAppWithSql, useTestAppWithSql, type TestApp } from '../helpers/test-app.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

const { app, db } = useTestAppWithSql({ eventsIdleMs: 200 });

type Door = 'rest' | 'trpc';
const DOORS: Door[] = ['rest', 'trpc'];

/** An answer of either door as status and error list (tRPC's `data.errors` is the envelope's `errors`). */
interface Answer {
  status: number;
  errors?: Array<Record<string, any>>;
  text?: string;
  retryAfter?: string | null;
}

async function viaTrpc(run: () => Promise<unknown>): Promise<Answer> {
  try {
    await run();
    return { status: 204 };
  } catch (error: any) {
    if (!error?.data?.httpStatus) throw error;
    return { status: error.data.httpStatus, errors: error.data.errors };
  }
}

function changePassword(a: TestApp, door: Door, token: string | undefined, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  if (door === 'trpc') return viaTrpc(() => a.trpc(token).users.changePassword.mutate(body as any));
  return a.request('PUT', '/api/users/me/password', { token, body, headers })
    .then((r) => ({ status: r.status, errors: r.body?.errors, text: r.text, retryAfter: r.headers.get('retry-after') }));
}

function deleteAccount(a: TestApp, door: Door, token: string | undefined, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  if (door === 'trpc') return viaTrpc(() => a.trpc(token).users.delete.mutate(body as any));
  return a.request('POST', '/api/users/me/deletion', { token, body, headers })
    .then((r) => ({ status: r.status, errors: r.body?.errors, text: r.text, retryAfter: r.headers.get('retry-after') }));
}

const login = (a: TestApp, username: string, password: string, headers: Record<string, string> = {}) =>
  a.request('POST', '/api/users/authorizations', { body: { username, password }, headers });

const me = (a: TestApp, token: string) => a.request('GET', '/api/users/me', { token }).then((r) => r.status);

/** A personal access token of the user, written as its row (the token routes of §16 are built elsewhere). */
async function personalToken(sql: pg.Client, userId: number): Promise<string> {
  const token = newAccessToken(userId);
  await sql.query(
    `insert into access_tokens (user_id, token_hash, created_at, expires_at, kind, name, scopes)
     values ($1, $2, $3, $4, 'personal', 'Calendar sync', '{tasks:read}')`,
    [userId, hashAccessToken(token), new Date(T0), new Date(T0 + 30 * 86_400_000)],
  );
  return token;
}

describe('PUT /api/users/me/password', () => {
  it.each(DOORS)('%s: 204; the new password logs in, the old one no longer; this token and personal ones stay, other sessions end', async (door) => {
    const user = await app.register();
    const other = await login(app, user.username, 'correct horse');
    expect(other.status).toBe(201);
    const otherToken: string = other.body.meta.token;
    const personal = await personalToken(db, user.id);
    const stream = await openStream(`${app.baseUrl}/api/users/me/events?after=0`, { Authorization: otherToken });
    expect(stream.status).toBe(200);

    const res = await changePassword(app, door, user.token, { user: { current_password: 'correct horse', password: 'battery staple' } });
    expect(res).toMatchObject({ status: 204 });
    if (door === 'rest') expect(res.text).toBe('');

    expect((await login(app, user.username, 'correct horse')).status).toBe(401);
    expect((await login(app, user.username, 'battery staple')).status).toBe(201);
    expect(await me(app, user.token)).toBe(200);
    expect(await me(app, otherToken)).toBe(401);
    expect(await me(app, personal)).toBe(200);
    await withinDeadline(5_000, 'the revoked session\'s stream ends', stream.ended);
    const kinds = await db.query(`select kind, count(*)::int as n from access_tokens where user_id = $1 group by kind order by kind`, [user.id]);
    // This token, the login just made with the new password, and the personal one.
    expect(kinds.rows).toEqual([{ kind: 'personal', n: 1 }, { kind: 'session', n: 2 }]);
  });

  it('a login that checked the old password while a change was under way makes no session once the change commits', async () => {
    const user = await app.register();
    const newHash = await hashPassword('battery staple', 1024);
    // The change of password as changePassword writes it, held open: the user's row updated
    // and the other sessions deleted, not yet committed.
    await db.query('begin');
    let open = true;
    try {
      await db.query('update users set password_hash = $1 where id = $2', [newHash, user.id]);
      await db.query(`delete from access_tokens where user_id = $1 and kind = 'session' and token_hash <> $2`, [user.id, hashAccessToken(user.token)]);
      // The login reads the committed (old) password and checks it, then would make its session.
      const during = login(app, user.username, 'correct horse');
      const early = await Promise.race([during.then(() => 'answered'), new Promise((resolve) => setTimeout(() => resolve('waiting'), 500))]);
      expect(early, 'the login waits for the change under way').toBe('waiting');
      await db.query('commit');
      open = false;
      const res = await during;
      expect(res.status, res.text).toBe(401);
      expect(onlyError(res.body)).toMatchObject({ code: 'login_failed' });
    } finally {
      if (open) await db.query('rollback');
    }
    // Only the session of the change's request is left, and the new password logs in.
    const sessions = await db.query(`select count(*)::int as n from access_tokens where user_id = $1 and kind = 'session'`, [user.id]);
    expect(sessions.rows[0].n).toBe(1);
    expect((await login(app, user.username, 'battery staple')).status).toBe(201);
  });

  it('a change retried with its Idempotency-Key replays its 204; retried without one, the old password is wrong', async () => {
    const user = await app.register();
    const body = { user: { current_password: 'correct horse', password: 'battery staple' } };
    const key = { 'Idempotency-Key': `password-${user.id}` };
    expect(await changePassword(app, 'rest', user.token, body, key)).toMatchObject({ status: 204 });
    const again = await app.request('PUT', '/api/users/me/password', { token: user.token, body, headers: key });
    expect([again.status, again.text, again.headers.get('idempotent-replayed')]).toEqual([204, '', 'true']);
    const unkeyed = await changePassword(app, 'rest', user.token, body);
    expect(onlyError(unkeyed as any)).toMatchObject({ status: '422', code: 'invalid', source: { pointer: '/user/current_password' } });
    expect((await login(app, user.username, 'battery staple')).status).toBe(201);
    // The same key with another request is refused.
    const reused = await changePassword(app, 'rest', user.token, { user: { current_password: 'battery staple', password: 'correct horse' } }, key);
    expect(onlyError(reused as any)).toMatchObject({ status: '422', code: 'idempotency_key_reused' });
  });

  it.each(DOORS)('%s: a wrong current password is 422 invalid on /user/current_password and changes nothing', async (door) => {
    const user = await app.register();
    const other = (await login(app, user.username, 'correct horse')).body.meta.token as string;
    const res = await changePassword(app, door, user.token, { user: { current_password: 'wrong horse', password: 'battery staple' } });
    expect(res.status).toBe(422);
    expect(onlyError(res as any)).toMatchObject({ status: '422', code: 'invalid', source: { pointer: '/user/current_password' } });
    expect((await login(app, user.username, 'correct horse')).status).toBe(201);
    expect((await login(app, user.username, 'battery staple')).status).toBe(401);
    expect(await me(app, other)).toBe(200);
  });

  it('a wrong current password keeps nothing under the Idempotency-Key, as a wrong password of a deletion: the right one with the same key runs', async () => {
    const door = 'rest';
    const user = await app.register();
    const key = { 'Idempotency-Key': `wrong-first-${door}-${user.id}` };
    const wrong = await changePassword(app, door, user.token, { user: { current_password: 'wrong horse', password: 'battery staple' } }, key);
    expect(onlyError(wrong as any)).toMatchObject({ status: '422', code: 'invalid', source: { pointer: '/user/current_password' } });
    expect(await changePassword(app, door, user.token, { user: { current_password: 'correct horse', password: 'battery staple' } }, key)).toMatchObject({ status: 204 });
    expect((await login(app, user.username, 'battery staple')).status).toBe(201);
  });

  it.each(DOORS)('%s: the new password follows §3 (too_short, too_long, counted in code points)', async (door) => {
    const user = await app.register();
    for (const [password, code] of [['short', 'too_short'], ['🔑🔑🔑🔑🔑🔑🔑', 'too_short'], ['p'.repeat(201), 'too_long']] as const) {
      const res = await changePassword(app, door, user.token, { user: { current_password: 'correct horse', password } });
      expect(res.status).toBe(422);
      expect(onlyError(res as any)).toMatchObject({ code, source: { pointer: '/user/password' } });
    }
    expect((await changePassword(app, door, user.token, { user: { current_password: 'correct horse', password: 'p'.repeat(200) } })).status).toBe(204);
    expect((await login(app, user.username, 'p'.repeat(200))).status).toBe(201);
  });

  it.each(DOORS)('%s: a wrong current password is reported beside a new one out of bounds; a right one is not', async (door) => {
    const user = await app.register();
    const faults = (answer: Answer) => (answer.errors ?? []).map((e) => `${e.code} ${e.source?.pointer}`).sort();
    const both = await changePassword(app, door, user.token, { user: { current_password: 'wrong horse', password: 'short' } });
    expect(both.status).toBe(422);
    expect(faults(both)).toEqual(['invalid /user/current_password', 'too_short /user/password']);
    const one = await changePassword(app, door, user.token, { user: { current_password: 'correct horse', password: 'short' } });
    expect(faults(one)).toEqual(['too_short /user/password']);
    expect((await login(app, user.username, 'correct horse')).status).toBe(201);
  });

  it.each(DOORS)('%s: a missing wrapper or member is parameter_missing; no token is 401', async (door) => {
    const user = await app.register();
    const noWrapper = await changePassword(app, door, user.token, { current_password: 'correct horse', password: 'battery staple' });
    expect(noWrapper.status).toBe(422);
    expect(onlyError(noWrapper as any)).toMatchObject({ code: 'parameter_missing', source: { pointer: '/user' } });
    const empty = await changePassword(app, door, user.token, { user: {} });
    expect(empty.status).toBe(422);
    expect(empty.errors!.map((e) => [e.code, e.source.pointer])).toEqual([
      ['parameter_missing', '/user/current_password'],
      ['parameter_missing', '/user/password'],
    ]);
    const anonymous = await changePassword(app, door, undefined, { user: { current_password: 'correct horse', password: 'battery staple' } });
    expect(anonymous.status).toBe(401);
    expect((await login(app, user.username, 'correct horse')).status).toBe(201);
  });
});

/** Every table of the schema with a `user_id` column, read from the catalogue, and how many rows of `userId` each holds (and `users` by its id). */
async function rowsOfUser(sql: pg.Client, userId: number): Promise<Record<string, number>> {
  const tables = await sql.query<{ table: string }>(
    `select c.table_name as "table" from information_schema.columns c
       join information_schema.tables t on t.table_schema = c.table_schema and t.table_name = c.table_name
      where c.table_schema = 'public' and c.column_name = 'user_id' and t.table_type = 'BASE TABLE'
      order by 1`,
  );
  const counts: Record<string, number> = {};
  for (const { table } of tables.rows) {
    const { rows } = await sql.query(`select count(*)::int as n from "${table}" where user_id = $1`, [userId]);
    counts[table] = rows[0].n;
  }
  const { rows } = await sql.query('select count(*)::int as n from users where id = $1', [userId]);
  counts['users.id'] = rows[0].n;
  return counts;
}

/** A user with rows in every table: projects, tasks, events, a webhook and its attempts, tokens, a keyed write, a stream ticket and lease. */
async function populated(a: TestApp, sql: pg.Client) {
  const user = await a.register();
  const second = (await login(a, user.username, 'correct horse')).body.meta.token as string;
  const personal = await personalToken(sql, user.id);
  const project = await a.request('POST', '/api/users/me/projects', { token: user.token, body: { project: { name: `plans-${user.id}` } } });
  expect(project.status, project.text).toBe(201);
  for (let i = 0; i < 3; i++) {
    const task = await a.request('POST', '/api/users/me/tasks', {
      token: user.token, body: { task: { label: `task ${i}`, project_id: project.body.data.id } }, headers: { 'Idempotency-Key': `key-${user.id}-${i}` },
    });
    expect(task.status, task.text).toBe(201);
  }
  const webhook = await a.request('POST', '/api/users/me/webhooks', { token: user.token, body: { webhook: { url: 'https://hooks.example.com/in' } } });
  expect(webhook.status, webhook.text).toBe(201);
  await sql.query(
    `insert into webhook_deliveries (user_id, webhook_id, event_id, event_type, attempt, at, outcome, http_status, error, duration_ms, next_attempt_at)
     values ($1, $2, '1', 'project.created', 1, now(), 'delivered', 204, null, 12, null)`,
    [user.id, webhook.body.data.id],
  );
  const ticket = await a.request('POST', '/api/users/me/events/tickets', { token: user.token, body: {} });
  expect(ticket.status, ticket.text).toBe(201);
  const stream = await openStream(`${a.baseUrl}/api/users/me/events?after=0`, { Authorization: second });
  expect(stream.status).toBe(200);
  await eventually(async () => (await rowsOfUser(sql, user.id)).event_stream_leases! > 0, { message: 'the stream took its lease' });
  return { ...user, second, personal, stream };
}

describe('POST /api/users/me/deletion', () => {
  it.each(DOORS)('%s: a wrong password is 422 invalid on /user/password and deletes nothing', async (door) => {
    const user = await app.register();
    const before = await rowsOfUser(db, user.id);
    const res = await deleteAccount(app, door, user.token, { user: { password: 'wrong horse' } });
    expect(res.status).toBe(422);
    expect(onlyError(res as any)).toMatchObject({ status: '422', code: 'invalid', source: { pointer: '/user/password' } });
    expect(await rowsOfUser(db, user.id)).toEqual(before);
    expect(await me(app, user.token)).toBe(200);
    const missing = await deleteAccount(app, door, user.token, { user: {} });
    expect(onlyError(missing as any)).toMatchObject({ code: 'parameter_missing', source: { pointer: '/user/password' } });
    const noWrapper = await deleteAccount(app, door, user.token, {});
    expect(onlyError(noWrapper as any)).toMatchObject({ code: 'parameter_missing', source: { pointer: '/user' } });
    expect((await deleteAccount(app, door, undefined, { user: { password: 'correct horse' } })).status).toBe(401);
  });

  it.each(DOORS)('%s: 204; no row of the user is left in any table, another user\'s stay; tokens 401, the stream ends, the name is free', async (door) => {
    const user = await populated(app, db);
    const bystander = await populated(app, db);
    const mine = await rowsOfUser(db, user.id);
    // Every table with a user_id holds rows of the user before (the scenario covers them all).
    for (const [table, n] of Object.entries(mine)) expect(n, table).toBeGreaterThan(0);
    const theirs = await rowsOfUser(db, bystander.id);

    const res = await deleteAccount(app, door, user.token, { user: { password: 'correct horse' } });
    expect(res).toMatchObject({ status: 204 });
    if (door === 'rest') expect(res.text).toBe('');

    const after = await rowsOfUser(db, user.id);
    expect(after).toEqual(Object.fromEntries(Object.keys(mine).map((table) => [table, 0])));
    expect(await rowsOfUser(db, bystander.id)).toEqual(theirs);
    for (const token of [user.token, user.second, user.personal]) expect(await me(app, token)).toBe(401);
    await withinDeadline(5_000, 'the deleted user\'s stream ends', user.stream.ended);
    expect((await login(app, user.username, 'correct horse')).status).toBe(401);
    const again = await app.request('POST', '/api/users', { body: { user: { username: user.username, password: 'a new life' } } });
    expect(again.status, again.text).toBe(201);
    expect(again.body.data.id).not.toBe(user.id);
    expect(await me(app, bystander.token)).toBe(200);
    bystander.stream.close();
  });
});

describe('attempts count against the login rate limit', () => {
  const LIMIT = 3;
  let limited: { app: TestApp; db: pg.Client };
  beforeAll(async () => {
    limited = await startTestAppWithSql({ trustProxy: true, rateLimits: { authPerMinute: LIMIT, perMinute: 100 }, clock: new ManualClock(T0) });
  });
  afterAll(async () => {
    await limited?.db.end();
    await limited?.app.close();
  });

  /** To the start of a minute that follows two quiet ones. */
  function quietMinute() {
    const now = seconds(limited.app.clock.now().getTime());
    limited.app.clock.advance(60 - (now % 60) + 120);
  }

  async function newUser(from: string) {
    const username = `limited${Math.floor(Math.random() * 1e9)}`;
    const res = await limited.app.request('POST', '/api/users', { body: { user: { username, password: 'correct horse' } }, headers: { 'X-Forwarded-For': from } });
    expect(res.status, res.text).toBe(201);
    return { username, token: res.body.meta.token as string };
  }

  it.each([
    ['changing the password', (door: Door, token: string, password: string, from: Record<string, string>) =>
      changePassword(limited.app, door, token, { user: { current_password: password, password: 'battery staple' } }, from)],
    ['deleting the account', (door: Door, token: string, password: string, from: Record<string, string>) =>
      deleteAccount(limited.app, door, token, { user: { password } }, from)],
  ])('%s: wrong passwords on both doors spend the user\'s login budget; then 429, also for a login', async (_what, attempt) => {
    const { username, token } = await newUser('192.0.2.1');
    quietMinute();
    // From three addresses (the tRPC client is 127.0.0.1): the user's budget is spent, not an address's.
    const answers = [
      await attempt('rest', token, 'guess 1', { 'X-Forwarded-For': '198.51.100.1' }),
      await attempt('trpc', token, 'guess 2', {}),
      await attempt('rest', token, 'guess 3', { 'X-Forwarded-For': '198.51.100.2' }),
    ];
    expect(answers.map((a) => a.status)).toEqual([422, 422, 422]);
    const refused = await attempt('rest', token, 'correct horse', { 'X-Forwarded-For': '198.51.100.3' });
    expect(refused.status).toBe(429);
    expect(onlyError(refused as any)).toMatchObject({ code: 'rate_limited' });
    expect(refused.retryAfter).toMatch(/^[1-9][0-9]*$/);
    const trpcRefused = await attempt('trpc', token, 'correct horse', {});
    expect(trpcRefused.status).toBe(429);
    expect((await login(limited.app, username, 'correct horse', { 'X-Forwarded-For': '198.51.100.4' })).status).toBe(429);
    // Nothing was changed or deleted meanwhile.
    expect(await me(limited.app, token)).toBe(200);
    // Another user's budget is their own.
    const other = await newUser('192.0.2.2');
    expect((await attempt('rest', other.token, 'guess', { 'X-Forwarded-For': '198.51.100.5' })).status).toBe(422);
  });
});

describe('hostile', () => {
  it.each(DOORS)('%s: a deletion among 30 task creations of the same user sent at once: no 500, nothing of the user left, nothing written after', async (door) => {
    const user = await app.register();
    const project = await app.request('POST', '/api/users/me/projects', { token: user.token, body: { project: { name: 'racing' } } });
    expect(project.status).toBe(201);
    const create = (i: number) =>
      app.request('POST', '/api/users/me/tasks', { token: user.token, body: { task: { label: `race ${i}`, project_id: project.body.data.id } } });
    const writes: Array<Promise<{ status: number; text: string }>> = [];
    for (let i = 0; i < 15; i++) writes.push(create(i));
    const deletion = deleteAccount(app, door, user.token, { user: { password: 'correct horse' } });
    for (let i = 15; i < 30; i++) writes.push(create(i));
    const deleted = await deletion;
    expect(deleted.status).toBe(204);
    // Sent after the deletion was answered: refused, whatever the door.
    const late = await create(99);
    expect(late.status).toBe(401);
    const answers = await Promise.all(writes);
    for (const a of answers) expect([201, 401], a.text).toContain(a.status);
    // Whatever was answered 201 committed before the deletion (a write after it finds no user,
    // and no row of the user can be written once it is gone): none of its rows is left.
    expect(Object.values(await rowsOfUser(db, user.id)).every((n) => n === 0)).toBe(true);
    const { rows } = await db.query(`select count(*)::int as n from tasks where label like 'race %' and user_id = $1`, [user.id]);
    expect(rows[0].n).toBe(0);
  });
});

describe('a webhook request under way when the account is deleted', () => {
  let deliverer: WebhookDeliverer | undefined;
  let receiver: Receiver;
  /** Name resolutions of `slow.test` wait for this, once it is set. */
  let resolveGate: Promise<void> | undefined;
  let resolving: (() => void) | undefined;
  const { app: hooked, db: hookedDb } = useTestAppWithSql({
    webhooks: { allowPrivateUrls: true, resolve: async () => [{ address: '127.0.0.1', family: 4 }], wake: (userId) => deliverer?.wake(userId) },
  });

  beforeAll(async () => {
    receiver = await startReceiver();
    deliverer = new WebhookDeliverer({
      em: () => hooked.orm.em.fork(),
      notifications: { watch: async () => () => undefined },
      config: { retrySchedule: [3_600], timeoutMs: 5_000, allowPrivateUrls: true },
      log: createLogger('silent'),
      pollMs: 3_600_000,
      now: () => hooked.clock.now().getTime(),
      resolve: async () => {
        resolving?.();
        if (resolveGate) await resolveGate;
        return [{ address: '127.0.0.1', family: 4 }];
      },
    });
    await deliverer.start();
  });
  afterAll(async () => {
    await deliverer?.stop();
    await receiver?.close();
  });

  async function userWithWebhookAndEvents(path: string, events: number) {
    const user = await hooked.register();
    const hook = await hooked.request('POST', '/api/users/me/webhooks', { token: user.token, body: { webhook: { url: `http://slow.test:${receiver.port}${path}` } } });
    expect(hook.status, hook.text).toBe(201);
    for (let i = 0; i < events; i++) {
      expect((await hooked.request('POST', '/api/users/me/projects', { token: user.token, body: { project: { name: `p${i}` } } })).status).toBe(201);
    }
    return user;
  }

  /** A later user's delivery: the deliverer has gone on working since. */
  async function barrier(path: string) {
    resolveGate = undefined;
    resolving = undefined;
    const later = await userWithWebhookAndEvents(path, 1);
    deliverer!.wake(later.id);
    await eventually(() => receiver.received.some((r) => r.path === path), { message: 'a later user\'s event was delivered' });
  }

  it.each(DOORS)('%s: while its address is being resolved: the deletion waits for the request, and none is sent after the 204', async (door) => {
    const path = `/resolving-${door}`;
    const user = await userWithWebhookAndEvents(path, 5);
    let open!: () => void;
    resolveGate = new Promise<void>((resolve) => (open = resolve));
    const started = new Promise<void>((resolve) => (resolving = resolve));
    deliverer!.wake(user.id);
    await started;
    const deletion = deleteAccount(hooked, door, user.token, { user: { password: 'correct horse' } });
    // The resolution ends a while after the deletion was asked for.
    setTimeout(open, 300);
    const res = await deletion;
    const answeredAt = Date.now();
    expect(res.status).toBe(204);
    await barrier(`${path}-later`);
    const mine = receiver.received.filter((r) => r.path === path);
    // The request under way went out before the answer (the deletion waited for it), and nothing after.
    expect(mine.length).toBeGreaterThanOrEqual(1);
    for (const r of mine) expect(r.arrivedAt).toBeLessThanOrEqual(answeredAt);
    expect(Object.values(await rowsOfUser(hookedDb, user.id)).every((n) => n === 0)).toBe(true);
  });

  it.each(DOORS)('%s: with a slow receiver: no request reaches it after the 204', async (door) => {
    const path = `/slow-${door}`;
    receiver.respond((request, res) => {
      setTimeout(() => res.writeHead(204).end(), request.path === path ? 250 : 0);
    });
    const user = await userWithWebhookAndEvents(path, 6);
    deliverer!.wake(user.id);
    await eventually(() => receiver.received.filter((r) => r.path === path).length >= 2, { message: 'deliveries under way' });
    const res = await deleteAccount(hooked, door, user.token, { user: { password: 'correct horse' } });
    const answeredAt = Date.now();
    expect(res.status).toBe(204);
    await barrier(`${path}-later`);
    const mine = receiver.received.filter((r) => r.path === path);
    expect(mine.length).toBeLessThan(6);
    for (const r of mine) expect(r.arrivedAt).toBeLessThanOrEqual(answeredAt);
    expect(Object.values(await rowsOfUser(hookedDb, user.id)).every((n) => n === 0)).toBe(true);
  });
});
