/**
 * Webhook delivery at its edges (API-CONTRACT.md §14), where a fresh reading of the deliverer
 * found it wanting:
 *
 * - a step recorded while the owner's edit holds the webhook (a replay, a new URL) records
 *   nothing of the old claim and gives its lease back at once, never a webhook leased by nobody
 *   until the lease runs out;
 * - a second claim by the same process is a lease of its own: the first claim's steps no
 *   longer hold;
 * - a graceful stop does not record the attempt it cuts off as a failure: no attempt counted,
 *   no retry planned, the lease back for another process;
 * - events retention removed before they were delivered stop the webhook (disabled, with why),
 *   never skipped, and never a loop of empty claims;
 * - a new URL starts afresh: the old one's failures and wait are not carried over;
 * - a keyed request refused with 410 cursor_expired replays its meta.last_event_id too.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MikroORM } from '@mikro-orm/postgresql';
import { openOrm } from '../../src/app/orm.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/core/logger.js';
import { startService, type RunningService } from '../../src/server.js';
import { claimDue, recordStep } from '../../src/webhooks/delivery.store.js';
import { eventually } from '../helpers/eventually.js';
import { call, registerUser, request } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/test-app.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

const HOOKS = '/api/users/me/webhooks';

describe('the delivery queue’s statements', () => {
  let orm: MikroORM;
  let db: pg.Client;
  let userId: number;
  let webhookId: number;
  let url: string;
  const em = () => orm.em.fork();

  beforeAll(async () => {
    url = await createTestDatabase();
    orm = await openOrm(url, { migrate: true, poolSize: 4 });
    db = new pg.Client({ connectionString: url });
    await db.connect();
    // Ids are bigint: node-postgres reads them as text (the service's pool reads them as numbers).
    userId = Number((await db.query(`insert into users (username, password_hash, created_at) values ('edge', 'x', now()) returning id`)).rows[0].id);
    webhookId = Number((await db.query(
      `insert into webhooks (user_id, url, events, secret, created_at, updated_at, cursor, next_attempt_at)
       values ($1, 'http://127.0.0.1:9/', '["*"]', 'whsec_AAAA', now(), now(), 0, 'epoch') returning id`,
      [userId],
    )).rows[0].id);
    // One event waiting behind the webhook's place.
    await db.query(`insert into events (user_id, seq, type, data, at) values ($1, 1, 'task.created', '{}', now())`, [userId]);
    await db.query(`update users set last_event_seq = 1 where id = $1`, [userId]);
  });
  afterAll(async () => {
    await db?.end();
    await orm?.close(true);
  });

  const row = async () => (await db.query('select lease_owner, lease_until, cursor::text, generation from webhooks where id = $1', [webhookId])).rows[0];
  const claim = async (owner: string) => {
    const now = Date.now();
    return claimDue(em(), owner, new Date(now), new Date(now + 60_000), 10, [userId]);
  };

  it('a step recorded while an edit holds the webhook records nothing of the claim and gives its lease back', async () => {
    const [claimed] = await claim('p1:1');
    expect(claimed).toMatchObject({ id: webhookId, lease_owner: 'p1:1' });
    // The owner's replay holds the row (its transaction has moved the generation, not yet committed).
    const edit = new pg.Client({ connectionString: url });
    await edit.connect();
    try {
      await edit.query('begin');
      await edit.query('update webhooks set generation = generation + 1, cursor = 0 where id = $1', [webhookId]);
      const step = recordStep(em(), {
        userId, id: webhookId, owner: 'p1:1', generation: claimed!.generation, cursor: '1', leaseUntil: new Date(Date.now() + 60_000), now: new Date(),
      });
      // The step waits for the edit; the edit commits.
      await new Promise((resolve) => setTimeout(resolve, 100)); // lets the step reach the row lock; the outcome does not depend on it
      await edit.query('commit');
      expect(await step).toEqual({ held: false, moved: true, more: false, enabled: false });
    } finally {
      await edit.end();
    }
    expect(await row()).toMatchObject({ lease_owner: null, lease_until: null, cursor: '0' });
    // Free for the next claim at once.
    expect(await claim('p2:1')).toHaveLength(1);
  });

  it('a second claim by one process is a lease of its own: the first claim’s steps no longer hold', async () => {
    await db.query('update webhooks set lease_owner = null, lease_until = null where id = $1', [webhookId]);
    const [first] = await claim('p3:1');
    // The first claim's lease runs out (its loop stalled) and the same process claims it again.
    await db.query(`update webhooks set lease_until = now() - interval '1 second' where id = $1`, [webhookId]);
    const [second] = await claim('p3:2');
    expect(second).toMatchObject({ lease_owner: 'p3:2' });
    const stale = await recordStep(em(), { userId, id: webhookId, owner: 'p3:1', generation: first!.generation, cursor: '1', leaseUntil: null, now: new Date() });
    expect(stale).toEqual({ held: false, moved: false, more: false, enabled: false });
    expect(await row()).toMatchObject({ lease_owner: 'p3:2', cursor: '0' });
  });
});

describe('a service delivering webhooks', () => {
  let databaseUrl: string;
  let receiver: Receiver;
  const services: RunningService[] = [];
  const start = async (env: Record<string, string> = {}) => {
    const config = {
      ...loadConfig({ WEBHOOK_ALLOW_PRIVATE_URLS: '1', WEBHOOK_RETRY_SCHEDULE: '0.2,0.2', WEBHOOK_TIMEOUT_MS: '1000', ...env }),
      databaseUrl, port: 0, host: '127.0.0.1', passwordHashCost: 1024, rateLimitAuthPerMinute: 0, rateLimitPerMinute: 0,
    };
    const service = await startService({ config, logger: createLogger('silent') });
    services.push(service);
    return service;
  };
  const sql = async (text: string, params: unknown[] = []) => {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      return (await client.query(text, params)).rows;
    } finally {
      await client.end();
    }
  };

  beforeAll(async () => {
    databaseUrl = await createTestDatabase();
    receiver = await startReceiver();
  });
  afterAll(async () => {
    for (const s of services) await s.stop();
    await receiver?.close();
  });

  it('a graceful stop does not count the attempt it cuts off: no failure logged, nothing planned, the lease back', async () => {
    // The receiver never answers and the timeout is a minute: the stop cuts the attempt off after
    // its grace (the smaller of the timeout and 5 s).
    const service = await start({ WEBHOOK_TIMEOUT_MS: '60000' });
    const { token } = await registerUser(service.url, 'stopper');
    receiver.respond(() => undefined); // never answers
    const hook = await call(service.url, 'POST', HOOKS, { token, body: { webhook: { url: receiver.url } } });
    expect((await call(service.url, 'POST', '/api/users/me/projects', { token, body: { project: { name: 'cut' } } })).status).toBe(201);
    await eventually(() => receiver.received.length === 1, { message: 'the attempt is under way' });
    await service.stop();
    const [webhook] = await sql('select lease_owner, attempt, cursor::text, next_attempt_at, state from webhooks where id = $1', [hook.body.data.id]);
    expect(webhook).toMatchObject({ lease_owner: null, attempt: 0, cursor: '0', state: 'enabled' });
    expect(await sql('select * from webhook_deliveries where webhook_id = $1', [hook.body.data.id])).toEqual([]);
    // Another process takes it at once and delivers it.
    receiver.respond((_q, res) => void res.writeHead(204).end());
    const next = await start();
    await eventually(() => receiver.accepted.some((r) => r.json.id === '1'), { message: 'the cut-off event is delivered by the next process' });
    await next.stop();
  }, 90_000);

  it('events that retention removed before they were delivered disable the webhook, with why; none is skipped', async () => {
    const service = await start();
    const { id: userId, token } = await registerUser(service.url, 'pruned');
    receiver.respond((_q, res) => void res.writeHead(204).end());
    const hook = await call(service.url, 'POST', HOOKS, { token, body: { webhook: { url: `${receiver.url}?pruned` } } });
    await call(service.url, 'PATCH', `/api/webhooks/${hook.body.data.id}`, { token, body: { webhook: { state: 'disabled' } } });
    for (const name of ['p1', 'p2', 'p3']) await call(service.url, 'POST', '/api/users/me/projects', { token, body: { project: { name } } });
    // Retention removes the first two events while the webhook is disabled; then its place is
    // made current again (as enabling does), as a webhook waiting on a retry would stand.
    await sql('delete from events where user_id = $1 and seq <= 2', [userId]);
    await sql('update users set events_pruned_through = 2 where id = $1', [userId]);
    await sql(`update webhooks set state = 'enabled', next_attempt_at = 'epoch' where id = $1`, [hook.body.data.id]);
    await call(service.url, 'POST', `/api/webhooks/${hook.body.data.id}/test`, { token }); // wakes the deliverer
    await eventually(async () => (await call(service.url, 'GET', `/api/webhooks/${hook.body.data.id}`, { token })).body.data.attributes.state === 'disabled', {
      message: 'the webhook is disabled',
    });
    const webhook = (await call(service.url, 'GET', `/api/webhooks/${hook.body.data.id}`, { token })).body.data.attributes;
    expect(webhook.disabledReason).toMatch(/no longer kept/);
    expect(webhook.lastEventId).toBe('0');
    expect(receiver.received.filter((r) => r.path.includes('pruned') && r.json.type !== 'webhook.test')).toEqual([]);
    // Enabling says why it cannot resume; a replay from a kept id resumes it.
    const enable = await call(service.url, 'PATCH', `/api/webhooks/${hook.body.data.id}`, { token, body: { webhook: { state: 'enabled' } } });
    expect(enable.status).toBe(410);
    expect(enable.body.meta).toEqual({ last_event_id: '3' });
    expect((await call(service.url, 'POST', `/api/webhooks/${hook.body.data.id}/replay`, { token, body: { replay: { after: '2' } } })).status).toBe(202);
    expect((await call(service.url, 'PATCH', `/api/webhooks/${hook.body.data.id}`, { token, body: { webhook: { state: 'enabled' } } })).status).toBe(200);
    await eventually(() => receiver.accepted.some((r) => r.path.includes('pruned') && r.json.id === '3'), { message: 'event 3 is delivered after the replay' });
    await service.stop();
  }, 60_000);

  it('a new URL starts afresh: the old one’s failures and its wait are not carried over', async () => {
    const service = await start({ WEBHOOK_RETRY_SCHEDULE: '3600,3600' });
    const { token } = await registerUser(service.url, 'mover');
    const failing = await startReceiver();
    failing.respond((_q, res) => void res.writeHead(500).end());
    try {
      const hook = await call(service.url, 'POST', HOOKS, { token, body: { webhook: { url: failing.url } } });
      await call(service.url, 'POST', '/api/users/me/projects', { token, body: { project: { name: 'moved' } } });
      await eventually(() => failing.received.length === 1, { message: 'the first attempt failed' });
      const fixed = await startReceiver();
      try {
        expect((await call(service.url, 'PATCH', `/api/webhooks/${hook.body.data.id}`, { token, body: { webhook: { url: fixed.url } } })).status).toBe(200);
        // Not in an hour: at once, as attempt 1 of the new URL.
        await eventually(() => fixed.accepted.length === 1, { message: 'the new URL gets the event at once' });
        // The receiver has the event a moment before the delivery log has its line.
        const outcomes = async () =>
          (await call(service.url, 'GET', `/api/webhooks/${hook.body.data.id}/deliveries`, { token })).body.data.map((d: any) => [d.attributes.outcome, d.attributes.attempt]);
        await eventually(async () => (await outcomes()).length === 2, { message: 'both attempts are logged' });
        expect(await outcomes()).toEqual([['delivered', 1], ['failed', 1]]);
      } finally {
        await fixed.close();
      }
    } finally {
      await failing.close();
      await service.stop();
    }
  }, 60_000);

  it('a keyed enable refused with 410 cursor_expired replays its meta.last_event_id', async () => {
    const service = await start();
    const { id: userId, token } = await registerUser(service.url, 'keyed410');
    const hook = await call(service.url, 'POST', HOOKS, { token, body: { webhook: { url: receiver.url } } });
    await call(service.url, 'PATCH', `/api/webhooks/${hook.body.data.id}`, { token, body: { webhook: { state: 'disabled' } } });
    await call(service.url, 'POST', '/api/users/me/projects', { token, body: { project: { name: 'gone' } } });
    await sql('delete from events where user_id = $1', [userId]);
    await sql('update users set events_pruned_through = 1 where id = $1', [userId]);
    const send = () =>
      request(service.url, 'PATCH', `/api/webhooks/${hook.body.data.id}`, { token, body: { webhook: { state: 'enabled' } }, headers: { 'Idempotency-Key': 'enable-once' } });
    const first = await send();
    const again = await send();
    expect([first.status, again.status]).toEqual([410, 410]);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(again.body.meta).toEqual({ last_event_id: '1' });
    await service.stop();
  }, 60_000);
});
