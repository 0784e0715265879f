/**
 * Rotating a webhook's secret (API-CONTRACT.md §14): each secret a rotation retires keeps
 * signing until 24 hours after its own rotation, whatever rotations follow, and signs no more
 * from then on. Deliveries are made by the service's deliverer (src/webhooks/deliverer.ts) in
 * this process, on the app's manual clock, to a loopback receiver; every signature is checked
 * with the official `standardwebhooks` library, each secret alone, at the clock's time (the
 * library reads `Date.now()` to judge the timestamp: it is set to the clock while it verifies).
 * Rotations go through both doors. No sleep: the clock is moved by hand, and the test waits only
 * for the receiver to get what it asked for.
 */
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/core/logger.js';
import { WebhookDeliverer } from '../../src/webhooks/deliverer.js';
import { expectError } from '../helpers/envelope.js';
import { eventually } from '../helpers/eventually.js';
import { trpcError } from '../helpers/hostile.js';
import { T0, useTestAppWithSql } from '../helpers/test-app.js';
import { startReceiver, type Received, type Receiver } from '../helpers/webhook-receiver.js';

const HOUR_MS = 3_600_000;
const ONE = (id: number) => `/api/webhooks/${id}`;

let deliverer: WebhookDeliverer | undefined;
const { app, db } = useTestAppWithSql({
  resetClock: true,
  // The receiver listens on the loopback, over http.
  webhooks: { allowPrivateUrls: true, wake: (userId) => deliverer?.wake(userId) },
});
let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
  deliverer = new WebhookDeliverer({
    em: () => app.orm.em.fork(),
    // Woken by the procedures (test events) and by the test itself, never by the change log.
    notifications: { watch: async () => () => undefined },
    config: { retrySchedule: [3_600], timeoutMs: 5_000, allowPrivateUrls: true },
    log: createLogger('silent'),
    pollMs: 3_600_000,
    now: () => app.clock.now().getTime(),
  });
  await deliverer.start();
});
afterAll(async () => {
  await deliverer?.stop();
  await receiver?.close();
});

async function createdWebhook(token: string): Promise<{ id: number; secret: string }> {
  const res = await app.request('POST', '/api/users/me/webhooks', { token, body: { webhook: { url: receiver.url } } });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.data.id, secret: res.body.meta.secret };
}

/** A rotation through REST or tRPC; the new secret. */
async function rotated(token: string, id: number, door: 'rest' | 'trpc'): Promise<string> {
  if (door === 'trpc') return (await app.trpc(token).webhooks.rotateSecret.mutate({ id })).meta.secret;
  const res = await app.request('POST', `${ONE(id)}/secret`, { token, body: {} });
  expect(res.status, res.text).toBe(201);
  return res.body.meta.secret;
}

/** Asks for a test event and returns its delivery, as the receiver got it. */
async function delivery(token: string, id: number): Promise<Received> {
  const before = receiver.received.length;
  const res = await app.request('POST', `${ONE(id)}/test`, { token, body: {} });
  expect(res.status, res.text).toBe(202);
  await eventually(() => receiver.received.length > before, { message: 'the test event reached the receiver' });
  const got = receiver.received.at(-1)!;
  expect(got.json).toMatchObject({ type: 'webhook.test', data: { type: 'webhook', id } });
  // Recorded (its attempt listed, the lease given back) before the test goes on to read the webhook's row.
  await eventually(async () => {
    const attempts = await app.request('GET', `${ONE(id)}/deliveries`, { token });
    return attempts.body.data?.[0]?.attributes.eventId === got.json.id;
  }, { message: 'the test event\'s attempt was recorded' });
  expect(Number(got.headers['webhook-timestamp'])).toBe(Math.floor(app.clock.now().getTime() / 1000));
  return got;
}

/** Waits until the webhook's place is its user's newest event and no claim holds it: every attempt is made and recorded. */
async function settled(id: number): Promise<void> {
  await eventually(async () => {
    const [row] = (await db.query('select w.cursor = u.last_event_seq and w.lease_owner is null and w.test_events = \'[]\' as done from webhooks w join users u on u.id = w.user_id where w.id = $1', [id])).rows;
    return row?.done === true;
  }, { message: 'the webhook delivered everything and gave its lease back' });
}

const signaturesOf = (r: Received) => String(r.headers['webhook-signature']).split(' ');

/** What `standardwebhooks` makes of a delivery with `secret`, at the clock's time: the payload, or its error. */
function verified(secret: string, r: Received): unknown {
  vi.useFakeTimers({ toFake: ['Date'], now: app.clock.now() });
  try {
    return new Webhook(secret).verify(r.body, {
      'webhook-id': String(r.headers['webhook-id']),
      'webhook-timestamp': String(r.headers['webhook-timestamp']),
      'webhook-signature': String(r.headers['webhook-signature']),
    });
  } catch (error) {
    return error;
  } finally {
    vi.useRealTimers();
  }
}

/** The delivery carries one signature per secret of `signing`, each verifies alone, and none of `stopped` verifies. */
function expectSignedBy(r: Received, signing: string[], stopped: string[]): void {
  expect(signaturesOf(r)).toHaveLength(signing.length);
  for (const s of signaturesOf(r)) expect(s).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
  for (const [i, secret] of signing.entries()) expect(verified(secret, r), `secret ${i} of ${signing.length}`).toEqual(r.json);
  for (const secret of stopped) expect(String(verified(secret, r))).toMatch(/signature/i);
}

describe('rotating the secret', () => {
  it('three rotations at t, t+1h and t+2h sign with four secrets until t+24h; then each retired one drops at its own time', async () => {
    const { token } = await app.register();
    const { id, secret: s0 } = await createdWebhook(token);
    const s1 = await rotated(token, id, 'rest');
    app.clock.advance(3_600);
    const s2 = await rotated(token, id, 'trpc');
    app.clock.advance(3_600);
    const s3 = await rotated(token, id, 'rest');
    expect(new Set([s0, s1, s2, s3]).size).toBe(4);

    expectSignedBy(await delivery(token, id), [s3, s0, s1, s2], []);
    app.clock.set(T0 + 24 * HOUR_MS - 1_000);
    expectSignedBy(await delivery(token, id), [s3, s0, s1, s2], []);
    // 24 hours after its rotation, the first retired secret signs no more; the others still do.
    app.clock.set(T0 + 24 * HOUR_MS);
    expectSignedBy(await delivery(token, id), [s3, s1, s2], [s0]);
    app.clock.set(T0 + 25 * HOUR_MS);
    expectSignedBy(await delivery(token, id), [s3, s2], [s0, s1]);
    app.clock.set(T0 + 26 * HOUR_MS);
    expectSignedBy(await delivery(token, id), [s3], [s0, s1, s2]);
  });

  it('a rotation keeps every retired secret that still signs, and drops those that no longer do', async () => {
    const { id: userId, token } = await app.register();
    const { id, secret: s0 } = await createdWebhook(token);
    const s1 = await rotated(token, id, 'trpc');
    app.clock.advance(12 * 3_600);
    const s2 = await rotated(token, id, 'rest');
    // s0 stopped at t+24h; s1, retired at t+12h, signs until t+36h.
    app.clock.set(T0 + 30 * HOUR_MS);
    const s3 = await rotated(token, id, 'trpc');
    const row = (await db.query('select secret, retired_secrets, retired_until from webhooks where user_id = $1 and id = $2', [userId, id])).rows[0];
    expect(row.secret).toBe(s3);
    expect(row.retired_secrets).toEqual([s1, s2]);
    expect(row.retired_until.map((d: Date) => d.getTime())).toEqual([T0 + 36 * HOUR_MS, T0 + 54 * HOUR_MS]);
    expectSignedBy(await delivery(token, id), [s3, s1, s2], [s0]);
  });

  it('a retired secret stops signing at its time also between two events of one lease', async () => {
    const { token } = await app.register();
    const { id, secret: s0 } = await createdWebhook(token);
    const s1 = await rotated(token, id, 'rest');
    app.clock.set(T0 + 24 * HOUR_MS - 1_000);
    // Two events wait; the clock passes the retired secret's end while the first is answered.
    // The receiver is set up first: a round the rotation woke may still be under way and take
    // the first event as soon as it is written.
    const before = receiver.received.length;
    receiver.respond((_request, res) => {
      app.clock.set(T0 + 24 * HOUR_MS);
      res.writeHead(204).end();
    });
    try {
      for (const label of ['first', 'second']) {
        expect((await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label } } })).status).toBe(201);
      }
      deliverer!.wake(null);
      await eventually(() => receiver.received.length >= before + 2, { message: 'both events reached the receiver' });
      await eventually(async () => (await app.request('GET', `${ONE(id)}/deliveries`, { token })).body.data?.length === 2, {
        message: 'both attempts were recorded',
      });
    } finally {
      receiver.respond((_request, res) => {
        res.writeHead(204).end();
      });
    }
    const [first, second] = receiver.received.slice(before);
    expect(first!.json.type).toBe('task.created');
    expect(second!.json.type).toBe('task.created');
    app.clock.set(T0 + 24 * HOUR_MS - 1_000);
    expectSignedBy(first!, [s1, s0], []);
    app.clock.set(T0 + 24 * HOUR_MS);
    expectSignedBy(second!, [s1], [s0]);
  });

  it('a rotation while an event is being delivered: that event is delivered once, and the next request is signed with the new secret too', async () => {
    const { token } = await app.register();
    const { id, secret: s0 } = await createdWebhook(token);
    const before = receiver.received.length;
    let s1: string | undefined;
    // The first request is answered once the secret has been rotated meanwhile.
    receiver.respond(async (_request, res) => {
      s1 ??= await rotated(token, id, 'trpc');
      res.writeHead(204).end();
    });
    try {
      for (const label of ['first', 'second']) {
        expect((await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label } } })).status).toBe(201);
      }
      deliverer!.wake(null);
      await eventually(async () => (await app.request('GET', `${ONE(id)}/deliveries`, { token })).body.data?.length >= 2, {
        message: 'both attempts were recorded',
      });
    } finally {
      receiver.respond((_request, res) => {
        res.writeHead(204).end();
      });
    }
    await settled(id);
    const attempts = (await app.request('GET', `${ONE(id)}/deliveries`, { token })).body.data;
    expect(attempts.map((a: any) => [a.attributes.eventType, a.attributes.attempt, a.attributes.outcome])).toEqual([
      ['task.created', 1, 'delivered'],
      ['task.created', 1, 'delivered'],
    ]);
    const got = receiver.received.slice(before);
    expect(got.map((r) => (r.json as any).data.attributes.label)).toEqual(['first', 'second']);
    expectSignedBy(got[0]!, [s0], []);
    expectSignedBy(got[1]!, [s1!, s0], []);
  });

  it('a test event under way when a replay is asked for is delivered once', async () => {
    const { token } = await app.register();
    const { id } = await createdWebhook(token);
    expect((await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'kept' } } })).status).toBe(201);
    const newest = (await app.request('GET', '/api/users/me/events', { token })).body.meta.last_event_id as string;
    const before = receiver.received.length;
    let replayed = false;
    receiver.respond(async (request, res) => {
      if (request.json.type === 'webhook.test' && !replayed) {
        replayed = true;
        const replay = await app.request('POST', `${ONE(id)}/replay`, { token, body: { replay: { after: newest } } });
        expect(replay.status, replay.text).toBe(202);
      }
      res.writeHead(204).end();
    });
    try {
      expect((await app.request('POST', `${ONE(id)}/test`, { token, body: {} })).status).toBe(202);
      await eventually(async () => (await app.request('GET', `${ONE(id)}/deliveries`, { token })).body.data?.some((a: any) => a.attributes.eventType === 'webhook.test'), {
        message: 'the test event\'s attempt was recorded',
      });
      deliverer!.wake(null);
      await eventually(async () => (await app.request('GET', `${ONE(id)}/deliveries`, { token })).body.data?.length >= 2, {
        message: 'the logged event was delivered too',
      });
    } finally {
      receiver.respond((_request, res) => {
        res.writeHead(204).end();
      });
    }
    await settled(id);
    const types = receiver.received.slice(before).map((r) => r.json.type);
    expect(types.filter((t) => t === 'webhook.test')).toHaveLength(1);
    expect((await app.request('GET', `${ONE(id)}/deliveries`, { token })).body.data.filter((a: any) => a.attributes.eventType === 'webhook.test')).toHaveLength(1);
  });

  it('ten retired secrets may sign at once; an eleventh rotation is 429 rate_limited until the oldest stops, on both doors', async () => {
    const { id: userId, token } = await app.register();
    const { id, secret: s0 } = await createdWebhook(token);
    const secrets = [s0];
    for (let i = 0; i < 10; i++) {
      secrets.push(await rotated(token, id, i % 2 === 0 ? 'rest' : 'trpc'));
      app.clock.advance(60);
    }
    expectSignedBy(await delivery(token, id), [secrets.at(-1)!, ...secrets.slice(0, -1)], []);
    const rowBefore = (await db.query('select * from webhooks where user_id = $1 and id = $2', [userId, id])).rows[0];

    // The oldest retired secret stops 24 hours after the first rotation, at T0: 24 h less the ten minutes passed.
    const refused = await app.request('POST', `${ONE(id)}/secret`, { token, body: {} });
    expectError(refused, 429, 'rate_limited');
    expect(refused.headers.get('retry-after')).toBe(String(24 * 3_600 - 600));
    const typed = await trpcError(app.trpc(token).webhooks.rotateSecret.mutate({ id }));
    expect(typed).toMatchObject({ code: 'rate_limited', httpStatus: 429, errors: [{ status: '429', code: 'rate_limited' }] });
    expect((await db.query('select * from webhooks where user_id = $1 and id = $2', [userId, id])).rows[0]).toEqual(rowBefore);

    app.clock.set(T0 + 24 * HOUR_MS);
    const next = await rotated(token, id, 'rest');
    expectSignedBy(await delivery(token, id), [next, ...secrets.slice(1)], [s0]);
  });
});
