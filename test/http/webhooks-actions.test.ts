/**
 * What an owner does with a webhook beyond its fields (API-CONTRACT.md §14, with §1 and §2),
 * black-box on both doors, bodies compared whole: replay and its 410 for a place no longer
 * kept (events pruned with SQL); enabling a webhook whose place was pruned; the test event;
 * rotating the secret; the deliveries page (rows written with SQL); 401 without a token; the
 * same data and errors through both doors. Creating, editing and validating a webhook:
 * webhooks.test.ts.
 */
import { TRPCClientError } from '@trpc/client';
import { describe, expect, it } from 'vitest';
import { errorShape, expectError, JSON_CT } from '../helpers/envelope.js';
import { T0, seconds } from '../helpers/test-app.js';
import { created, HOOKS, HOUR_MS, ID_ROUTES, type Json, ONE, pairs, patch, prune, replay, rowOf, rowsOf, SECRET, someWrites, trpcFailure, type TrpcFailure, useWebhookApp } from '../helpers/webhook-api.js';

const { app, db } = useWebhookApp();

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
        nextAttemptAt: g % 3 === 1 ? base + g * 10 + 300 : 0,
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
