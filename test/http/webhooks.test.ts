/**
 * Webhooks as their owner manages them (API-CONTRACT.md §14, with §1 and §2), black-box on
 * both doors (REST and the typed tRPC client), bodies compared whole: the document a create
 * answers (its place after the newest event of the log, a secret shown once and never again),
 * list, get, each edit, disabling and enabling, delete; the limit of 10 (also for 12 creations
 * sent at once); another user's, unknown and malformed ids on every id route, changing
 * nothing; every validation rule of the body, every URL refusal (scheme, user info, length,
 * private addresses written every way, names resolving to private addresses, a name that does
 * not resolve) on create and on PATCH; replay and its 410 for a place no longer kept (events
 * pruned with SQL); enabling a webhook whose place was pruned; the test event; rotating the
 * secret; the deliveries page (rows written with SQL); 401 without a token; the same data and
 * errors through both doors.
 *
 * Defects found are pinned as `it.fails` ("defect: …"): each fails while the service keeps
 * the defect, and passes (making the run fail) once it is fixed, to be turned into `it`.
 */
import { TRPCClientError } from '@trpc/client';
import { describe, expect, it } from 'vitest';
import { errorShape, expectError, expectErrors, JSON_CT } from '../helpers/envelope.js';
import { T0, seconds, useTestAppWithSql } from '../helpers/test-app.js';

const { app, db } = useTestAppWithSql({ resetClock: true });

const HOOKS = '/api/users/me/webhooks';
const ONE = (id: number | string) => `/api/webhooks/${id}`;
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;
const URL_2048 = `https://hooks.example.com/${'a'.repeat(2048 - 'https://hooks.example.com/'.length)}`;
const HOUR_MS = 3_600_000;

type Json = Record<string, any>;

interface Attributes {
  url: string;
  events: string[];
  description: string;
  state: 'enabled' | 'disabled';
  disabledReason: string | null;
  createdAt: number;
  lastEventId: string;
}

/** A webhook document as §14 describes it: the defaults of a new webhook unless given. */
function webhookJson(id: number, attributes: Partial<Attributes> & { url: string; lastEventId: string }) {
  return {
    type: 'webhook',
    id,
    attributes: { events: ['*'], description: '', state: 'enabled', disabledReason: null, createdAt: seconds(T0), ...attributes },
  };
}

const create = (token: string, webhook: unknown) => app.request('POST', HOOKS, { token, body: { webhook } });
const patch = (token: string, id: number | string, webhook: unknown) => app.request('PATCH', ONE(id), { token, body: { webhook } });
const replay = (token: string, id: number | string, after: unknown) => app.request('POST', `${ONE(id)}/replay`, { token, body: { replay: { after } } });

/** Creates a webhook that must land; returns its document and secret. */
async function created(token: string, webhook: Json = {}): Promise<{ id: number; data: Json; secret: string }> {
  const res = await create(token, { url: 'https://hooks.example.com/planning', ...webhook });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.data.id, data: res.body.data, secret: res.body.meta.secret };
}

/** The newest event id of the user's change log, as the feed gives it. */
async function newestEventId(token: string): Promise<string> {
  const res = await app.request('GET', '/api/users/me/events', { token });
  expect(res.status).toBe(200);
  return res.body.meta.last_event_id;
}

/** A few writes, so that the user's log does not stand at "0". */
async function someWrites(token: string, n = 3): Promise<void> {
  for (let i = 0; i < n; i++) {
    const res = await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: `write ${i}` } } });
    expect(res.status).toBe(201);
  }
}

/** Every column of the user's webhooks, and the number of their attempts. */
async function rowsOf(userId: number) {
  const webhooks = (await db.query('select * from webhooks where user_id = $1 order by id', [userId])).rows;
  const deliveries = (await db.query('select count(*)::int as n from webhook_deliveries where user_id = $1', [userId])).rows[0].n;
  return { webhooks, deliveries };
}

async function rowOf(userId: number, id: number): Promise<Json> {
  const [row] = (await db.query('select *, cursor::text as cursor from webhooks where user_id = $1 and id = $2', [userId, id])).rows;
  return row;
}

/** Removes the user's events up to `through`, as retention does, and marks them pruned. */
async function prune(userId: number, through: number): Promise<void> {
  await db.query('delete from events where user_id = $1 and seq <= $2', [userId, through]);
  await db.query('update users set events_pruned_through = $2 where id = $1', [userId, through]);
}

interface TrpcFailure {
  code: string;
  httpStatus: number;
  errors: Json[];
  meta?: Json;
}

/** The error data of a tRPC call that must fail. */
async function trpcFailure(call: Promise<unknown>): Promise<TrpcFailure> {
  const error = await call.then(
    (value) => {
      throw new Error(`expected a tRPC error, got ${JSON.stringify(value)?.slice(0, 300)}`);
    },
    (e: unknown) => e,
  );
  if (!(error instanceof TRPCClientError)) throw error;
  return error.data as TrpcFailure;
}

const pairs = (errors: Json[]) => errors.map((e) => [e.code, e.source?.pointer]);

describe('POST /api/users/me/webhooks', () => {
  it('creates a webhook: 201 with its document, its place at the newest event, and a secret of 32 random bytes', async () => {
    const { id: userId, token } = await app.register();
    await someWrites(token, 4);
    const newest = await newestEventId(token);
    expect(newest).not.toBe('0');
    app.clock.advance(3_723);
    const url = 'https://hooks.example.com/planning?source=tests#top';
    const res = await create(token, { url });
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    const id = res.body.data.id;
    expect(Number.isInteger(id) && id > 0).toBe(true);
    expect(res.body).toEqual({
      data: webhookJson(id, { url, createdAt: seconds(T0) + 3_723, lastEventId: newest }),
      meta: { secret: expect.stringMatching(SECRET) },
    });
    const secret: string = res.body.meta.secret;
    expect(Buffer.from(secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
    // Stored as answered; creating a webhook writes no event.
    const row = await rowOf(userId, id);
    expect(row).toMatchObject({ url, secret, state: 'enabled', cursor: newest, retired_secrets: [], test_events: [] });
    expect(await newestEventId(token)).toBe(newest);
  });

  it('gives every webhook a secret of its own', async () => {
    const { token } = await app.register();
    const secrets = new Set<string>();
    for (let i = 0; i < 5; i++) secrets.add((await created(token)).secret);
    const other = await app.register();
    secrets.add((await created(other.token)).secret);
    expect(secrets.size).toBe(6);
  });

  it('never shows the secret again: not in list, get, update, replay or test answers', async () => {
    const { token } = await app.register();
    const { id, data, secret } = await created(token);
    const key = secret.slice('whsec_'.length);
    const answers = [
      await app.request('GET', HOOKS, { token }),
      await app.request('GET', ONE(id), { token }),
      await patch(token, id, { description: 'shown?' }),
      await replay(token, id, '0'),
      await app.request('POST', `${ONE(id)}/test`, { token, body: {} }),
    ];
    for (const res of answers) {
      expect(res.status).toBeLessThan(300);
      expect(Object.keys(res.body)).toEqual(['data']);
      expect(res.text).not.toContain(key);
    }
    expect(answers[1]!.body).toEqual({ data });
    const viaTrpc = app.trpc(token);
    expect(JSON.stringify(await viaTrpc.webhooks.list.query())).not.toContain(key);
    expect(await viaTrpc.webhooks.get.query({ id })).toEqual({ data: { ...data, attributes: { ...data.attributes, description: 'shown?' } } });
  });

  it('takes events and a description; a pattern sent twice is stored once', async () => {
    const { token } = await app.register();
    const res = await create(token, { url: 'https://a.example.com/x', events: ['task.*', 'project.deleted', 'task.*', 'project.deleted'], description: 'Sync 😀' });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.attributes).toMatchObject({ events: ['task.*', 'project.deleted'], description: 'Sync 😀' });
    const all = await create(token, { url: 'https://a.example.com/y', events: ['*', 'project.*', 'task.*', 'project.created', 'project.updated', 'project.deleted', 'task.created', 'task.updated'] });
    expect(all.status, all.text).toBe(201);
    expect([...all.body.data.attributes.events].sort()).toEqual(['*', 'project.*', 'project.created', 'project.deleted', 'project.updated', 'task.*', 'task.created', 'task.updated']);
    // 1,000 code points (emoji among them) is the longest description.
    const longest = await create(token, { url: 'https://a.example.com/z', description: '😀'.repeat(1_000) });
    expect(longest.status, longest.text).toBe(201);
    expect(longest.body.data.attributes.description).toBe('😀'.repeat(1_000));
  });

  it('accepts a URL of exactly 2,048 characters, public IP literals, and a name under example.com in any case', async () => {
    const { token } = await app.register();
    for (const url of [URL_2048, 'https://93.184.215.14/hook', 'https://[2606:4700:4700::1111]:8443/hook', 'https://HOOKS.Example.COM/Path?Q=1']) {
      const res = await create(token, { url });
      expect(res.status, `${url.slice(0, 60)}: ${res.text.slice(0, 300)}`).toBe(201);
      expect(res.body.data.attributes.url).toBe(new URL(url).href); // kept as its serialization (§14)
    }
  });

  it('through tRPC: the same document, the secret in meta', async () => {
    const { token } = await app.register();
    await someWrites(token, 2);
    const newest = await newestEventId(token);
    const result = await app.trpc(token).webhooks.create.mutate({ webhook: { url: 'https://t.example.com/', events: ['project.*'], description: 'typed' } });
    expect(result).toEqual({
      data: webhookJson(result.data.id, { url: 'https://t.example.com/', events: ['project.*'], description: 'typed', lastEventId: newest }),
      meta: { secret: expect.stringMatching(SECRET) },
    });
    const rest = await app.request('GET', ONE(result.data.id), { token });
    expect(rest.body).toEqual({ data: result.data });
  });
});

describe('list, get, update, delete', () => {
  it('lists a user\'s webhooks, oldest first, and only theirs; none is an empty list', async () => {
    const { token } = await app.register();
    const empty = await app.request('GET', HOOKS, { token });
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({ data: [] });
    const other = await app.register();
    await created(other.token);
    const docs: Json[] = [];
    for (const url of ['https://one.example.com/', 'https://two.example.com/', 'https://three.example.com/']) {
      docs.push((await created(token, { url })).data);
      await someWrites(token, 1);
    }
    const list = await app.request('GET', HOOKS, { token });
    expect(list.status).toBe(200);
    expect(list.headers.get('content-type')).toBe(JSON_CT);
    expect(list.body).toEqual({ data: docs });
    expect(docs.map((d) => d.attributes.lastEventId)).toEqual(['0', '1', '2']);
    expect(await app.trpc(token).webhooks.list.query()).toEqual({ data: docs });
  });

  it('gets one webhook as created', async () => {
    const { token } = await app.register();
    const { id, data } = await created(token, { events: ['task.created'], description: 'get me' });
    const res = await app.request('GET', ONE(id), { token });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    expect(res.body).toEqual({ data });
  });

  it('updates each field on its own and leaves the others; an empty edit changes nothing', async () => {
    const { id: userId, token } = await app.register();
    await someWrites(token, 2);
    const { id, data } = await created(token);
    let expected = data;
    const step = async (webhook: Json, attributes: Partial<Attributes>) => {
      app.clock.advance(60);
      const res = await patch(token, id, webhook);
      expect(res.status, res.text).toBe(200);
      expect(res.headers.get('content-type')).toBe(JSON_CT);
      expected = { ...expected, attributes: { ...expected.attributes, ...attributes } };
      expect(res.body).toEqual({ data: expected });
      expect((await app.request('GET', ONE(id), { token })).body).toEqual({ data: expected });
    };
    await step({ url: 'https://moved.example.com/new?x=1' }, { url: 'https://moved.example.com/new?x=1' });
    await step({ events: ['task.updated', 'task.updated'] }, { events: ['task.updated'] });
    await step({ description: 'Described' }, { description: 'Described' });
    await step({ description: '' }, { description: '' });
    await step({}, {});
    await step({ url: URL_2048, events: ['*'], description: 'all at once' }, { url: URL_2048, events: ['*'], description: 'all at once' });
    // Unknown members are ignored (§2).
    await step({ secret: 'whsec_mine', id: 1, created_at: 0, lastEventId: '0' }, {});
    expect((await rowOf(userId, id)).secret).not.toBe('whsec_mine');
  });

  it('disables and enables a webhook; enabling an enabled one is a no-op', async () => {
    const { id: userId, token } = await app.register();
    await someWrites(token, 3);
    const { id, data } = await created(token);
    const disabled = await patch(token, id, { state: 'disabled' });
    expect(disabled.status).toBe(200);
    expect(disabled.body).toEqual({ data: { ...data, attributes: { ...data.attributes, state: 'disabled' } } });
    const disabledTwice = await patch(token, id, { state: 'disabled' });
    expect(disabledTwice.body).toEqual(disabled.body);
    const enabled = await patch(token, id, { state: 'enabled' });
    expect(enabled.status).toBe(200);
    expect(enabled.body).toEqual({ data });
    const before = await rowOf(userId, id);
    const again = await patch(token, id, { state: 'enabled' });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ data });
    const after = await rowOf(userId, id);
    for (const column of ['state', 'cursor', 'attempt', 'next_attempt_at', 'generation', 'disabled_reason']) {
      expect(after[column], column).toEqual(before[column]);
    }
  });

  it('deletes a webhook: 204 with no body, then 404 on every route, and it leaves the list', async () => {
    const { id: userId, token } = await app.register();
    const keep = await created(token, { url: 'https://keep.example.com/' });
    const { id } = await created(token, { url: 'https://gone.example.com/' });
    const res = await app.request('DELETE', ONE(id), { token });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect(await rowOf(userId, id)).toBeUndefined();
    expectError(await app.request('GET', ONE(id), { token }), 404, 'record_not_found', { pointer: '/webhook' });
    expectError(await app.request('DELETE', ONE(id), { token }), 404, 'record_not_found', { pointer: '/webhook' });
    expectError(await patch(token, id, { description: 'back?' }), 404, 'record_not_found', { pointer: '/webhook' });
    expect((await app.request('GET', HOOKS, { token })).body).toEqual({ data: [keep.data] });
    // Through tRPC: the delete answers nothing, and a second one is record_not_found.
    const client = app.trpc(token);
    expect(await client.webhooks.delete.mutate({ id: keep.id })).toBeUndefined();
    expect(await trpcFailure(client.webhooks.delete.mutate({ id: keep.id }))).toMatchObject({ code: 'record_not_found', httpStatus: 404 });
    expect((await rowsOf(userId)).webhooks).toEqual([]);
  });
});

describe('at most 10 webhooks a user', () => {
  it('refuses the 11th with 422 limit_reached on /webhook, on both doors; after a delete there is room for one', async () => {
    const { id: userId, token } = await app.register();
    const ids: number[] = [];
    for (let i = 0; i < 10; i++) ids.push((await created(token, { url: `https://h${i}.example.com/` })).id);
    expectError(await create(token, { url: 'https://h10.example.com/' }), 422, 'limit_reached', { pointer: '/webhook' });
    const viaTrpc = await trpcFailure(app.trpc(token).webhooks.create.mutate({ webhook: { url: 'https://h10.example.com/' } }));
    expect(viaTrpc).toMatchObject({ code: 'limit_reached', httpStatus: 422, errors: [errorShape(422, 'limit_reached', { pointer: '/webhook' })] });
    expect((await rowsOf(userId)).webhooks).toHaveLength(10);
    // The limit is the user's: another user is not held by it.
    await created((await app.register()).token);
    expect((await app.request('DELETE', ONE(ids[3]!), { token })).status).toBe(204);
    await created(token, { url: 'https://again.example.com/' });
    expectError(await create(token, { url: 'https://h11.example.com/' }), 422, 'limit_reached', { pointer: '/webhook' });
    expect((await rowsOf(userId)).webhooks).toHaveLength(10);
  });

  it('of 12 creations sent at once, exactly 10 land and 10 rows exist', async () => {
    const { id: userId, token } = await app.register();
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => create(token, { url: `https://p${i}.example.com/` })));
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(10);
    for (const res of answers.filter((r) => r.status !== 201)) expectError(res, 422, 'limit_reached', { pointer: '/webhook' });
    const rows = (await rowsOf(userId)).webhooks;
    expect(rows).toHaveLength(10);
    expect(rows.map((r) => Number(r.id)).sort()).toEqual(answers.filter((r) => r.status === 201).map((r) => r.body.data.id).sort());
  });
});

interface IdRoute {
  procedure: 'get' | 'update' | 'delete' | 'deliveries' | 'replay' | 'test' | 'rotateSecret';
  method: string;
  path: (id: string) => string;
  /** A body the route would accept for the user's own webhook. */
  body?: Json;
  kind: 'query' | 'mutation';
}

const ID_ROUTES: IdRoute[] = [
  { procedure: 'get', method: 'GET', path: ONE, kind: 'query' },
  { procedure: 'update', method: 'PATCH', path: ONE, body: { webhook: { url: 'https://attacker.example.com/', description: 'mine now', state: 'disabled' } }, kind: 'mutation' },
  { procedure: 'delete', method: 'DELETE', path: ONE, kind: 'mutation' },
  { procedure: 'deliveries', method: 'GET', path: (id) => `${ONE(id)}/deliveries`, kind: 'query' },
  { procedure: 'replay', method: 'POST', path: (id) => `${ONE(id)}/replay`, body: { replay: { after: '0' } }, kind: 'mutation' },
  { procedure: 'test', method: 'POST', path: (id) => `${ONE(id)}/test`, body: {}, kind: 'mutation' },
  { procedure: 'rotateSecret', method: 'POST', path: (id) => `${ONE(id)}/secret`, body: {}, kind: 'mutation' },
];

describe('ids that name none of the user\'s webhooks', () => {
  it.each(ID_ROUTES.map((r) => [r.procedure, r] as const))('%s: another user\'s, unknown and malformed ids are 404 record_not_found on /webhook, and change nothing', async (_name, route) => {
    const owner = await app.register();
    await someWrites(owner.token, 2);
    const theirs = await created(owner.token);
    await db.query(
      `insert into webhook_deliveries (user_id, webhook_id, event_id, event_type, attempt, at, outcome, http_status, error, duration_ms, next_attempt_at)
       values ($1, $2, '1', 'task.created', 1, $3, 'delivered', 200, null, 12, null)`,
      [owner.id, theirs.id, new Date(T0)],
    );
    const intruder = await app.register();
    await someWrites(intruder.token, 2);
    const own = await created(intruder.token);
    const before = { owner: await rowsOf(owner.id), intruder: await rowsOf(intruder.id) };
    const restIds = [String(theirs.id), '999999', '0', '-1', '2147483648', 'abc', '1.5', '01', '1e1', '%20'];
    for (const id of restIds) {
      const res = await app.request(route.method, route.path(id), { token: intruder.token, body: route.body });
      expectError(res, 404, 'record_not_found', { pointer: '/webhook' });
    }
    const client = app.trpc(intruder.token).webhooks as any;
    for (const id of [theirs.id, 999_999, 0, -1, 2_147_483_648, 'abc', 1.5, String(theirs.id), null]) {
      const failure = await trpcFailure(client[route.procedure][route.kind === 'query' ? 'query' : 'mutate']({ id, ...route.body }));
      expect(failure, `tRPC ${route.procedure} id ${JSON.stringify(id)}`).toMatchObject({
        code: 'record_not_found',
        httpStatus: 404,
        errors: [errorShape(404, 'record_not_found', { pointer: '/webhook' })],
      });
    }
    expect({ owner: await rowsOf(owner.id), intruder: await rowsOf(intruder.id) }).toEqual(before);
    // The same request on the intruder's own webhook goes through.
    const ok = await app.request(route.method, route.path(String(own.id)), { token: intruder.token, body: route.body });
    expect(ok.status, ok.text).toBeLessThan(300);
  });
});

describe('validation of a webhook', () => {
  it('a missing wrapper is parameter_missing on /webhook; a missing url parameter_missing on /webhook/url', async () => {
    const { id: userId, token } = await app.register();
    for (const body of [{}, { Webhook: { url: 'https://a.example.com/' } }, { url: 'https://a.example.com/' }, [], 7, null]) {
      expectError(await app.request('POST', HOOKS, { token, body }), 422, 'parameter_missing', { pointer: '/webhook' });
    }
    expectError(await create(token, {}), 422, 'parameter_missing', { pointer: '/webhook/url' });
    expectError(await create(token, { events: ['*'], description: 'no url' }), 422, 'parameter_missing', { pointer: '/webhook/url' });
    expectError(await app.request('PATCH', ONE((await created(token)).id), { token, body: {} }), 422, 'parameter_missing', { pointer: '/webhook' });
    expect((await rowsOf(userId)).webhooks).toHaveLength(1);
    const client = app.trpc(token).webhooks as any;
    expect(pairs((await trpcFailure(client.create.mutate({}))).errors)).toEqual([['parameter_missing', '/webhook']]);
    expect(pairs((await trpcFailure(client.create.mutate({ webhook: {} }))).errors)).toEqual([['parameter_missing', '/webhook/url']]);
  });

  it('refuses a wrapper that is not an object (422 on /webhook), on create and update', async () => {
    const { id: userId, token } = await app.register();
    const { id } = await created(token);
    const before = await rowsOf(userId);
    for (const webhook of ['https://a.example.com/', 5, true, null, [], [{ url: 'https://a.example.com/' }]]) {
      for (const res of [await create(token, webhook), await patch(token, id, webhook)]) {
        expect(res.status, res.text).toBe(422);
        expect(pairs(res.body.errors)).toEqual([[expect.stringMatching(/^(parameter_missing|invalid)$/), '/webhook']]);
      }
    }
    expect(await rowsOf(userId)).toEqual(before);
  });

  // §2: "Body wrapper missing or not an object: 422 parameter_missing".
  it('a wrapper that is not an object is parameter_missing on /webhook', async () => {
    const { token } = await app.register();
    const { id } = await created(token);
    expectError(await create(token, 'https://a.example.com/'), 422, 'parameter_missing', { pointer: '/webhook' });
    expectError(await create(token, null), 422, 'parameter_missing', { pointer: '/webhook' });
    expectError(await patch(token, id, []), 422, 'parameter_missing', { pointer: '/webhook' });
    expectError(await app.request('POST', `${ONE(id)}/replay`, { token, body: { replay: '5' } }), 422, 'parameter_missing', { pointer: '/replay' });
  });

  const WRONG: Array<[string, Json, Array<[string, string]>]> = [
    ['url a number', { url: 5 }, [['invalid', '/webhook/url']]],
    ['url null', { url: null }, [['invalid', '/webhook/url']]],
    ['url true', { url: true }, [['invalid', '/webhook/url']]],
    ['url an array', { url: ['https://a.example.com/'] }, [['invalid', '/webhook/url']]],
    ['url an object', { url: { href: 'https://a.example.com/' } }, [['invalid', '/webhook/url']]],
    ['url empty', { url: '' }, [['invalid', '/webhook/url']]],
    ['url with NUL', { url: 'https://a.example.com/\u0000' }, [['invalid', '/webhook/url']]],
    ['url with a lone surrogate', { url: 'https://a.example.com/\ud800' }, [['invalid', '/webhook/url']]],
    ['events a string', { url: 'https://a.example.com/', events: 'task.*' }, [['invalid', '/webhook/events']]],
    ['events null', { url: 'https://a.example.com/', events: null }, [['invalid', '/webhook/events']]],
    ['events an object', { url: 'https://a.example.com/', events: { 0: 'task.*' } }, [['invalid', '/webhook/events']]],
    ['events empty', { url: 'https://a.example.com/', events: [] }, [['invalid', '/webhook/events']]],
    ['events of wrong types', { url: 'https://a.example.com/', events: ['*', 5, null, ['task.*']] }, [['invalid', '/webhook/events/1'], ['invalid', '/webhook/events/2'], ['invalid', '/webhook/events/3']]],
    ['events task.deleted', { url: 'https://a.example.com/', events: ['task.deleted'] }, [['invalid', '/webhook/events/0']]],
    ['events *.*', { url: 'https://a.example.com/', events: ['*.*'] }, [['invalid', '/webhook/events/0']]],
    ['events TASK.*', { url: 'https://a.example.com/', events: ['TASK.*'] }, [['invalid', '/webhook/events/0']]],
    ['unknown patterns among good ones', { url: 'https://a.example.com/', events: ['task.*', 'task.deleted', 'project', ' *', 'webhook.test'] }, [['invalid', '/webhook/events/1'], ['invalid', '/webhook/events/2'], ['invalid', '/webhook/events/3'], ['invalid', '/webhook/events/4']]],
    ['description a number', { url: 'https://a.example.com/', description: 5 }, [['invalid', '/webhook/description']]],
    ['description null', { url: 'https://a.example.com/', description: null }, [['invalid', '/webhook/description']]],
    ['description an array', { url: 'https://a.example.com/', description: ['x'] }, [['invalid', '/webhook/description']]],
    ['description of 1,001 characters', { url: 'https://a.example.com/', description: 'd'.repeat(1_001) }, [['too_long', '/webhook/description']]],
    ['description of 1,001 emoji', { url: 'https://a.example.com/', description: '😀'.repeat(1_001) }, [['too_long', '/webhook/description']]],
    ['description with NUL', { url: 'https://a.example.com/', description: 'a\u0000b' }, [['invalid', '/webhook/description']]],
    ['everything wrong at once', { url: 7, events: [], description: 'x'.repeat(1_001) }, [['invalid', '/webhook/url'], ['invalid', '/webhook/events'], ['too_long', '/webhook/description']]],
    ['no url, bad events and description', { events: ['nope'], description: false }, [['parameter_missing', '/webhook/url'], ['invalid', '/webhook/events/0'], ['invalid', '/webhook/description']]],
  ];

  it.each(WRONG)('create, %s: 422 with every error, nothing stored; tRPC the same', async (_what, webhook, errors) => {
    const { id: userId, token } = await app.register();
    expectErrors(await create(token, webhook), errors);
    const failure = await trpcFailure((app.trpc(token).webhooks.create.mutate as any)({ webhook }));
    expect(failure.httpStatus).toBe(422);
    expect(pairs(failure.errors).sort()).toEqual([...errors].sort());
    expect((await rowsOf(userId)).webhooks).toEqual([]);
  });

  it('update: the same rules (and state enabled or disabled), all errors at once, nothing changed', async () => {
    const { id: userId, token } = await app.register();
    const { id } = await created(token);
    const before = await rowsOf(userId);
    for (const [, webhook, errors] of WRONG.filter(([what]) => !what.startsWith('no url'))) {
      expectErrors(await patch(token, id, webhook), errors);
    }
    expectErrors(await patch(token, id, { state: 'paused' }), [['invalid', '/webhook/state']]);
    expectErrors(await patch(token, id, { state: null }), [['invalid', '/webhook/state']]);
    expectErrors(await patch(token, id, { state: 'ENABLED' }), [['invalid', '/webhook/state']]);
    expectErrors(await patch(token, id, { state: 1, events: [], url: null, description: 'x'.repeat(1_001) }), [
      ['invalid', '/webhook/state'], ['invalid', '/webhook/events'], ['invalid', '/webhook/url'], ['too_long', '/webhook/description'],
    ]);
    expect(await rowsOf(userId)).toEqual(before);
  });

  const PRIVATE_LITERALS = [
    'https://127.0.0.1/', 'https://10.0.0.1/', 'https://172.16.0.1/', 'https://192.168.1.1/', 'https://169.254.169.254/latest/meta-data/',
    'https://100.64.0.1/', 'https://0.0.0.0/', 'https://[::1]/', 'https://[fd00::1]/', 'https://[fe80::1]/', 'https://[::ffff:127.0.0.1]/',
    'https://2130706433/', 'https://0177.0.0.1/', 'https://0x7f.0.0.1/', 'https://127.1/', 'https://0x7f000001/', 'https://[::]/',
    'https://[::ffff:93.184.215.14]/', 'https://224.0.0.1/', 'https://255.255.255.255/', 'https://127.0.0.1:443/',
  ];
  const PRIVATE_NAMES = [
    'https://loopback.private.test/', 'https://metadata.private.test/', 'https://ten.private.test/', 'https://v6.private.test/',
    'https://mixed.private.test/', 'https://LOOPBACK.private.test./hook',
  ];
  const REFUSED_URLS: string[] = [
    'http://hooks.example.com/', 'HTTP://hooks.example.com/', 'https://u:p@hooks.example.com/', 'https://u@hooks.example.com/',
    'https://@hooks.example.com/', 'https://:@hooks.example.com/', 'ftp://hooks.example.com/', 'wss://hooks.example.com/',
    'file:///etc/passwd', 'javascript:alert(1)', '/relative/path', 'hooks.example.com/no-scheme', '//hooks.example.com/', 'not a URL',
    'https://', 'https://hooks.example.com:99999/', 'https://[fe80::1%25eth0]/',
    ...PRIVATE_LITERALS, ...PRIVATE_NAMES,
    'https://nowhere.invalid/', 'https://localhost/', 'https://example.com.private.test/',
  ];

  it.each(REFUSED_URLS)('create with url %s: 422 invalid on /webhook/url, nothing stored', async (url) => {
    const { id: userId, token } = await app.register();
    expectError(await create(token, { url }), 422, 'invalid', { pointer: '/webhook/url' });
    const failure = await trpcFailure(app.trpc(token).webhooks.create.mutate({ webhook: { url } }));
    expect(failure).toMatchObject({ code: 'invalid', httpStatus: 422, errors: [errorShape(422, 'invalid', { pointer: '/webhook/url' })] });
    expect((await rowsOf(userId)).webhooks).toEqual([]);
  });

  it('update with each of those urls: 422 invalid on /webhook/url, the webhook as it was (with the other members sent beside)', async () => {
    const { id: userId, token } = await app.register();
    const { id } = await created(token);
    const before = await rowsOf(userId);
    for (const url of REFUSED_URLS) {
      expectError(await patch(token, id, { url, description: 'changed?', state: 'disabled' }), 422, 'invalid', { pointer: '/webhook/url' });
    }
    const failure = await trpcFailure(app.trpc(token).webhooks.update.mutate({ id, webhook: { url: 'https://mixed.private.test/' } }));
    expect(pairs(failure.errors)).toEqual([['invalid', '/webhook/url']]);
    expect(await rowsOf(userId)).toEqual(before);
  });

  it('refuses a URL of 2,049 characters on /webhook/url, on create and update', async () => {
    const { id: userId, token } = await app.register();
    const { id } = await created(token);
    const before = await rowsOf(userId);
    const long = `${URL_2048}b`;
    for (const res of [await create(token, { url: long }), await patch(token, id, { url: long })]) {
      expect(res.status).toBe(422);
      expect(pairs(res.body.errors)).toEqual([[expect.any(String), '/webhook/url']]);
    }
    expect(await rowsOf(userId)).toEqual(before);
  });

  // §14: a URL "of at most 2,048 characters … (422 invalid, /webhook/url)".
  it('a URL of 2,049 characters is invalid on /webhook/url', async () => {
    const { token } = await app.register();
    expectError(await create(token, { url: `${URL_2048}b` }), 422, 'invalid', { pointer: '/webhook/url' });
  });

  // §1: "Lengths count Unicode code points".
  it('a URL of 2,048 code points, some outside the BMP, is accepted', async () => {
    const { token } = await app.register();
    const base = 'https://hooks.example.com/';
    const url = base + '😀'.repeat(2_048 - base.length);
    expect([...url]).toHaveLength(2_048);
    const res = await create(token, { url });
    expect(res.status, res.text.slice(0, 300)).toBe(201);
  });

  // §2: "Several validation errors of one request are all reported". The URL's form (an
  // absolute http(s) URL without user info) is checked with the body; https-only and the
  // addresses depend on the service's setting and on DNS, and are checked once the body is read.
  it('a URL that is no URL, or holds user info, is reported beside the other errors of the request', async () => {
    const { token } = await app.register();
    for (const url of ['not a url', 'https://u:p@hooks.example.com/', 'ftp://hooks.example.com/']) {
      expectErrors(await create(token, { url, description: 'd'.repeat(1_001) }), [
        ['invalid', '/webhook/url'],
        ['too_long', '/webhook/description'],
      ]);
    }
  });

  it('another user\'s webhook is 404 on PATCH before its URL is looked at', async () => {
    const owner = await app.register();
    const other = await app.register();
    const made = await create(owner.token, { url: 'https://hooks.example.com/mine' });
    const res = await app.request('PATCH', `/api/webhooks/${made.body.data.id}`, { token: other.token, body: { webhook: { url: 'https://ten.private.test/' } } });
    expectError(res, 404, 'record_not_found', { pointer: '/webhook' });
  });
});

describe('POST /api/webhooks/:id/replay', () => {
  it('answers 202 with the webhook; its place moves back to the id given, never forward', async () => {
    const { id: userId, token } = await app.register();
    await someWrites(token, 6);
    const { id, data } = await created(token);
    expect(data.attributes.lastEventId).toBe('6');
    const at = async (after: unknown, lastEventId: string) => {
      const res = await replay(token, id, after);
      expect(res.status, res.text).toBe(202);
      expect(res.body).toEqual({ data: { ...data, attributes: { ...data.attributes, lastEventId } } });
      expect((await rowOf(userId, id)).cursor).toBe(lastEventId);
    };
    await at('6', '6');
    await at('4', '4');
    await at('5', '4');
    await at('0', '0');
    await someWrites(token, 1);
    await at('7', '0');
    // Through tRPC, the same document.
    const typed = await app.trpc(token).webhooks.replay.mutate({ id, replay: { after: '0' } });
    expect(typed).toEqual({ data: { ...data, attributes: { ...data.attributes, lastEventId: '0' } } });
  });

  it('an id beyond the newest is 410 cursor_expired with meta.last_event_id; the place stays', async () => {
    const { id: userId, token } = await app.register();
    await someWrites(token, 3);
    const { id } = await created(token);
    const before = await rowsOf(userId);
    for (const after of ['4', '999999999999999999']) {
      const res = await replay(token, id, after);
      expect(res.status).toBe(410);
      expect(res.headers.get('content-type')).toBe(JSON_CT);
      expect(res.body).toEqual({ errors: [errorShape(410, 'cursor_expired', { pointer: '/replay/after' })], meta: { last_event_id: '3' } });
    }
    const failure = await trpcFailure(app.trpc(token).webhooks.replay.mutate({ id, replay: { after: '4' } }));
    expect(failure).toMatchObject({ code: 'cursor_expired', httpStatus: 410, meta: { last_event_id: '3' } });
    expect(await rowsOf(userId)).toEqual(before);
  });

  it('an id older than what is kept is 410 cursor_expired with meta.last_event_id; the oldest kept place is accepted', async () => {
    const { id: userId, token } = await app.register();
    await someWrites(token, 5);
    const { id, data } = await created(token);
    await prune(userId, 3);
    const before = await rowsOf(userId);
    for (const after of ['0', '1', '2']) {
      const res = await replay(token, id, after);
      expect(res.status, `after ${after}`).toBe(410);
      expect(res.body).toEqual({ errors: [errorShape(410, 'cursor_expired', { pointer: '/replay/after' })], meta: { last_event_id: '5' } });
    }
    expect(await trpcFailure(app.trpc(token).webhooks.replay.mutate({ id, replay: { after: '2' } }))).toMatchObject({ code: 'cursor_expired', httpStatus: 410, meta: { last_event_id: '5' } });
    expect(await rowsOf(userId)).toEqual(before);
    const kept = await replay(token, id, '3');
    expect(kept.status).toBe(202);
    expect(kept.body).toEqual({ data: { ...data, attributes: { ...data.attributes, lastEventId: '3' } } });
  });

  it('refuses a malformed after with 422 invalid on /replay/after, a missing one or wrapper with parameter_missing', async () => {
    const { id: userId, token } = await app.register();
    await someWrites(token, 2);
    const { id } = await created(token);
    const before = await rowsOf(userId);
    for (const after of ['abc', 5, '-1', '01', '', ' 1', '1.5', '1e3', '0x1', null, true, ['1'], { id: '1' }, '1234567890123456789']) {
      expectError(await replay(token, id, after), 422, 'invalid', { pointer: '/replay/after' });
      const failure = await trpcFailure((app.trpc(token).webhooks.replay.mutate as any)({ id, replay: { after } }));
      expect(pairs(failure.errors), `tRPC after ${JSON.stringify(after)}`).toEqual([['invalid', '/replay/after']]);
    }
    expectError(await app.request('POST', `${ONE(id)}/replay`, { token, body: { replay: {} } }), 422, 'parameter_missing', { pointer: '/replay/after' });
    expectError(await app.request('POST', `${ONE(id)}/replay`, { token, body: {} }), 422, 'parameter_missing', { pointer: '/replay' });
    expectError(await app.request('POST', `${ONE(id)}/replay`, { token, body: { after: '1' } }), 422, 'parameter_missing', { pointer: '/replay' });
    expect(await rowsOf(userId)).toEqual(before);
  });
});

describe('enabling a webhook whose place was pruned', () => {
  it('is 410 cursor_expired with meta.last_event_id and stays disabled; after a replay from a kept id it enables', async () => {
    const { id: userId, token } = await app.register();
    await someWrites(token, 2);
    const { id, data } = await created(token);
    expect((await patch(token, id, { state: 'disabled' })).status).toBe(200);
    await someWrites(token, 3);
    await prune(userId, 4);
    const before = await rowsOf(userId);
    for (const webhook of [{ state: 'enabled' }, { state: 'enabled', description: 'and described' }]) {
      const res = await patch(token, id, webhook);
      expect(res.status).toBe(410);
      expect(res.headers.get('content-type')).toBe(JSON_CT);
      expect(res.body).toEqual({ errors: [errorShape(410, 'cursor_expired')], meta: { last_event_id: '5' } });
    }
    const failure = await trpcFailure(app.trpc(token).webhooks.update.mutate({ id, webhook: { state: 'enabled' } }));
    expect(failure).toMatchObject({ code: 'cursor_expired', httpStatus: 410, meta: { last_event_id: '5' } });
    expect(await rowsOf(userId)).toEqual(before);
    expect((await app.request('GET', ONE(id), { token })).body.data.attributes).toMatchObject({ state: 'disabled', lastEventId: '2' });
    // Other edits of the disabled webhook still land.
    expect((await patch(token, id, { description: 'still disabled' })).body.data.attributes).toMatchObject({ state: 'disabled', description: 'still disabled' });
    // A replay from an id that is kept moves the place there; then enabling resumes.
    const replayed = await replay(token, id, '4');
    expect(replayed.status).toBe(202);
    expect(replayed.body.data.attributes).toMatchObject({ state: 'disabled', lastEventId: '4' });
    const enabled = await patch(token, id, { state: 'enabled' });
    expect(enabled.status).toBe(200);
    expect(enabled.body).toEqual({ data: { ...data, attributes: { ...data.attributes, description: 'still disabled', lastEventId: '4' } } });
  });

  it('enables a disabled webhook whose place is kept, at that place', async () => {
    const { id: userId, token } = await app.register();
    await someWrites(token, 3);
    const { id, data } = await created(token);
    await patch(token, id, { state: 'disabled' });
    await someWrites(token, 2);
    await prune(userId, 3);
    const res = await patch(token, id, { state: 'enabled' });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data });
  });
});

describe('POST /api/webhooks/:id/test and /secret', () => {
  it('test: 202 with the webhook, and a webhook.test event waits to go, after those asked for before', async () => {
    const { id: userId, token } = await app.register();
    const { id, data } = await created(token, { events: ['project.deleted'] });
    expect((await rowOf(userId, id)).test_events).toEqual([]);
    app.clock.advance(90);
    const res = await app.request('POST', `${ONE(id)}/test`, { token, body: {} });
    expect(res.status, res.text).toBe(202);
    expect(res.body).toEqual({ data });
    const row = await rowOf(userId, id);
    expect(row.test_events).toEqual([{ id: expect.stringMatching(/^msg_[A-Za-z0-9_-]+$/), at: seconds(T0) + 90 }]);
    // Each test event has an id of its own, and waits behind the ones before it; tRPC answers the same document.
    expect(await app.trpc(token).webhooks.test.mutate({ id })).toEqual({ data });
    const two = (await rowOf(userId, id)).test_events;
    expect(two).toHaveLength(2);
    expect(two[0]).toEqual(row.test_events[0]);
    expect(two[1].id).not.toBe(row.test_events[0].id);
    // Also for a disabled webhook.
    await patch(token, id, { state: 'disabled' });
    expect((await app.request('POST', `${ONE(id)}/test`, { token, body: {} })).status).toBe(202);
  });

  it('test: ten test events may wait; one more is 429 rate_limited with Retry-After, and changes nothing', async () => {
    const { id: userId, token } = await app.register();
    const { id } = await created(token);
    for (let i = 0; i < 10; i++) expect((await app.request('POST', `${ONE(id)}/test`, { token })).status).toBe(202);
    const refused = await app.request('POST', `${ONE(id)}/test`, { token });
    expectError(refused, 429, 'rate_limited');
    expect(refused.headers.get('retry-after')).toBe('5');
    expect((await rowOf(userId, id)).test_events).toHaveLength(10);
  });

  it('secret: 201 with a new secret; the previous one signs beside it for 24 hours', async () => {
    const { id: userId, token } = await app.register();
    const { id, data, secret: first } = await created(token);
    app.clock.advance(3_600);
    const res = await app.request('POST', `${ONE(id)}/secret`, { token, body: {} });
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    expect(res.body).toEqual({ data, meta: { secret: expect.stringMatching(SECRET) } });
    const second: string = res.body.meta.secret;
    expect(second).not.toBe(first);
    expect(Buffer.from(second.slice('whsec_'.length), 'base64')).toHaveLength(32);
    const row = await rowOf(userId, id);
    expect(row.secret).toBe(second);
    expect(row.retired_secrets).toEqual([first]);
    expect(row.retired_until.map((d: Date) => d.getTime())).toEqual([T0 + HOUR_MS + 24 * HOUR_MS]);
    // Rotating again keeps both: each signs until 24 hours after its own rotation (test/http/webhook-rotation.test.ts).
    const typed = await app.trpc(token).webhooks.rotateSecret.mutate({ id });
    expect(typed.meta.secret).toMatch(SECRET);
    expect(new Set([first, second, typed.meta.secret]).size).toBe(3);
    expect(await rowOf(userId, id)).toMatchObject({ secret: typed.meta.secret, retired_secrets: [first, second] });
  });

  // §1: responses are `application/json; charset=utf-8`.
  it('a 202 (replay, test) is application/json; charset=utf-8', async () => {
    const { token } = await app.register();
    const { id } = await created(token);
    expect((await replay(token, id, '0')).headers.get('content-type')).toBe(JSON_CT);
    expect((await app.request('POST', `${ONE(id)}/test`, { token, body: {} })).headers.get('content-type')).toBe(JSON_CT);
  });

  it('test and secret answer a POST without a body or Content-Type, as openapi.json documents them', async () => {
    const { token } = await app.register();
    const { id, data } = await created(token);
    const test = await app.request('POST', `${ONE(id)}/test`, { token });
    expect(test.status, test.text).toBe(202);
    expect(test.body).toEqual({ data });
    const secret = await app.request('POST', `${ONE(id)}/secret`, { token });
    expect(secret.status, secret.text).toBe(201);
    expect(secret.body).toEqual({ data, meta: { secret: expect.stringMatching(SECRET) } });
  });
});

describe('GET /api/webhooks/:id/deliveries', () => {
  it('is an empty page with its links for a new webhook', async () => {
    const { token } = await app.register();
    const { id } = await created(token);
    const res = await app.request('GET', `${ONE(id)}/deliveries`, { token });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    const at = (page: number) => `${app.baseUrl}${ONE(id)}/deliveries?page=${page}`;
    expect(res.body).toEqual({ data: [], links: { first: at(1), last: at(1) } });
    expect(await app.trpc(token).webhooks.deliveries.query({ id })).toEqual(res.body);
  });

  it('lists attempts newest first, 50 a page, each document exact; page 2 and beyond the last', async () => {
    const { id: userId, token } = await app.register();
    const { id } = await created(token);
    const other = await created(token, { url: 'https://other.example.com/' });
    const base = seconds(T0) - 5_000;
    const outcomes = ['delivered', 'failed', 'blocked'] as const;
    /** The attempt g as written below, as the page must show it. */
    const expected = (rowId: number, g: number) => ({
      type: 'delivery',
      id: rowId,
      attributes: {
        eventId: String(g),
        eventType: g % 2 === 0 ? 'task.updated' : 'project.created',
        attempt: 1 + (g % 4),
        at: base + g * 10,
        outcome: outcomes[g % 3],
        httpStatus: g % 3 === 0 ? 200 : g % 3 === 1 ? 503 : null,
        error: g % 3 === 0 ? null : g % 3 === 1 ? 'HTTP 503' : 'The URL\'s host resolves to 127.0.0.1, a loopback address.',
        durationMs: g * 7,
        nextAttemptAt: g % 3 === 1 ? base + g * 10 + 300 : null,
      },
    });
    const inserted = await db.query(
      `insert into webhook_deliveries (user_id, webhook_id, event_id, event_type, attempt, at, outcome, http_status, error, duration_ms, next_attempt_at)
       select $1, $2, g::text, case when g % 2 = 0 then 'task.updated' else 'project.created' end, 1 + g % 4,
              to_timestamp($3 + g * 10), (array['delivered', 'failed', 'blocked'])[g % 3 + 1],
              case g % 3 when 0 then 200 when 1 then 503 end,
              case g % 3 when 1 then 'HTTP 503' when 2 then 'The URL''s host resolves to 127.0.0.1, a loopback address.' end,
              g * 7, case when g % 3 = 1 then to_timestamp($3 + g * 10 + 300) end
         from generate_series(1, 120) g
       returning id::int as id, event_id::int as g`,
      [userId, id, base],
    );
    await db.query(
      `insert into webhook_deliveries (user_id, webhook_id, event_id, event_type, attempt, at, outcome, http_status, error, duration_ms, next_attempt_at)
       values ($1, $2, '1', 'task.created', 1, now(), 'delivered', 204, null, 1, null)`,
      [userId, other.id],
    );
    const all = inserted.rows.map((r: { id: number; g: number }) => expected(r.id, r.g)).sort((a, b) => b.id - a.id);
    const at = (page: number) => `${app.baseUrl}${ONE(id)}/deliveries?page=${page}`;
    const page = async (n: number | undefined) => {
      const res = await app.request('GET', `${ONE(id)}/deliveries${n === undefined ? '' : `?page=${n}`}`, { token });
      expect(res.status).toBe(200);
      return res.body;
    };
    expect(await page(undefined)).toEqual({ data: all.slice(0, 50), links: { first: at(1), last: at(3), next: at(2) } });
    expect(await page(2)).toEqual({ data: all.slice(50, 100), links: { first: at(1), last: at(3), prev: at(1), next: at(3) } });
    expect(await page(3)).toEqual({ data: all.slice(100), links: { first: at(1), last: at(3), prev: at(2) } });
    expect(await page(4)).toEqual({ data: [], links: { first: at(1), last: at(3), prev: at(3) } });
    expect(await app.trpc(token).webhooks.deliveries.query({ id, page: 2 })).toEqual(await page(2));
    for (const bad of ['0', '-1', 'abc', '1.5']) {
      const res = await app.request('GET', `${ONE(id)}/deliveries?page=${bad}`, { token });
      expectError(res, 400, 'invalid', { parameter: 'page' });
    }
    // Deleting the webhook forgets its attempts.
    expect((await app.request('DELETE', ONE(id), { token })).status).toBe(204);
    expect((await db.query('select count(*)::int as n from webhook_deliveries where user_id = $1 and webhook_id = $2', [userId, id])).rows[0].n).toBe(0);
    expect((await db.query('select count(*)::int as n from webhook_deliveries where user_id = $1 and webhook_id = $2', [userId, other.id])).rows[0].n).toBe(1);
  });
});

describe('without a token', () => {
  const ROUTES: Array<[string, string, Json | undefined]> = [
    ['POST', HOOKS, { webhook: { url: 'https://a.example.com/' } }],
    ['GET', HOOKS, undefined],
    ...ID_ROUTES.map((r) => [r.method, r.path('1'), r.body] as [string, string, Json | undefined]),
  ];

  it.each(ROUTES)('%s %s is 401 unauthorized, also with an unknown token, and changes nothing', async (method, path, body) => {
    const { id: userId, token } = await app.register();
    const { id } = await created(token);
    const target = path.replace('/1', `/${id}`);
    const before = await rowsOf(userId);
    expectError(await app.request(method, target, { body }), 401, 'unauthorized');
    expectError(await app.request(method, target, { token: 'not-a-token', body }), 401, 'unauthorized');
    expect(await rowsOf(userId)).toEqual(before);
  });

  it('every procedure through tRPC is unauthorized without a token', async () => {
    const { token } = await app.register();
    const { id } = await created(token);
    const anonymous = app.trpc().webhooks as any;
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['create', () => anonymous.create.mutate({ webhook: { url: 'https://a.example.com/' } })],
      ['list', () => anonymous.list.query()],
      ...ID_ROUTES.map((r) => [r.procedure, () => anonymous[r.procedure][r.kind === 'query' ? 'query' : 'mutate']({ id, ...r.body })] as [string, () => Promise<unknown>]),
    ];
    for (const [name, call] of calls) {
      expect(await trpcFailure(call()), name).toMatchObject({ code: 'unauthorized', httpStatus: 401, errors: [errorShape(401, 'unauthorized')] });
    }
  });
});

describe('the two doors', () => {
  type Procedure = 'create' | 'list' | 'get' | 'update' | 'delete' | 'deliveries' | 'replay' | 'test' | 'rotateSecret';
  const REST: Record<Procedure, { method: string; path: (input: Json) => string; body?: (input: Json) => Json }> = {
    create: { method: 'POST', path: () => HOOKS, body: (i) => i },
    list: { method: 'GET', path: () => HOOKS },
    get: { method: 'GET', path: (i) => ONE(i.id) },
    update: { method: 'PATCH', path: (i) => ONE(i.id), body: ({ id: _, ...rest }) => rest },
    delete: { method: 'DELETE', path: (i) => ONE(i.id) },
    deliveries: { method: 'GET', path: (i) => `${ONE(i.id)}/deliveries${i.page ? `?page=${i.page}` : ''}` },
    replay: { method: 'POST', path: (i) => `${ONE(i.id)}/replay`, body: ({ id: _, ...rest }) => rest },
    test: { method: 'POST', path: (i) => `${ONE(i.id)}/test`, body: () => ({}) },
    rotateSecret: { method: 'POST', path: (i) => `${ONE(i.id)}/secret`, body: () => ({}) },
  };
  const KIND: Record<Procedure, 'query' | 'mutate'> = {
    create: 'mutate', list: 'query', get: 'query', update: 'mutate', delete: 'mutate', deliveries: 'query', replay: 'mutate', test: 'mutate', rotateSecret: 'mutate',
  };

  interface Step {
    name: string;
    procedure: Procedure;
    input?: (refs: Record<string, number>) => Json;
    keep?: string;
    fails?: string[];
  }
  const steps: Step[] = [
    { name: 'create', procedure: 'create', input: () => ({ webhook: { url: 'https://a.example.com/', events: ['task.*'], description: 'A' } }), keep: 'a' },
    { name: 'create another', procedure: 'create', input: () => ({ webhook: { url: 'https://b.example.com/' } }), keep: 'b' },
    { name: 'create with a private url', procedure: 'create', input: () => ({ webhook: { url: 'https://ten.private.test/' } }), fails: ['invalid'] },
    { name: 'create with bad events and description', procedure: 'create', input: () => ({ webhook: { url: 'https://a.example.com/', events: ['x', '*'], description: 'x'.repeat(1_001) } }), fails: ['invalid', 'too_long'] },
    { name: 'create without wrapper', procedure: 'create', input: () => ({}), fails: ['parameter_missing'] },
    { name: 'list', procedure: 'list' },
    { name: 'get', procedure: 'get', input: (r) => ({ id: r.a }) },
    { name: 'get unknown', procedure: 'get', input: () => ({ id: 2_147_483_647 }), fails: ['record_not_found'] },
    { name: 'get another user\'s', procedure: 'get', input: (r) => ({ id: r.foreign }), fails: ['record_not_found'] },
    { name: 'update', procedure: 'update', input: (r) => ({ id: r.a, webhook: { description: 'A2', events: ['*'] } }) },
    { name: 'update with a user info url', procedure: 'update', input: (r) => ({ id: r.a, webhook: { url: 'https://me:pw@a.example.com/' } }), fails: ['invalid'] },
    { name: 'disable', procedure: 'update', input: (r) => ({ id: r.a, webhook: { state: 'disabled' } }) },
    { name: 'enable', procedure: 'update', input: (r) => ({ id: r.a, webhook: { state: 'enabled' } }) },
    { name: 'replay', procedure: 'replay', input: (r) => ({ id: r.a, replay: { after: '1' } }) },
    { name: 'replay beyond the log', procedure: 'replay', input: (r) => ({ id: r.a, replay: { after: '99' } }), fails: ['cursor_expired'] },
    { name: 'replay a malformed id', procedure: 'replay', input: (r) => ({ id: r.a, replay: { after: '01' } }), fails: ['invalid'] },
    { name: 'test', procedure: 'test', input: (r) => ({ id: r.a }) },
    { name: 'secret', procedure: 'rotateSecret', input: (r) => ({ id: r.a }) },
    { name: 'deliveries', procedure: 'deliveries', input: (r) => ({ id: r.a }) },
    { name: 'deliveries page 2', procedure: 'deliveries', input: (r) => ({ id: r.a, page: 2 }) },
    { name: 'delete', procedure: 'delete', input: (r) => ({ id: r.b }) },
    { name: 'delete again', procedure: 'delete', input: (r) => ({ id: r.b }), fails: ['record_not_found'] },
    { name: 'list after', procedure: 'list' },
  ];

  type Outcome = { ok: true; output: unknown } | { ok: false; status: number; errors: Json[]; meta?: Json };

  /** Ids (webhooks and their links) and secrets differ between the two users: written as names. */
  function normalise(value: unknown, refs: Record<string, number>): unknown {
    const names = new Map(Object.entries(refs).map(([name, id]) => [id, `<${name}>`]));
    return JSON.parse(JSON.stringify(value ?? null), (key, v) => {
      if (key === 'id' && typeof v === 'number') return names.get(v) ?? v;
      if (key === 'secret' && typeof v === 'string') return SECRET.test(v) ? '<secret>' : v;
      if (typeof v === 'string') return v.replace(/\/api\/webhooks\/(\d+)\//, (m, id) => `/api/webhooks/${names.get(Number(id)) ?? id}/`);
      return v;
    });
  }

  it('walks the same scenario through REST and tRPC with the same data and the same errors', async () => {
    const stranger = await app.register();
    const foreign = (await created(stranger.token)).id;
    const run = async (door: 'rest' | 'trpc') => {
      const { token } = await app.register();
      await someWrites(token, 2);
      const refs: Record<string, number> = { foreign };
      const outcomes: Outcome[] = [];
      for (const step of steps) {
        const input = step.input?.(refs);
        let outcome: Outcome;
        if (door === 'rest') {
          const rest = REST[step.procedure];
          const res = await app.request(rest.method, rest.path(input ?? {}), { token, body: rest.body?.(input ?? {}) });
          outcome = res.status < 300
            ? { ok: true, output: res.status === 204 ? undefined : res.body }
            : { ok: false, status: res.status, errors: res.body.errors, ...(res.body.meta ? { meta: res.body.meta } : {}) };
        } else {
          const client = app.trpc(token).webhooks as any;
          try {
            outcome = { ok: true, output: await client[step.procedure][KIND[step.procedure]](input) };
          } catch (error) {
            if (!(error instanceof TRPCClientError)) throw error;
            const data = error.data as TrpcFailure;
            outcome = { ok: false, status: data.httpStatus, errors: data.errors, ...(data.meta ? { meta: data.meta } : {}) };
          }
        }
        if (step.fails) {
          expect(outcome.ok, `${door} ${step.name}`).toBe(false);
          if (!outcome.ok) expect(outcome.errors.map((e) => e.code), `${door} ${step.name}`).toEqual(step.fails);
        } else {
          expect(outcome, `${door} ${step.name}`).toMatchObject({ ok: true });
        }
        if (step.keep && outcome.ok) refs[step.keep] = (outcome.output as Json).data.id;
        outcomes.push(normalise(outcome, refs) as Outcome);
      }
      return outcomes;
    };
    const rest = await run('rest');
    const trpc = await run('trpc');
    for (const [i, step] of steps.entries()) expect(trpc[i], step.name).toEqual(rest[i]);
  });
});
