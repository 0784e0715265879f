/**
 * Webhook delivery when things go wrong (API-CONTRACT.md §14), on services started in-process
 * (src/server.ts) with real loopback receivers scripted to fail. Each case checks what the
 * receiver got (in order, with `webhook-id` and signatures) and what
 * GET /api/webhooks/:id/deliveries says (outcome, status, error, attempt numbers, next attempt):
 *
 * - a 500 then a 2xx: retried after the schedule with the same `webhook-id`, later events
 *   waiting behind it; a timeout; a connection closed; a redirect, not followed;
 * - 410: disabled at once, logged once at warn with its reason, later events held; enabling
 *   resumes at the first undelivered event; the same after the retry schedule is exhausted;
 * - 429 with Retry-After longer than the schedule: the retry waits for it;
 * - replay: the events after an id again, in order, same ids, before newer ones; and, asked
 *   while an event is under way, without holding the webhook up;
 * - test events: delivered whatever the patterns and the state, not in the change log, each
 *   one asked for;
 * - a webhook disabled, or given another URL and patterns, while the deliverer holds several
 *   of its events: nothing more goes out under the old settings;
 * - DNS rebinding: a name that turns to the loopback after the check is blocked, no
 *   connection is made;
 * - a receiver down, then up again on its port: catches up in order, no gap; and the same
 *   across a restart of the service with events pending: nothing committed is lost;
 * - the metrics of deliveries, first attempts (timed from the commit, counted once per event)
 *   and held events.
 */
import net from 'node:net';
import { pino } from 'pino';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startService, type RunningService, type ServiceOptions } from '../../src/server.js';
import { eventually } from '../helpers/eventually.js';
import { call, registerUser } from '../helpers/http.js';
import { sample, scrape } from '../helpers/metrics.js';
import { createTestDatabase } from '../helpers/test-app.js';
import { testResolver } from '../helpers/test-resolver.js';
import { startReceiver, type Received, type Receiver } from '../helpers/webhook-receiver.js';

interface FeedEvent {
  id: string;
  type: string;
  data: any;
  at: number;
}

interface User {
  id: number;
  token: string;
}

/** The retry schedule of these services: 0.2 s, then 0.2 s, then disabled. */
const SCHEDULE = '0.2,0.2';
const FIRST_WAIT_MS = 200;
/** The schedule's ±10 % jitter, at its shortest. */
const SHORTEST_WAIT_MS = FIRST_WAIT_MS * 0.9;
/** WEBHOOK_TIMEOUT_MS: at 0.5 s, an immediate 500 could arrive late on a busy machine (a timeout). */
const TIMEOUT_MS = 2_000;

type LogLine = Record<string, any>;

async function startWebhookService(
  env: Record<string, string>,
  options: Partial<ServiceOptions> & { databaseUrl?: string; metrics?: boolean } = {},
): Promise<{ service: RunningService; lines: LogLine[]; databaseUrl: string }> {
  const databaseUrl = options.databaseUrl ?? (await createTestDatabase());
  const lines: LogLine[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const config = {
    ...loadConfig({
      WEBHOOK_RETRY_SCHEDULE: SCHEDULE,
      WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
      RATE_LIMIT_AUTH_PER_MINUTE: '0',
      RATE_LIMIT_PER_MINUTE: '0',
      ...env,
    }),
    databaseUrl,
    port: 0,
    host: '127.0.0.1',
    passwordHashCost: 1024,
    ...(options.metrics ? { metricsPort: 0 } : {}),
  };
  const { metrics: _m, databaseUrl: _d, ...rest } = options;
  const service = await startService({ config, logger, ...rest });
  services.push(service);
  return { service, lines, databaseUrl };
}

let userCount = 0;
const newUser = (base: string): Promise<User> => registerUser(base, `whf_${process.pid}_${++userCount}`);

async function createWebhook(base: string, token: string, url: string, events?: string[]): Promise<{ id: number; secret: string }> {
  const res = await call(base, 'POST', '/api/users/me/webhooks', { token, body: { webhook: { url, ...(events ? { events } : {}) } } });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.data.id, secret: res.body.meta.secret };
}

async function getWebhook(base: string, token: string, id: number): Promise<any> {
  const res = await call(base, 'GET', `/api/webhooks/${id}`, { token });
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}

async function setState(base: string, token: string, id: number, state: 'enabled' | 'disabled'): Promise<any> {
  const res = await call(base, 'PATCH', `/api/webhooks/${id}`, { token, body: { webhook: { state } } });
  expect(res.status, res.text).toBe(200);
  expect(res.body.data.attributes.state).toBe(state);
  return res.body.data;
}

/** The webhook's attempts, newest first (one page: these cases make fewer than 50). */
async function deliveries(base: string, token: string, id: number): Promise<any[]> {
  const res = await call(base, 'GET', `/api/webhooks/${id}/deliveries`, { token });
  expect(res.status, res.text).toBe(200);
  return res.body.data.map((d: any) => d.attributes);
}

async function feed(base: string, token: string, after = '0'): Promise<FeedEvent[]> {
  const events: FeedEvent[] = [];
  for (;;) {
    const res = await call(base, 'GET', `/api/users/me/events?after=${after}`, { token });
    expect(res.status, res.text).toBe(200);
    events.push(...res.body.data);
    if (!res.body.links.next) return events;
    after = events.at(-1)!.id;
  }
}

async function newestEventId(base: string, token: string): Promise<string> {
  const res = await call(base, 'GET', '/api/users/me/events', { token });
  expect(res.status, res.text).toBe(200);
  return res.body.meta.last_event_id;
}

async function caughtUp(base: string, token: string, webhookId: number, timeout = 10_000): Promise<void> {
  const newest = await newestEventId(base, token);
  let at = '';
  await eventually(async () => (at = (await getWebhook(base, token, webhookId)).attributes.lastEventId) === newest, {
    timeout,
    message: `webhook ${webhookId} reached event ${newest} (it stands at ${at || '?'})`,
  });
}

async function disabled(base: string, token: string, webhookId: number, timeout = 10_000): Promise<any> {
  return eventually(async () => {
    const hook = await getWebhook(base, token, webhookId);
    return hook.attributes.state === 'disabled' && hook;
  }, { timeout, message: `webhook ${webhookId} was disabled` });
}

let labels = 0;
async function writeTask(base: string, token: string): Promise<number> {
  const res = await call(base, 'POST', '/api/users/me/tasks', { token, body: { task: { label: `task ${++labels}` } } });
  expect(res.status, res.text).toBe(201);
  return res.body.data.id;
}

function signatureHeaders(r: Received): Record<string, string> {
  return {
    'webhook-id': String(r.headers['webhook-id']),
    'webhook-timestamp': String(r.headers['webhook-timestamp']),
    'webhook-signature': String(r.headers['webhook-signature']),
  };
}

/** Each request is a signed POST of the feed's event of the same id. */
function expectDeliveries(got: Received[], events: FeedEvent[], secret: string): void {
  const byId = new Map(events.map((e) => [e.id, e]));
  for (const r of got) {
    const event = byId.get(r.json.id);
    expect(event, `an event ${r.json.id} of the feed`).toBeDefined();
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['webhook-id']).toBe(event!.id);
    expect(JSON.parse(r.body)).toStrictEqual(event);
    expect(new Webhook(secret).verify(r.body, signatureHeaders(r))).toStrictEqual(event);
  }
}

const ids = (got: Received[]) => got.map((r) => r.json.id);

/** A promise the test resolves when it chooses. */
function gate(): { opened: Promise<void>; open(): void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/** A delivery log entry of a delivered attempt. */
const deliveredEntry = (eventId: string, attempt: number, eventType = 'task.created') => ({
  eventId, eventType, attempt, at: expect.any(Number), outcome: 'delivered', httpStatus: 204, error: null,
  durationMs: expect.any(Number), nextAttemptAt: 0,
});

/** The seconds an attempt answered at `answeredMs` may plan its retry for, `waitMs` later (the record takes a moment). */
function expectPlannedAfter(nextAttemptAt: number, answeredMs: number, waitMs: number, jitter = 0.1): void {
  expect(nextAttemptAt).toBeGreaterThanOrEqual(Math.floor((answeredMs + waitMs * (1 - jitter)) / 1000));
  expect(nextAttemptAt).toBeLessThanOrEqual(Math.floor((answeredMs + waitMs * (1 + jitter) + 500) / 1000));
}

const services: RunningService[] = [];
const receivers: Receiver[] = [];
const sockets: net.Server[] = [];

async function receiver(port?: number): Promise<Receiver> {
  const r = await startReceiver(port);
  receivers.push(r);
  return r;
}

afterAll(async () => {
  await Promise.allSettled(services.map((s) => s.stop()));
  await Promise.allSettled(receivers.map((r) => r.close()));
  await Promise.allSettled(sockets.map((s) => new Promise((resolve) => s.close(resolve))));
});

describe('webhook delivery faults', () => {
  let base: string;
  let lines: LogLine[];

  beforeAll(async () => {
    const started = await startWebhookService({ WEBHOOK_ALLOW_PRIVATE_URLS: '1' });
    base = started.service.url;
    lines = started.lines;
  });

  const disabledLines = (webhook: number) => lines.filter((l) => l.msg === 'webhook disabled' && l.webhook === webhook);

  it('retries a 500 after the schedule with the same webhook-id; later events wait until it is delivered', async () => {
    const user = await newUser(base);
    const r = await receiver();
    const hook = await createWebhook(base, user.token, r.url);
    const hold = gate();
    let answered500 = 0;
    r.respond(async (_req, res) => {
      if (r.received.length === 1) {
        // The first attempt fails only once the later events are committed: they must wait behind it.
        await hold.opened;
        answered500 = Date.now();
        res.writeHead(500).end('not now');
      } else res.writeHead(204).end();
    });
    await writeTask(base, user.token);
    await eventually(() => r.received.length === 1, { message: 'the first attempt arrived' });
    await writeTask(base, user.token);
    await writeTask(base, user.token);
    hold.open();
    await caughtUp(base, user.token, hook.id);

    const events = await feed(base, user.token);
    const [e1, e2, e3] = events.map((e) => e.id);
    expect(events).toHaveLength(3);
    expect(ids(r.received)).toEqual([e1, e1, e2, e3]);
    expect(ids(r.accepted)).toEqual([e1, e2, e3]);
    expectDeliveries(r.received, events, hook.secret);
    expect(r.received[1]!.body).toBe(r.received[0]!.body);
    expect(r.received[1]!.arrivedAt - answered500).toBeGreaterThanOrEqual(SHORTEST_WAIT_MS);

    const log = await deliveries(base, user.token, hook.id);
    expect(log).toEqual([
      deliveredEntry(e3!, 1),
      deliveredEntry(e2!, 1),
      deliveredEntry(e1!, 2),
      { eventId: e1, eventType: 'task.created', attempt: 1, at: expect.any(Number), outcome: 'failed', httpStatus: 500, error: 'HTTP 500', durationMs: expect.any(Number), nextAttemptAt: expect.any(Number) },
    ]);
    expectPlannedAfter(log[3].nextAttemptAt, answered500, FIRST_WAIT_MS);
    expect(log[2].at).toBeGreaterThanOrEqual(log[3].nextAttemptAt);
    const hookNow = await getWebhook(base, user.token, hook.id);
    expect(hookNow.attributes).toMatchObject({ state: 'enabled', disabledReason: null, lastEventId: e3 });
  });

  it('gives up an attempt after WEBHOOK_TIMEOUT_MS (failed, no status, "timeout") and retries it', async () => {
    const user = await newUser(base);
    const r = await receiver();
    const hook = await createWebhook(base, user.token, r.url);
    r.respond((_req, res) => {
      // The first request is never answered.
      if (r.received.length > 1) res.writeHead(204).end();
    });
    await writeTask(base, user.token);
    await caughtUp(base, user.token, hook.id);

    const events = await feed(base, user.token);
    const e1 = events[0]!.id;
    expect(ids(r.received)).toEqual([e1, e1]);
    expectDeliveries(r.received, events, hook.secret);
    expect(r.received[1]!.arrivedAt - r.received[0]!.arrivedAt).toBeGreaterThanOrEqual(TIMEOUT_MS + SHORTEST_WAIT_MS - 20);
    const log = await deliveries(base, user.token, hook.id);
    expect(log).toEqual([
      deliveredEntry(e1, 2),
      { eventId: e1, eventType: 'task.created', attempt: 1, at: expect.any(Number), outcome: 'failed', httpStatus: null, error: 'timeout', durationMs: expect.any(Number), nextAttemptAt: expect.any(Number) },
    ]);
    expect(log[1].durationMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    expect(log[1].durationMs).toBeLessThan(TIMEOUT_MS + 1000);
  });

  it('counts a connection closed without an answer as failed ("connection closed") and retries it', async () => {
    const user = await newUser(base);
    const r = await receiver();
    const hook = await createWebhook(base, user.token, r.url);
    r.respond((_req, res) => {
      if (r.received.length === 1) res.socket!.destroy();
      else res.writeHead(204).end();
    });
    await writeTask(base, user.token);
    await caughtUp(base, user.token, hook.id);

    const events = await feed(base, user.token);
    const e1 = events[0]!.id;
    expect(ids(r.received)).toEqual([e1, e1]);
    expectDeliveries(r.received, events, hook.secret);
    expect(await deliveries(base, user.token, hook.id)).toEqual([
      deliveredEntry(e1, 2),
      { eventId: e1, eventType: 'task.created', attempt: 1, at: expect.any(Number), outcome: 'failed', httpStatus: null, error: 'connection closed', durationMs: expect.any(Number), nextAttemptAt: expect.any(Number) },
    ]);
  });

  it('does not follow a redirect: a 302 is a failure and its Location gets nothing', async () => {
    const user = await newUser(base);
    const r = await receiver();
    const elsewhere = await receiver();
    const hook = await createWebhook(base, user.token, r.url);
    r.respond((_req, res) => {
      if (r.received.length === 1) res.writeHead(302, { Location: elsewhere.url }).end();
      else res.writeHead(204).end();
    });
    await writeTask(base, user.token);
    await caughtUp(base, user.token, hook.id);

    const events = await feed(base, user.token);
    const e1 = events[0]!.id;
    expect(ids(r.received)).toEqual([e1, e1]);
    // A redirect followed would have reached `elsewhere` within the first attempt, before the second one.
    expect(elsewhere.received).toEqual([]);
    expect(await deliveries(base, user.token, hook.id)).toEqual([
      deliveredEntry(e1, 2),
      { eventId: e1, eventType: 'task.created', attempt: 1, at: expect.any(Number), outcome: 'failed', httpStatus: 302, error: 'redirect not followed (302)', durationMs: expect.any(Number), nextAttemptAt: expect.any(Number) },
    ]);
  });

  it('disables the webhook at once on a 410, logs it once, holds later events, and resumes from the first undelivered one when enabled', async () => {
    const user = await newUser(base);
    const r = await receiver();
    const control = await receiver();
    const hook = await createWebhook(base, user.token, r.url);
    const other = await createWebhook(base, user.token, control.url);
    r.respond((_req, res) => {
      if (r.received.length === 1) res.writeHead(410).end();
      else res.writeHead(204).end();
    });
    const place = await newestEventId(base, user.token);
    await writeTask(base, user.token);
    const off = await disabled(base, user.token, hook.id);
    expect(off.attributes.disabledReason).toMatch(/410/);
    // It keeps its place: before the event that was not delivered.
    expect(off.attributes.lastEventId).toBe(place);
    const [e1] = (await feed(base, user.token)).map((e) => e.id);
    expect(await deliveries(base, user.token, hook.id)).toEqual([
      { eventId: e1, eventType: 'task.created', attempt: 1, at: expect.any(Number), outcome: 'failed', httpStatus: 410, error: 'HTTP 410', durationMs: expect.any(Number), nextAttemptAt: 0 },
    ]);
    const logged = disabledLines(hook.id);
    expect(logged, JSON.stringify(lines)).toHaveLength(1);
    expect(logged[0]).toMatchObject({ level: 40, user: user.id, event: e1, reason: off.attributes.disabledReason });

    await writeTask(base, user.token);
    await writeTask(base, user.token);
    // Both webhooks of the user are woken by the same notifications and looked up in one
    // statement: once the other one has the last event, this one has been passed over.
    await caughtUp(base, user.token, other.id);
    const [, e2, e3] = (await feed(base, user.token)).map((e) => e.id);
    expect(ids(control.received)).toEqual([e1, e2, e3]);
    expect(ids(r.received)).toEqual([e1]);
    expect((await getWebhook(base, user.token, hook.id)).attributes).toMatchObject({ state: 'disabled', lastEventId: place });

    const enabledAt = Date.now();
    const on = await setState(base, user.token, hook.id, 'enabled');
    expect(on.attributes.disabledReason).toBeNull();
    await caughtUp(base, user.token, hook.id);
    const events = await feed(base, user.token);
    expect(ids(r.received)).toEqual([e1, e1, e2, e3]);
    expect(ids(r.accepted)).toEqual([e1, e2, e3]);
    for (const later of r.received.slice(1)) expect(later.arrivedAt).toBeGreaterThanOrEqual(enabledAt);
    expectDeliveries(r.received, events, hook.secret);
    expect(await deliveries(base, user.token, hook.id)).toEqual([
      deliveredEntry(e3!, 1),
      deliveredEntry(e2!, 1),
      deliveredEntry(e1!, 1),
      { eventId: e1, eventType: 'task.created', attempt: 1, at: expect.any(Number), outcome: 'failed', httpStatus: 410, error: 'HTTP 410', durationMs: expect.any(Number), nextAttemptAt: 0 },
    ]);
    expect(disabledLines(hook.id)).toHaveLength(1);
  });

  it('waits the Retry-After of a 429 when it is longer than the schedule', async () => {
    const user = await newUser(base);
    const r = await receiver();
    const hook = await createWebhook(base, user.token, r.url);
    let answered429 = 0;
    r.respond((_req, res) => {
      if (r.received.length === 1) {
        answered429 = Date.now();
        res.writeHead(429, { 'Retry-After': '2' }).end();
      } else res.writeHead(204).end();
    });
    await writeTask(base, user.token);
    await eventually(() => r.received.length === 1, { message: 'the first attempt arrived' });
    await writeTask(base, user.token);
    const planned = await eventually(async () => (await deliveries(base, user.token, hook.id))[0], { message: 'the 429 was logged' });
    expect(planned).toMatchObject({ attempt: 1, outcome: 'failed', httpStatus: 429, error: 'HTTP 429' });
    expect(planned.nextAttemptAt - planned.at).toBeGreaterThanOrEqual(2);
    expectPlannedAfter(planned.nextAttemptAt, answered429, 2000, 0);
    await caughtUp(base, user.token, hook.id);

    const events = await feed(base, user.token);
    const [e1, e2] = events.map((e) => e.id);
    expect(ids(r.received)).toEqual([e1, e1, e2]);
    expectDeliveries(r.received, events, hook.secret);
    expect(r.received[1]!.arrivedAt - answered429).toBeGreaterThanOrEqual(1990);
    expect(await deliveries(base, user.token, hook.id)).toEqual([deliveredEntry(e2!, 1), deliveredEntry(e1!, 2), planned]);
  });

  it('disables the webhook when the schedule is exhausted, logs it once, and resumes at the first undelivered event when enabled', async () => {
    const user = await newUser(base);
    const r = await receiver();
    const hook = await createWebhook(base, user.token, r.url);
    const answered: number[] = [];
    r.respond((_req, res) => {
      answered.push(Date.now());
      res.writeHead(500).end();
    });
    const place = await newestEventId(base, user.token);
    await writeTask(base, user.token);
    await eventually(() => r.received.length === 1, { message: 'the first attempt arrived' });
    await writeTask(base, user.token);
    const off = await disabled(base, user.token, hook.id);
    expect(off.attributes.disabledReason).toMatch(/exhausted/);
    expect(off.attributes.disabledReason).toMatch(/HTTP 500/);
    expect(off.attributes.lastEventId).toBe(place);
    const [e1, e2] = (await feed(base, user.token)).map((e) => e.id);
    expect(ids(r.received)).toEqual([e1, e1, e1]);
    expect(r.received[1]!.arrivedAt - answered[0]!).toBeGreaterThanOrEqual(SHORTEST_WAIT_MS);
    expect(r.received[2]!.arrivedAt - answered[1]!).toBeGreaterThanOrEqual(SHORTEST_WAIT_MS);
    const failed = (attempt: number, nextAttemptAt: unknown) => ({
      eventId: e1, eventType: 'task.created', attempt, at: expect.any(Number), outcome: 'failed', httpStatus: 500, error: 'HTTP 500',
      durationMs: expect.any(Number), nextAttemptAt,
    });
    const exhausted = await deliveries(base, user.token, hook.id);
    expect(exhausted).toEqual([failed(3, 0), failed(2, expect.any(Number)), failed(1, expect.any(Number))]);
    expectPlannedAfter(exhausted[2].nextAttemptAt, answered[0]!, FIRST_WAIT_MS);
    expectPlannedAfter(exhausted[1].nextAttemptAt, answered[1]!, FIRST_WAIT_MS);
    const logged = disabledLines(hook.id);
    expect(logged, JSON.stringify(lines)).toHaveLength(1);
    expect(logged[0]).toMatchObject({ level: 40, user: user.id, event: e1, reason: off.attributes.disabledReason });

    r.respond((_req, res) => void res.writeHead(204).end());
    await writeTask(base, user.token);
    const enabledAt = Date.now();
    await setState(base, user.token, hook.id, 'enabled');
    await caughtUp(base, user.token, hook.id);
    const events = await feed(base, user.token);
    const e3 = events[2]!.id;
    expect(ids(r.received)).toEqual([e1, e1, e1, e1, e2, e3]);
    expect(ids(r.accepted)).toEqual([e1, e2, e3]);
    for (const later of r.received.slice(3)) expect(later.arrivedAt).toBeGreaterThanOrEqual(enabledAt);
    expectDeliveries(r.received, events, hook.secret);
    expect((await deliveries(base, user.token, hook.id)).slice(0, 3)).toEqual([deliveredEntry(e3, 1), deliveredEntry(e2!, 1), deliveredEntry(e1!, 1)]);
    expect(disabledLines(hook.id)).toHaveLength(1);
  });

  it('replays the matching events after an id, in order and with their ids, before newer ones', async () => {
    const user = await newUser(base);
    const r = await receiver();
    const hook = await createWebhook(base, user.token, r.url, ['task.*']);
    const project = await call(base, 'POST', '/api/users/me/projects', { token: user.token, body: { project: { name: 'Replayed' } } });
    expect(project.status).toBe(201);
    const a = await writeTask(base, user.token);
    const b = await call(base, 'POST', '/api/users/me/tasks', { token: user.token, body: { task: { label: 'in project', project_id: project.body.data.id } } });
    expect(b.status).toBe(201);
    expect((await call(base, 'PUT', `/api/tasks/${a}/state`, { token: user.token, body: { task: { state: 'planned' } } })).status).toBe(200);
    await writeTask(base, user.token);
    await caughtUp(base, user.token, hook.id);
    const before = await feed(base, user.token);
    const matching = before.filter((e) => e.type.startsWith('task.'));
    expect(before.map((e) => e.type)).toEqual(['project.created', 'task.created', 'task.created', 'project.updated', 'task.updated', 'task.created']);
    expect(ids(r.received)).toEqual(matching.map((e) => e.id));

    // From after the second matching event: the project.updated after it is passed over again.
    const after = matching[1]!.id;
    const replayed = matching.slice(2);
    const hold = gate();
    r.respond(async (_req, res) => {
      if (r.received.length === matching.length + 1) await hold.opened;
      res.writeHead(204).end();
    });
    const res = await call(base, 'POST', `/api/webhooks/${hook.id}/replay`, { token: user.token, body: { replay: { after } } });
    expect(res.status, res.text).toBe(202);
    expect(res.body.data).toMatchObject({ type: 'webhook', id: hook.id, attributes: { state: 'enabled', lastEventId: after } });
    await eventually(() => r.received.length === matching.length + 1, { message: 'the first replayed event arrived' });
    // A newer event, committed while the replay is under way, comes after every replayed one.
    const newer = await writeTask(base, user.token);
    hold.open();
    await caughtUp(base, user.token, hook.id);

    const events = await feed(base, user.token);
    const last = events.at(-1)!;
    expect(last).toMatchObject({ type: 'task.created', data: { id: newer } });
    expect(ids(r.received)).toEqual([...matching.map((e) => e.id), ...replayed.map((e) => e.id), last.id]);
    expectDeliveries(r.received, events, hook.secret);
    // Delivered again as they were the first time: same webhook-id, same body.
    for (const [k, again] of r.received.slice(matching.length, matching.length + replayed.length).entries()) {
      const first = r.received[2 + k]!;
      expect(again.headers['webhook-id']).toBe(first.headers['webhook-id']);
      expect(again.body).toBe(first.body);
    }
    const log = await deliveries(base, user.token, hook.id);
    expect(log.map((d) => [d.eventId, d.attempt, d.outcome])).toEqual(
      [...matching, ...replayed, last].map((e) => [e.id, 1, 'delivered']).reverse(),
    );
  });

  it('sends a test event whatever the patterns and the state; it is not in the change log', async () => {
    const user = await newUser(base);
    const r = await receiver();
    const hook = await createWebhook(base, user.token, r.url, ['project.deleted']);
    await writeTask(base, user.token);
    await caughtUp(base, user.token, hook.id);
    expect(r.received).toEqual([]);
    const newest = await newestEventId(base, user.token);

    const sendTest = async (id: number) => {
      const res = await call(base, 'POST', `/api/webhooks/${id}/test`, { token: user.token, body: {} });
      expect(res.status, res.text).toBe(202);
      expect(res.body.data).toMatchObject({ type: 'webhook', id });
    };
    const expectTest = (got: Received, id: number, secret: string) => {
      const webhookId = String(got.headers['webhook-id']);
      expect(webhookId).toMatch(/^msg_[A-Za-z0-9_-]+$/);
      expect(got.headers['content-type']).toBe('application/json');
      expect(got.json).toStrictEqual({ id: webhookId, type: 'webhook.test', data: { type: 'webhook', id }, at: expect.any(Number) });
      expect(Math.abs(got.json.at - got.arrivedAt / 1000)).toBeLessThan(5);
      expect(new Webhook(secret).verify(got.body, signatureHeaders(got))).toStrictEqual(got.json);
      return webhookId;
    };

    await sendTest(hook.id);
    await eventually(() => r.received.length === 1, { message: 'the test event arrived' });
    const firstId = expectTest(r.received[0]!, hook.id, hook.secret);

    // A disabled webhook gets its test event; the events of the log stay held.
    const r2 = await receiver();
    const held = await createWebhook(base, user.token, r2.url);
    await setState(base, user.token, held.id, 'disabled');
    expect((await getWebhook(base, user.token, held.id)).attributes.disabledReason).toBeNull();
    await writeTask(base, user.token);
    await sendTest(held.id);
    await sendTest(hook.id);
    await eventually(() => r2.received.length === 1 && r.received.length === 2, { message: 'both test events arrived' });
    const heldTestId = expectTest(r2.received[0]!, held.id, held.secret);
    const secondId = expectTest(r.received[1]!, hook.id, hook.secret);
    expect(new Set([firstId, heldTestId, secondId]).size).toBe(3);

    // Not in the change log: the log is where it was before the tests, but for the one task written.
    const logged = await feed(base, user.token, newest);
    expect(logged.map((e) => e.type)).toEqual(['task.created']);
    expect(await newestEventId(base, user.token)).toBe(logged[0]!.id);

    expect((await deliveries(base, user.token, hook.id)).map((d) => [d.eventId, d.eventType, d.attempt, d.outcome, d.httpStatus, d.nextAttemptAt])).toEqual([
      [secondId, 'webhook.test', 1, 'delivered', 204, 0],
      [firstId, 'webhook.test', 1, 'delivered', 204, 0],
    ]);
    const enabledAt = Date.now();
    await setState(base, user.token, held.id, 'enabled');
    await caughtUp(base, user.token, held.id);
    expect(ids(r2.received)).toEqual([heldTestId, logged[0]!.id]);
    expect(r2.received[1]!.arrivedAt).toBeGreaterThanOrEqual(enabledAt);
    expect(r.received).toHaveLength(2);
  });

  it('delivers every test event asked for, also those asked while one is under way', async () => {
    const user = await newUser(base);
    const r = await receiver();
    const hook = await createWebhook(base, user.token, r.url);
    const hold = gate();
    r.respond(async (_req, res) => {
      if (r.received.length === 1) await hold.opened;
      res.writeHead(204).end();
    });
    const sendTest = async () => {
      const res = await call(base, 'POST', `/api/webhooks/${hook.id}/test`, { token: user.token, body: {} });
      expect(res.status, res.text).toBe(202);
    };
    await sendTest();
    await eventually(() => r.received.length === 1, { message: 'the first test event arrived' });
    // Two more, each answered 202, while the first is still being answered.
    await sendTest();
    await sendTest();
    hold.open();
    const tests = () => r.received.filter((d) => d.json.type === 'webhook.test');
    const logged = async () => (await deliveries(base, user.token, hook.id)).filter((d) => d.eventType === 'webhook.test');
    await eventually(async () => tests().length >= 3 && (await logged()).length >= 3, { message: 'three test events arrived, and logged once their answers were read (the assertions below say what differs)' }).catch(() => undefined);
    const log = await logged();
    expect(tests().map((d) => d.json.id), JSON.stringify(log)).toHaveLength(3);
    expect(new Set(tests().map((d) => d.json.id)).size).toBe(3);
    expect(log).toHaveLength(3);
  });
});

describe('a name that resolves to the loopback after the check (DNS rebinding)', () => {
  it('blocks every attempt, logs it, and connects to nothing', async () => {
    const resolve = testResolver();
    const { service, lines } = await startWebhookService({}, { webhookResolve: resolve, metrics: true });
    const base = service.url;
    // What listens on the loopback port the name will point to counts every connection it gets.
    let connections = 0;
    const listener = net.createServer((socket) => {
      connections += 1;
      socket.destroy();
    });
    sockets.push(listener);
    await new Promise<void>((ready) => listener.listen(0, '127.0.0.1', ready));
    const port = (listener.address() as net.AddressInfo).port;
    await new Promise<void>((done) => net.connect(port, '127.0.0.1').on('close', () => done()).on('error', () => undefined));
    expect(connections).toBe(1);

    const user = await newUser(base);
    const hook = await createWebhook(base, user.token, `https://flip.test:${port}/hook`);
    resolve.flip();
    await writeTask(base, user.token);
    const off = await disabled(base, user.token, hook.id);
    const [e1] = (await feed(base, user.token)).map((e) => e.id);
    const log = await deliveries(base, user.token, hook.id);
    expect(log.map((d) => [d.eventId, d.attempt, d.outcome, d.httpStatus])).toEqual([
      [e1, 3, 'blocked', null],
      [e1, 2, 'blocked', null],
      [e1, 1, 'blocked', null],
    ]);
    for (const d of log) expect(d.error).toMatch(/127\.0\.0\.1/);
    expect(off.attributes.disabledReason).toMatch(/127\.0\.0\.1/);
    // Every attempt has been made and refused: none of them reached the port.
    expect(connections).toBe(1);
    const blocked = lines.filter((l) => l.msg === 'webhook delivery blocked' && l.webhook === hook.id);
    expect(blocked).toHaveLength(3);
    for (const l of blocked) expect(l).toMatchObject({ level: 40, event: e1, reason: expect.stringMatching(/127\.0\.0\.1/) });
    expect(lines.filter((l) => l.msg === 'webhook disabled' && l.webhook === hook.id)).toHaveLength(1);
    const text = await scrape(service.metricsUrl!);
    expect(sample(text, 'planning_webhook_deliveries_total', { outcome: 'blocked' })).toBe(3);
    expect(sample(text, 'planning_webhook_deliveries_total', { outcome: 'delivered' })).toBe(0);
  });
});

describe('a receiver down for a while, and a restart', () => {
  // Retries for long enough that the webhook is still enabled when the receiver comes back.
  const env = { WEBHOOK_ALLOW_PRIVATE_URLS: '1', WEBHOOK_RETRY_SCHEDULE: '0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5' };
  let first: Awaited<ReturnType<typeof startWebhookService>>;

  beforeAll(async () => {
    first = await startWebhookService(env);
  });

  /** The log is: attempts of the first event refused while the receiver was down, then each event delivered once, in order. */
  async function expectCaughtUp(base: string, token: string, hook: number, events: FeedEvent[]): Promise<void> {
    const log = (await deliveries(base, token, hook)).reverse();
    const failures = log.filter((d) => d.outcome !== 'delivered');
    expect(failures.length).toBeGreaterThanOrEqual(1);
    for (const [k, f] of failures.entries()) {
      expect(f).toEqual({
        eventId: events[0]!.id, eventType: events[0]!.type, attempt: k + 1, at: expect.any(Number), outcome: 'failed',
        httpStatus: null, error: 'connection refused', durationMs: expect.any(Number), nextAttemptAt: expect.any(Number),
      });
    }
    expect(log.slice(failures.length).map((d) => [d.eventId, d.outcome, d.httpStatus])).toEqual(events.map((e) => [e.id, 'delivered', 204]));
    expect(log[failures.length].attempt).toBe(failures.length + 1);
    expect(log.slice(failures.length + 1).every((d) => d.attempt === 1)).toBe(true);
  }

  it('catches up in order, without a gap, when a receiver that was down is up again on its port', async () => {
    const base = first.service.url;
    const user = await newUser(base);
    const down = await receiver();
    const hook = await createWebhook(base, user.token, down.url);
    await down.close();
    // More events than a webhook takes in hand at a time (20), and a reorder's many in one write.
    const tasks: number[] = [];
    for (let i = 0; i < 24; i++) tasks.push(await writeTask(base, user.token));
    const moved = await call(base, 'PUT', `/api/tasks/${tasks.at(-1)}/order`, { token: user.token, body: { task: { order: 1 } } });
    expect(moved.status).toBe(200);
    expect(moved.body.data).toHaveLength(24);
    await eventually(async () => (await deliveries(base, user.token, hook.id)).length > 0, { message: 'an attempt failed' });
    const up = await receiver(down.port);
    await caughtUp(base, user.token, hook.id);

    const events = await feed(base, user.token);
    expect(events).toHaveLength(48);
    expect(ids(up.received)).toEqual(events.map((e) => e.id));
    expectDeliveries(up.received, events, hook.secret);
    await expectCaughtUp(base, user.token, hook.id, events);
    expect((await getWebhook(base, user.token, hook.id)).attributes.state).toBe('enabled');
  });

  /**
   * A webhook whose receiver was down while 10 events were written, up again with its first
   * answer held: the deliverer has the 10 events in hand and the first under way.
   */
  async function tenInHand(base: string) {
    const user = await newUser(base);
    const down = await receiver();
    const hook = await createWebhook(base, user.token, down.url);
    await down.close();
    for (let i = 0; i < 10; i++) await writeTask(base, user.token);
    await eventually(async () => (await deliveries(base, user.token, hook.id)).length > 0, { message: 'an attempt failed' });
    const up = await receiver(down.port);
    const hold = gate();
    up.respond(async (_req, res) => {
      if (up.received.length === 1) await hold.opened;
      res.writeHead(204).end();
    });
    await eventually(() => up.received.length === 1, { message: 'the first event is under way' });
    const events = await feed(base, user.token);
    expect(events).toHaveLength(10);
    expect(up.received[0]!.json.id).toBe(events[0]!.id);
    const sendTest = async () => {
      const res = await call(base, 'POST', `/api/webhooks/${hook.id}/test`, { token: user.token, body: {} });
      expect(res.status, res.text).toBe(202);
    };
    return { user, hook, up, hold, events, sendTest };
  }

  it('posts nothing after the attempt under way once the webhook is disabled', async () => {
    const base = first.service.url;
    const { user, hook, up, hold, events, sendTest } = await tenInHand(base);
    await setState(base, user.token, hook.id, 'disabled');
    hold.open();
    // A test event goes once the webhook is free: after the attempt under way, and after
    // anything else the process would still post from what it had in hand.
    await sendTest();
    await eventually(() => up.received.some((d) => d.json.type === 'webhook.test'), { message: 'the test event arrived' });
    expect(up.received.map((d) => d.json.type), 'what arrived after the webhook was disabled').toEqual(['task.created', 'webhook.test']);
    const held = (await getWebhook(base, user.token, hook.id)).attributes;
    expect(held.state).toBe('disabled');
    // The attempt under way may count or be made again: the place is before or at its event.
    expect(['0', events[0]!.id]).toContain(held.lastEventId);

    await setState(base, user.token, hook.id, 'enabled');
    await caughtUp(base, user.token, hook.id);
    const got = ids(up.accepted.filter((d) => d.json.type !== 'webhook.test'));
    expect(held.lastEventId === '0' ? got.slice(1) : got).toEqual(events.map((e) => e.id));
  });

  it('posts nothing more to the old URL, nor what the new patterns leave out, once the URL and patterns are changed', async () => {
    const base = first.service.url;
    const { user, hook, up, hold, events, sendTest } = await tenInHand(base);
    const moved = await receiver();
    const res = await call(base, 'PATCH', `/api/webhooks/${hook.id}`, { token: user.token, body: { webhook: { url: moved.url, events: ['project.*'] } } });
    expect(res.status, res.text).toBe(200);
    hold.open();
    await sendTest();
    await eventually(() => moved.received.some((d) => d.json.type === 'webhook.test'), { message: 'the test event arrived at the new URL' });
    await caughtUp(base, user.token, hook.id);
    expect(up.received.map((d) => d.json.id), 'what the old URL got').toEqual([events[0]!.id]);
    expect(moved.received.map((d) => d.json.type)).toEqual(['webhook.test']);
  });

  it('goes on within a second after a replay asked while an event was under way', async () => {
    const base = first.service.url;
    const { user, hook, up, hold, events } = await tenInHand(base);
    const res = await call(base, 'POST', `/api/webhooks/${hook.id}/replay`, { token: user.token, body: { replay: { after: '0' } } });
    expect(res.status, res.text).toBe(202);
    hold.open();
    await writeTask(base, user.token);
    const answered = Date.now();
    const newest = await newestEventId(base, user.token);
    // Waits a little longer than the promise; the assertions below say how late it was.
    const arrived = await eventually(() => up.received.find((d) => d.json.id === newest), { timeout: 3_000 }).catch(() => undefined);
    expect(arrived, `event ${newest} arrived within 3 s of its write (it got ${JSON.stringify(ids(up.received))})`).toBeDefined();
    expect(arrived!.arrivedAt - answered).toBeLessThan(1000);
    await caughtUp(base, user.token, hook.id);
    // The event under way, then every event again from the start, then the newer one.
    expect(ids(up.received)).toEqual([events[0]!.id, ...events.map((e) => e.id), newest]);
  });

  it('delivers everything committed, once the receiver is up, from the next service on the database', async () => {
    const user = await newUser(first.service.url);
    const down = await receiver();
    const hook = await createWebhook(first.service.url, user.token, down.url);
    await down.close();
    for (let i = 0; i < 4; i++) await writeTask(first.service.url, user.token);
    await eventually(async () => (await deliveries(first.service.url, user.token, hook.id)).length > 0, { message: 'an attempt failed' });
    await first.service.stop();

    const second = await startWebhookService(env, { databaseUrl: first.databaseUrl });
    const base = second.service.url;
    for (let i = 0; i < 3; i++) await writeTask(base, user.token);
    const up = await receiver(down.port);
    await caughtUp(base, user.token, hook.id, 20_000);

    const events = await feed(base, user.token);
    expect(events).toHaveLength(7);
    expect(ids(up.received)).toEqual(events.map((e) => e.id));
    expectDeliveries(up.received, events, hook.secret);
    await expectCaughtUp(base, user.token, hook.id, events);
  }, 40_000);
});

describe('the metrics of webhook delivery', () => {
  let base: string;
  let metricsUrl: string;
  const DELIVERED = { outcome: 'delivered' };
  const FAILED = { outcome: 'failed' };
  /** The figures of one scrape that these tests follow. */
  async function figures() {
    const text = await scrape(metricsUrl);
    return {
      delivered: sample(text, 'planning_webhook_deliveries_total', DELIVERED)!,
      failed: sample(text, 'planning_webhook_deliveries_total', FAILED)!,
      blocked: sample(text, 'planning_webhook_deliveries_total', { outcome: 'blocked' })!,
      firstCount: sample(text, 'planning_webhook_first_attempt_seconds_count')!,
      firstSum: sample(text, 'planning_webhook_first_attempt_seconds_sum')!,
      waitingEnabled: sample(text, 'planning_webhook_events_waiting', { state: 'enabled' })!,
      waitingDisabled: sample(text, 'planning_webhook_events_waiting', { state: 'disabled' })!,
    };
  }

  beforeAll(async () => {
    const { service } = await startWebhookService({ WEBHOOK_ALLOW_PRIVATE_URLS: '1' }, { metrics: true });
    base = service.url;
    metricsUrl = service.metricsUrl!;
  });

  it('counts attempts by outcome, first attempts, and the events a disabled webhook holds', async () => {
    const start = await figures();
    expect(start).toMatchObject({ delivered: 0, failed: 0, blocked: 0, firstCount: 0, waitingEnabled: 0, waitingDisabled: 0 });

    // One webhook: a 500, then two events delivered.
    const one = await newUser(base);
    const r1 = await receiver();
    const hook1 = await createWebhook(base, one.token, r1.url);
    r1.respond((_req, res) => void res.writeHead(r1.received.length === 1 ? 500 : 204).end());
    await writeTask(base, one.token);
    await writeTask(base, one.token);
    await caughtUp(base, one.token, hook1.id);
    expect(r1.received).toHaveLength(3);

    // Another user's webhook: a 410 disables it, and the three events of its user wait.
    const two = await newUser(base);
    const r2 = await receiver();
    const hook2 = await createWebhook(base, two.token, r2.url);
    r2.respond((_req, res) => void res.writeHead(410).end());
    await writeTask(base, two.token);
    await disabled(base, two.token, hook2.id);
    for (let i = 0; i < 2; i++) await writeTask(base, two.token);

    await eventually(async () => (await figures()).firstCount === 3, { message: 'the 410 counted (a moment after the webhook reads as disabled)' });
    expect(await figures()).toMatchObject({ delivered: 2, failed: 2, blocked: 0, firstCount: 3, waitingEnabled: 0, waitingDisabled: 3 });

    // Enabled again and answered: the held events go, and nothing waits any more.
    r2.respond((_req, res) => void res.writeHead(204).end());
    await setState(base, two.token, hook2.id, 'enabled');
    await caughtUp(base, two.token, hook2.id);
    expect(r2.accepted).toHaveLength(3);
    expect(await figures()).toMatchObject({ delivered: 5, failed: 2, blocked: 0, waitingEnabled: 0, waitingDisabled: 0 });
  });

  it('times a first attempt from the commit: no longer than from sending the write to the receiver having it', async () => {
    const before = await figures();
    const user = await newUser(base);
    const r = await receiver();
    const hook = await createWebhook(base, user.token, r.url);
    const sent = new Map<string, number>();
    for (let i = 0; i < 5; i++) {
      const at = Date.now();
      await writeTask(base, user.token);
      const id = await newestEventId(base, user.token);
      sent.set(id, at);
      await eventually(() => r.received.some((d) => d.json.id === id), { message: `event ${id} arrived` });
    }
    await caughtUp(base, user.token, hook.id);
    // Each first attempt came after its write was sent and before its receiver had it.
    const spans = [...sent].map(([id, at]) => r.received.find((d) => d.json.id === id)!.arrivedAt - at);
    const after = await figures();
    expect(after.firstCount - before.firstCount).toBe(5);
    const measured = after.firstSum - before.firstSum;
    const bound = spans.reduce((a, b) => a + b, 0) / 1000;
    expect(measured, `the five first attempts took at most ${spans.join(' + ')} ms in all, the metric says ${measured.toFixed(3)} s`).toBeLessThanOrEqual(bound + 0.02);
  });

  it('counts the first attempt of an event once: not again when its webhook is enabled again', async () => {
    const user = await newUser(base);
    const r = await receiver();
    const hook = await createWebhook(base, user.token, r.url);
    r.respond((_req, res) => void res.writeHead(r.received.length === 1 ? 410 : 204).end());
    await writeTask(base, user.token);
    await disabled(base, user.token, hook.id);
    await writeTask(base, user.token);
    const before = await figures();
    await setState(base, user.token, hook.id, 'enabled');
    await caughtUp(base, user.token, hook.id);
    expect(r.received).toHaveLength(3);
    const after = await figures();
    expect(after.delivered - before.delivered).toBe(2);
    // The first event had its first attempt (the 410) before; only the second one has it now.
    expect(after.firstCount - before.firstCount).toBe(1);
  });
});
