/**
 * Webhooks as their owner manages them (API-CONTRACT.md §14, with §1 and §2), black-box on
 * both doors (REST and the typed tRPC client), bodies compared whole: the document a create
 * answers (its place after the newest event of the log, a secret shown once and never again),
 * list, get, each edit, disabling and enabling, delete; the limit of 10 (also for 12 creations
 * sent at once); another user's, unknown and malformed ids on every id route, changing
 * nothing; every validation rule of the body, every URL refusal (scheme, user info, length,
 * private addresses written every way, names resolving to private addresses, a name that does
 * not resolve) on create and on PATCH. Replay, enabling a pruned webhook, the test event, the
 * secret, the deliveries page, 401 and both doors: webhooks-actions.test.ts.
 *
 * Defects found are pinned as `it.fails` ("defect: …"): each fails while the service keeps
 * the defect, and passes (making the run fail) once it is fixed, to be turned into `it`.
 */
import { describe, expect, it } from 'vitest';
import { errorShape, expectError, expectErrors, JSON_CT } from '../helpers/envelope.js';
import { T0, seconds } from '../helpers/test-app.js';
import { type Attributes, create, created, HOOKS, ID_ROUTES, type Json, newestEventId, ONE, pairs, patch, replay, rowOf, rowsOf, SECRET, someWrites, trpcFailure, URL_2048, useWebhookApp, webhookJson } from '../helpers/webhook-api.js';

const { app, db } = useWebhookApp();

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
