/**
 * What a batch (API-CONTRACT.md §15) is refused for before it runs, on both doors
 * (POST /api/batch and tRPC batch.apply, written by hand as superjson's `{"json": …}`):
 *
 * - the rate limit: each operation counts as one request once the batch is admitted; a batch
 *   refused with 429 counts as one request, so a refusal leaves the token's allowance reduced
 *   by exactly one, and a batch that fits what is left passes. The counters are in the
 *   database: two server processes on one database share them, also for batches sent at once;
 * - If-Match and If-None-Match request headers: 400 `invalid` with `source.header`, nothing
 *   run and nothing kept under the Idempotency-Key (preconditions go in each `if_match`).
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { doc, schemaErrors } from '../helpers/openapi-document.js';
import { T0, onlyError, useTestApp, useTestAppWithSql, type TestApp } from '../helpers/test-app.js';

const DOORS = ['rest', 'trpc'] as const;
type Door = (typeof DOORS)[number];

const LIMIT = 10;
const RATE_LIMITS = { authPerMinute: 0, perMinute: LIMIT };

interface Answer {
  status: number;
  headers: Headers;
  errors: Array<Record<string, any>>;
  data: Array<{ status: number; body: any }>;
}

/** A batch through a door: the body as JSON text, under superjson's `json` on /trpc. */
async function send(app: TestApp, door: Door, token: string, operations: unknown[], headers: Record<string, string> = {}): Promise<Answer> {
  const body = JSON.stringify(door === 'rest' ? { operations } : { json: { operations } });
  const url = door === 'rest' ? `${app.baseUrl}/api/batch` : `${app.baseUrl}/trpc/batch.apply`;
  const res = await fetch(url, { method: 'POST', headers: { Authorization: token, 'Content-Type': 'application/json', ...headers }, body });
  const parsed = (await res.json()) as any;
  if (door === 'rest') return { status: res.status, headers: res.headers, errors: parsed.errors ?? [], data: parsed.data ?? [] };
  return { status: res.status, headers: res.headers, errors: parsed.error?.json?.data?.errors ?? [], data: parsed.result?.data?.json?.data ?? [] };
}

const creates = (n: number, label = 'task') => Array.from({ length: n }, (_, i) => ({ op: 'tasks.create', input: { task: { label: `${label} ${i}` } } }));

/** What is left of the token's allowance, as a plain request (which counts one) reads it. */
async function remainingAfterOneMore(app: TestApp, token: string): Promise<number> {
  const res = await app.request('GET', '/api/users/me', { token });
  expect(res.status, res.text).toBe(200);
  return Number(res.headers.get('ratelimit-remaining'));
}

describe.each(DOORS)('the rate limit, through %s', (door) => {
  const { app, db } = useTestAppWithSql({ resetClock: true, rateLimits: RATE_LIMITS });
  const taskCount = async (userId: number) => (await db.query('select count(*)::int as n from tasks where user_id = $1', [userId])).rows[0].n;

  it('refuses a batch too large for what is left with 429 and Retry-After, counting it as one request; one that fits passes and counts each operation', async () => {
    const { id, token } = await app.register();
    const first = await send(app, door, token, creates(4));
    expect(first.status).toBe(200);
    expect(first.headers.get('ratelimit-remaining')).toBe(String(LIMIT - 4));

    const over = await send(app, door, token, creates(7));
    expect(over.status).toBe(429);
    expect(over.errors).toHaveLength(1);
    expect(over.errors[0]).toMatchObject({ status: '429', code: 'rate_limited' });
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // The refusal counted one request: 5 of 10 spent, not 11.
    expect(over.headers.get('ratelimit-remaining')).toBe(String(LIMIT - 5));
    expect(await remainingAfterOneMore(app, token)).toBe(LIMIT - 6);

    // What is left is a batch's: 4 operations fit exactly, and spend the allowance.
    const fits = await send(app, door, token, creates(4, 'late'));
    expect(fits.status, JSON.stringify(fits.errors)).toBe(200);
    expect(fits.data.map((r) => r.status)).toEqual([201, 201, 201, 201]);
    expect(fits.headers.get('ratelimit-remaining')).toBe('0');
    expect(await taskCount(id)).toBe(8);
    expect((await app.request('GET', '/api/users/me', { token })).status).toBe(429);
  });

  it('refuses a batch of more operations than the limit, saying so, and counts it as one request; its Retry-After is when the window is empty', async () => {
    const { id, token } = await app.register();
    const over = await send(app, door, token, creates(LIMIT + 1));
    expect(over.status).toBe(429);
    expect(over.errors[0]).toMatchObject({ code: 'rate_limited' });
    expect(over.errors[0]!.detail).toContain(`${LIMIT + 1} operations are more than the ${LIMIT} requests a minute`);
    // Nothing counted but the batch's call: a minute and a bit at the latest, when it has left the window.
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(60);
    expect(Number(over.headers.get('retry-after'))).toBeLessThanOrEqual(120);
    expect(await remainingAfterOneMore(app, token)).toBe(LIMIT - 2);
    expect(await taskCount(id)).toBe(0);
    // A batch of exactly what is left passes.
    expect((await send(app, door, token, creates(LIMIT - 2))).status).toBe(200);
  });

  it("a refused batch's Retry-After is honest: after it, the same batch passes", async () => {
    const { token } = await app.register();
    expect((await send(app, door, token, creates(8))).status).toBe(200);
    app.clock.advance(30);
    const over = await send(app, door, token, creates(6));
    expect(over.status).toBe(429);
    const wait = Number(over.headers.get('retry-after'));
    expect(wait).toBeGreaterThanOrEqual(1);
    app.clock.advance(wait);
    const retried = await send(app, door, token, creates(6));
    expect(retried.status, JSON.stringify(retried.errors)).toBe(200);
  });
});

describe('the rate limit of two server processes on one database', () => {
  const clock = new ManualClock(T0);
  const one = useTestApp({ rateLimits: RATE_LIMITS, clock });
  const two = useTestApp(() => ({ databaseUrl: one.databaseUrl, rateLimits: RATE_LIMITS, clock }));

  it('is one allowance: of two batches sent at once that do not both fit, one passes and the other counts one request', async () => {
    const { token } = await one.register();
    const [a, b] = await Promise.all([send(one, 'rest', token, creates(6, 'a')), send(two, 'trpc', token, creates(6, 'b'))]);
    expect([a.status, b.status].sort()).toEqual([200, 429]);
    // 6 operations and one refused call: 7 of 10.
    expect(await remainingAfterOneMore(two, token)).toBe(LIMIT - 8);
    expect(await remainingAfterOneMore(one, token)).toBe(LIMIT - 9);
  });
});

describe.each(DOORS)('If-Match and If-None-Match on a batch, through %s', (door) => {
  const { app, db } = useTestAppWithSql({ resetClock: true });

  it.each(['If-Match', 'If-None-Match'])('%s is 400 invalid on the header; nothing runs and the Idempotency-Key keeps nothing', async (header) => {
    const { id, token } = await app.register();
    const project = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Kept' } } });
    const etag = project.headers.get('etag')!;
    const key = randomUUID();
    for (const value of [etag, '*', '"x"', '']) {
      const refused = await send(app, door, token, creates(1, 'never'), { [header]: value, 'Idempotency-Key': key });
      expect(refused.status).toBe(400);
      expect(onlyError({ errors: refused.errors })).toMatchObject({ status: '400', code: 'invalid', source: { header } });
      expect(Object.keys(refused.errors[0]!.source)).toEqual(['header']);
    }
    // As openapi.json documents it: a code of the batch's 400, in the error envelope.
    const documented = doc.paths['/api/batch'].post.responses['400'];
    expect(documented['x-error-codes']).toContain('invalid');
    expect(schemaErrors('batch 400', documented.content['application/json'].schema, { errors: [onlyError({ errors: (await send(app, door, token, creates(1), { [header]: '*' })).errors })] })).toBeNull();
    const tasks = await db.query('select count(*)::int as n from tasks where user_id = $1', [id]);
    expect(tasks.rows[0].n).toBe(0);
    // The key was not kept: the same key with a batch that may run runs it, once.
    const ran = await send(app, door, token, creates(1, 'ran'), { 'Idempotency-Key': key });
    expect(ran.status, JSON.stringify(ran.errors)).toBe(200);
    expect(ran.headers.get('idempotent-replayed')).toBeNull();
    expect((await db.query('select label from tasks where user_id = $1', [id])).rows).toEqual([{ label: 'ran 0' }]);
  });

  it('both headers at once are both reported, If-Match first (API-CONTRACT.md §2: every validation error of a request)', async () => {
    const { token } = await app.register();
    const refused = await send(app, door, token, creates(1, 'never'), { 'If-None-Match': '*', 'If-Match': '"x"' });
    expect(refused.status).toBe(400);
    expect(refused.errors.map((e) => [e.code, e.source])).toEqual([
      ['invalid', { header: 'If-Match' }],
      ['invalid', { header: 'If-None-Match' }],
    ]);
  });

  it('an operation\'s if_match stays the way to give a precondition', async () => {
    const { token } = await app.register();
    const project = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Guarded' } } });
    const etag = project.headers.get('etag')!;
    const update = (if_match: string) => [{ op: 'projects.update', input: { id: project.body.data.id, project: { description: 'x' } }, if_match }];
    expect((await send(app, door, token, update(etag))).status).toBe(200);
    const stale = await send(app, door, token, update(etag));
    expect(stale.status).toBe(412);
    expect(stale.errors[0]).toMatchObject({ code: 'precondition_failed', source: { pointer: '/operations/0/if_match' } });
  });
});
