/**
 * Webhook writes take an Idempotency-Key as every write does (API-CONTRACT.md §11), on both
 * doors: a retried create replays its first answer (the same webhook and secret) and makes no
 * second webhook, also sent in parallel; another request with the key is 422
 * idempotency_key_reused; the 11th webhook's 422 limit_reached is kept and replayed; a URL
 * refused before the write ran keeps nothing; a rotation retried gives the secret of the first.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { onlyError, useTestAppWithSql } from '../helpers/test-app.js';

const { app, db } = useTestAppWithSql();

const HOOKS = '/api/users/me/webhooks';
const url = (n: number | string) => `https://hooks.example.com/${n}`;
const webhooksOf = async (userId: number) => (await db.query('select count(*)::int as n from webhooks where user_id = $1', [userId])).rows[0].n as number;
const recordsOf = async (userId: number) => (await db.query('select count(*)::int as n from idempotency_keys where user_id = $1', [userId])).rows[0].n as number;

describe('webhook writes with an Idempotency-Key', () => {
  it('replays a create: the same status, webhook and secret, Idempotent-Replayed, and one webhook', async () => {
    const { id, token } = await app.register();
    const k = randomUUID();
    const body = { webhook: { url: url('a'), events: ['task.*'] } };
    const first = await app.request('POST', HOOKS, { token, body, headers: { 'Idempotency-Key': k } });
    const second = await app.request('POST', HOOKS, { token, body, headers: { 'Idempotency-Key': k } });
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.text).toBe(first.text);
    expect(await webhooksOf(id)).toBe(1);
    // Without a key, the same body makes another one.
    expect((await app.request('POST', HOOKS, { token, body })).status).toBe(201);
    expect(await webhooksOf(id)).toBe(2);
  });

  it('runs a create sent five times at once with one key once', async () => {
    const { id, token } = await app.register();
    const k = randomUUID();
    const body = { webhook: { url: url('parallel') } };
    const answers = await Promise.all(Array.from({ length: 5 }, () => app.request('POST', HOOKS, { token, body, headers: { 'Idempotency-Key': k } })));
    const created = answers.filter((a) => a.status === 201);
    // A retry that meets the first still running is 409 request_in_progress; every 201 is the one webhook.
    for (const a of answers) expect([201, 409]).toContain(a.status);
    expect(new Set(created.map((a) => a.body.data.id)).size).toBe(1);
    expect(await webhooksOf(id)).toBe(1);
  });

  it('refuses the key with another request: 422 idempotency_key_reused, nothing made', async () => {
    const { id, token } = await app.register();
    const k = randomUUID();
    expect((await app.request('POST', HOOKS, { token, body: { webhook: { url: url(1) } }, headers: { 'Idempotency-Key': k } })).status).toBe(201);
    const other = await app.request('POST', HOOKS, { token, body: { webhook: { url: url(2) } }, headers: { 'Idempotency-Key': k } });
    expect(other.status).toBe(422);
    expect(onlyError(other.body)).toMatchObject({ code: 'idempotency_key_reused', source: { parameter: 'Idempotency-Key' } });
    expect(await webhooksOf(id)).toBe(1);
  });

  it('keeps and replays the 11th webhook’s limit_reached, even once there is room again', async () => {
    const { id, token } = await app.register();
    const made = [];
    for (let i = 0; i < 10; i++) made.push((await app.request('POST', HOOKS, { token, body: { webhook: { url: url(i) } } })).body.data.id);
    const k = randomUUID();
    const body = { webhook: { url: url('eleventh') } };
    const refused = await app.request('POST', HOOKS, { token, body, headers: { 'Idempotency-Key': k } });
    expect(refused.status).toBe(422);
    expect(onlyError(refused.body)).toMatchObject({ code: 'limit_reached', source: { pointer: '/webhook' } });
    expect((await app.request('DELETE', `/api/webhooks/${made[0]}`, { token })).status).toBe(204);
    const replayed = await app.request('POST', HOOKS, { token, body, headers: { 'Idempotency-Key': k } });
    expect(replayed.status).toBe(422);
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.text).toBe(refused.text);
    expect(await webhooksOf(id)).toBe(9);
  });

  it('keeps nothing for a URL refused before the write ran', async () => {
    const { id, token } = await app.register();
    const k = randomUUID();
    const refused = await app.request('POST', HOOKS, { token, body: { webhook: { url: 'https://loopback.private.test/x' } }, headers: { 'Idempotency-Key': k } });
    expect(refused.status).toBe(422);
    expect(onlyError(refused.body)).toMatchObject({ code: 'invalid', source: { pointer: '/webhook/url' } });
    expect(await recordsOf(id)).toBe(0);
    // The key is free: a good request with it runs.
    expect((await app.request('POST', HOOKS, { token, body: { webhook: { url: url('x') } }, headers: { 'Idempotency-Key': k } })).status).toBe(201);
  });

  it('replays a rotation: the secret of the first, and the webhook rotated once', async () => {
    const { token } = await app.register();
    const created = await app.request('POST', HOOKS, { token, body: { webhook: { url: url('r') } } });
    const path = `/api/webhooks/${created.body.data.id}/secret`;
    const k = randomUUID();
    const first = await app.request('POST', path, { token, headers: { 'Idempotency-Key': k } });
    const second = await app.request('POST', path, { token, headers: { 'Idempotency-Key': k } });
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(second.body.meta.secret).toBe(first.body.meta.secret);
    const row = (await db.query('select secret, retired_secrets from webhooks where id = $1', [created.body.data.id])).rows[0];
    expect(row).toEqual({ secret: first.body.meta.secret, retired_secrets: [created.body.meta.secret] });
  });

  it('replays on /trpc as on REST, across the doors', async () => {
    const { id, token } = await app.register();
    const k = randomUUID();
    const body = { webhook: { url: url('t') } };
    const rest = await app.request('POST', HOOKS, { token, body, headers: { 'Idempotency-Key': k } });
    const trpc = await app.request('POST', '/trpc/webhooks.create', { token, body: { json: body }, headers: { 'Idempotency-Key': k } });
    expect(trpc.status).toBe(200);
    expect(trpc.headers.get('idempotent-replayed')).toBe('true');
    expect(trpc.body.result.data.json).toEqual(rest.body);
    expect(await webhooksOf(id)).toBe(1);
  });
});
