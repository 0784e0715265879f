/**
 * Webhook delivery when nothing fails (API-CONTRACT.md §14), on services started in-process
 * (src/server.ts) with real loopback receivers:
 *
 * - the format: a POST of the event exactly as the JSON feed serves it, `content-type:
 *   application/json`, `webhook-id` the event id, a current `webhook-timestamp`, a signature
 *   the official Standard Webhooks library verifies (and refuses with another secret);
 * - a secret rotation: the next delivery carries two signatures, each secret verifies it alone;
 * - order and exactness: several users with 1 to 3 webhooks of different patterns and random
 *   writes of every kind; each receiver ends with exactly its user's matching events, in
 *   strictly increasing id order, each once, identical to the feed's;
 * - two service instances on one database: every event reaches each webhook exactly once;
 * - latency: on an idle service an event reaches its receiver within a second of the write.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/core/logger.js';
import { startService, type RunningService } from '../../src/server.js';
import { eventually } from '../helpers/eventually.js';
import { call, registerUser } from '../helpers/http.js';
import { sample, scrape } from '../helpers/metrics.js';
import { createTestDatabase } from '../helpers/test-app.js';
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

const DAY = 86_400;
const nowSeconds = () => Math.floor(Date.now() / 1000);

async function startWebhookService(databaseUrl: string, metrics = false): Promise<RunningService> {
  const config = {
    ...loadConfig({
      WEBHOOK_ALLOW_PRIVATE_URLS: '1',
      WEBHOOK_RETRY_SCHEDULE: '0.2,0.2',
      WEBHOOK_TIMEOUT_MS: '1000',
      RATE_LIMIT_AUTH_PER_MINUTE: '0',
      RATE_LIMIT_PER_MINUTE: '0',
    }),
    databaseUrl,
    port: 0,
    host: '127.0.0.1',
    passwordHashCost: 1024,
    ...(metrics ? { metricsPort: 0 } : {}),
  };
  return startService({ config, logger: createLogger('silent') });
}

let users = 0;
async function newUser(base: string): Promise<User> {
  return registerUser(base, `wh_${process.pid}_${++users}`);
}

async function createWebhook(base: string, token: string, url: string, events?: string[]): Promise<{ id: number; secret: string }> {
  const res = await call(base, 'POST', '/api/users/me/webhooks', { token, body: { webhook: { url, ...(events ? { events } : {}) } } });
  expect(res.status, res.text).toBe(201);
  expect(res.body.meta.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
  return { id: res.body.data.id, secret: res.body.meta.secret };
}

async function getWebhook(base: string, token: string, id: number): Promise<any> {
  const res = await call(base, 'GET', `/api/webhooks/${id}`, { token });
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}

/** Every event of the user's log, oldest first, as GET /api/users/me/events?after= serves them. */
async function feed(base: string, token: string): Promise<FeedEvent[]> {
  const events: FeedEvent[] = [];
  let after = '0';
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

/** Waits until the webhook's place is the user's newest event (delivered, or passed over as not matching). */
async function caughtUp(base: string, token: string, webhookId: number, timeout = 15_000): Promise<void> {
  const newest = await newestEventId(base, token);
  let last = '';
  await eventually(async () => (last = (await getWebhook(base, token, webhookId)).attributes.lastEventId) === newest, {
    timeout,
    message: `webhook ${webhookId} reached event ${newest} (it stands at ${last || '?'})`,
  });
}

function signatureHeaders(r: Received): Record<string, string> {
  return {
    'webhook-id': String(r.headers['webhook-id']),
    'webhook-timestamp': String(r.headers['webhook-timestamp']),
    'webhook-signature': String(r.headers['webhook-signature']),
  };
}

/** The pattern rule of API-CONTRACT.md §14, written out here: an event type, `<resource>.*` or `*`. */
function matches(patterns: readonly string[], type: string): boolean {
  return patterns.some((p) => p === '*' || p === type || (p.endsWith('.*') && type.split('.')[0] === p.slice(0, -2)));
}

/** Checks one received delivery against the feed's event of the same id. */
function expectDeliveryOf(r: Received, event: FeedEvent, secret: string): void {
  expect(r.path).toBe('/hook');
  expect(r.headers['content-type']).toBe('application/json');
  expect(r.headers['webhook-id']).toBe(event.id);
  expect(JSON.parse(r.body)).toStrictEqual(event);
  expect(new Webhook(secret).verify(r.body, signatureHeaders(r))).toStrictEqual(event);
}

const services: RunningService[] = [];
const receivers: Receiver[] = [];
const closers: Array<() => Promise<void>> = [];

async function receiver(): Promise<Receiver> {
  const r = await startReceiver();
  receivers.push(r);
  return r;
}

afterAll(async () => {
  await Promise.allSettled(services.map((s) => s.stop()));
  await Promise.allSettled(receivers.map((r) => r.close()));
  await Promise.allSettled(closers.map((close) => close()));
});

describe('webhook delivery on one service', () => {
  let service: RunningService;
  let base: string;

  beforeAll(async () => {
    service = await startWebhookService(await createTestDatabase());
    services.push(service);
    base = service.url;
  });

  it('POSTs the event exactly as the feed serves it, with webhook-id, a current timestamp and a signature standardwebhooks verifies', async () => {
    const user = await newUser(base);
    const r = await receiver();
    const hook = await createWebhook(base, user.token, r.url);
    // The request line, which the receiver does not keep, is seen by a server of this test.
    const methods: string[] = [];
    const plain = createServer((req, res) => {
      methods.push(`${req.method} ${req.url}`);
      req.resume().on('end', () => res.writeHead(204).end());
    });
    await new Promise<void>((ready) => plain.listen(0, '127.0.0.1', ready));
    closers.push(() => new Promise((done) => plain.close(() => done())));
    await createWebhook(base, user.token, `http://127.0.0.1:${(plain.address() as AddressInfo).port}/plain?x=1`, ['project.created']);
    const project = await call(base, 'POST', '/api/users/me/projects', { token: user.token, body: { project: { name: 'Format' } } });
    expect(project.status).toBe(201);
    const task = await call(base, 'POST', '/api/users/me/tasks', { token: user.token, body: { task: { label: 'élan ✓ 😀', project_id: project.body.data.id } } });
    expect(task.status).toBe(201);

    await caughtUp(base, user.token, hook.id);
    const events = await feed(base, user.token);
    // A task created in a project changes the project's list of tasks too.
    expect(events.map((e) => e.type)).toEqual(['project.created', 'task.created', 'project.updated']);
    expect(events[1]!.data).toMatchObject({ type: 'task', id: task.body.data.id, attributes: { label: 'élan ✓ 😀' } });
    expect(r.received).toHaveLength(3);
    expect(r.accepted).toHaveLength(3);
    for (const [i, delivery] of r.received.entries()) {
      const event = events[i]!;
      expectDeliveryOf(delivery, event, hook.secret);
      const stamp = Number(delivery.headers['webhook-timestamp']);
      expect(String(stamp)).toBe(delivery.headers['webhook-timestamp']);
      expect(Math.abs(stamp - delivery.arrivedAt / 1000)).toBeLessThan(5);
      expect(String(delivery.headers['webhook-signature'])).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    }

    await eventually(() => methods.length > 0, { message: 'the project.created event reached the other webhook' });
    expect(methods).toEqual(['POST /plain?x=1']);

    // The check can fail: another secret, a changed body, another id or a stale timestamp are refused.
    const delivery = r.received[0]!;
    const other = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    expect(() => new Webhook(other).verify(delivery.body, signatureHeaders(delivery))).toThrow(/signature/i);
    expect(() => new Webhook(hook.secret).verify(delivery.body.replace('Format', 'Formal'), signatureHeaders(delivery))).toThrow(/signature/i);
    expect(() => new Webhook(hook.secret).verify(delivery.body, { ...signatureHeaders(delivery), 'webhook-id': 'x' })).toThrow(/signature/i);
    expect(() => new Webhook(hook.secret).verify(delivery.body, { ...signatureHeaders(delivery), 'webhook-timestamp': String(nowSeconds() - 3600) })).toThrow(/timestamp/i);

    // The deliveries log says the same.
    const log = await call(base, 'GET', `/api/webhooks/${hook.id}/deliveries`, { token: user.token });
    expect(log.status).toBe(200);
    expect(log.body.data.map((d: any) => d.attributes)).toEqual(
      [...events].reverse().map((e) => ({
        eventId: e.id, eventType: e.type, attempt: 1, at: expect.any(Number), outcome: 'delivered', httpStatus: 204,
        error: null, durationMs: expect.any(Number), nextAttemptAt: 0,
      })),
    );
  });

  it('signs with both secrets after a rotation: two signatures, each secret verifies alone', async () => {
    const user = await newUser(base);
    const r = await receiver();
    const hook = await createWebhook(base, user.token, r.url);
    const write = (label: string) => call(base, 'POST', '/api/users/me/tasks', { token: user.token, body: { task: { label } } });

    expect((await write('before')).status).toBe(201);
    await eventually(() => r.accepted.length === 1, { message: 'the delivery before the rotation' });
    expect(String(r.received[0]!.headers['webhook-signature']).split(' ')).toHaveLength(1);

    const rotated = await call(base, 'POST', `/api/webhooks/${hook.id}/secret`, { token: user.token, body: {} });
    expect(rotated.status, rotated.text).toBe(201);
    const fresh: string = rotated.body.meta.secret;
    expect(fresh).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(fresh).not.toBe(hook.secret);

    expect((await write('after')).status).toBe(201);
    await eventually(() => r.accepted.length === 2, { message: 'the delivery after the rotation' });
    const [event] = (await feed(base, user.token)).slice(1);
    const delivery = r.received[1]!;
    expectDeliveryOf(delivery, event!, fresh);
    const signatures = String(delivery.headers['webhook-signature']).split(' ');
    expect(signatures).toHaveLength(2);
    for (const s of signatures) expect(s).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(new Webhook(hook.secret).verify(delivery.body, signatureHeaders(delivery))).toStrictEqual(event);
    expect(new Webhook(fresh).verify(delivery.body, signatureHeaders(delivery))).toStrictEqual(event);
    // Each signature is one secret's: keeping only one of them, only that secret verifies.
    const only = (s: string) => ({ ...signatureHeaders(delivery), 'webhook-signature': s });
    const verifies = (secret: string, s: string) => {
      try {
        new Webhook(secret).verify(delivery.body, only(s));
        return true;
      } catch {
        return false;
      }
    };
    expect([verifies(fresh, signatures[0]!), verifies(fresh, signatures[1]!)].filter(Boolean)).toHaveLength(1);
    expect([verifies(hook.secret, signatures[0]!), verifies(hook.secret, signatures[1]!)].filter(Boolean)).toHaveLength(1);
    expect(verifies(fresh, signatures[0]!)).not.toBe(verifies(hook.secret, signatures[0]!));
    // The delivery before the rotation is not signed with the new secret.
    expect(() => new Webhook(fresh).verify(r.received[0]!.body, signatureHeaders(r.received[0]!))).toThrow(/signature/i);
  });

  it('reaches the receiver within a second of the write on an idle service', async () => {
    const user = await newUser(base);
    const r = await receiver();
    const hook = await createWebhook(base, user.token, r.url);
    const latencies: number[] = [];
    for (let i = 1; i <= 8; i++) {
      const res = await call(base, 'POST', '/api/users/me/tasks', { token: user.token, body: { task: { label: `fast ${i}` } } });
      const answered = Date.now();
      expect(res.status).toBe(201);
      const arrived = await eventually(() => r.received.find((d) => (d.json.data as any)?.id === res.body.data.id), {
        interval: 2,
        timeout: 3_000,
        message: `the event of task ${res.body.data.id} arrived`,
      });
      latencies.push(arrived.arrivedAt - answered);
    }
    console.log(`webhook latency after the write's response (ms): ${latencies.join(', ')}`);
    expect(r.received).toHaveLength(8);
    for (const ms of latencies) expect(ms).toBeLessThan(1000);
    await caughtUp(base, user.token, hook.id);
  });

  /** Request shapes of SPEC.md §4 and API-CONTRACT.md §4-6: one step of a user's random writes. */
  type Step = { kind: 'createProject' | 'updateProject' | 'projectState' | 'deleteProject' | 'createTask' | 'updateTask' | 'taskState' | 'reorder'; pick: number; pick2: number; text: string };
  const step: fc.Arbitrary<Step> = fc.record({
    kind: fc.constantFrom<Step['kind']>(
      'createProject', 'createProject', 'updateProject', 'projectState', 'projectState', 'deleteProject',
      'createTask', 'createTask', 'createTask', 'updateTask', 'taskState', 'taskState', 'taskState', 'reorder', 'reorder',
    ),
    pick: fc.nat(1000),
    pick2: fc.nat(1000),
    text: fc.string({ unit: fc.constantFrom('a', 'q', 'Z', '7', ' ', '-', 'é', '✓', '😀', '"'), maxLength: 12 }).map((t) => `L${t}`),
  });
  const TASK_MOVES: Record<string, string[]> = {
    newed: ['started', 'planned', 'abandoned'],
    started: ['planned', 'newed', 'abandoned'],
    planned: ['finished', 'planned', 'newed', 'abandoned'],
    finished: ['planned'],
    abandoned: [],
  };
  const PROJECT_MOVES: Record<string, string[]> = { newed: ['started'], started: ['paused', 'finished'], paused: ['started'], finished: [] };

  /**
   * Runs the steps as one user; answers how many creations and deletions succeeded (each
   * appends at least one event; an edit that changes nothing may append none). Every answer
   * is a success or a 422 of a rule.
   */
  async function runSteps(baseOf: () => string, user: User, steps: Step[], tag: string): Promise<number> {
    const projects = new Map<number, string>();
    const tasks = new Map<number, string>();
    let created = 0;
    let ok = 0;
    const token = user.token;
    const of = <T>(m: Map<number, T>, n: number) => [...m.keys()][n % m.size]!;
    for (const s of steps) {
      let res: Awaited<ReturnType<typeof call>> | undefined;
      switch (s.kind) {
        case 'createProject':
          res = await call(baseOf(), 'POST', '/api/users/me/projects', { token, body: { project: { name: `${tag}_p${++created}` } } });
          if (res.status === 201) projects.set(res.body.data.id, 'newed');
          break;
        case 'updateProject':
          if (projects.size === 0) continue;
          res = await call(baseOf(), 'PATCH', `/api/projects/${of(projects, s.pick)}`, { token, body: { project: { description: s.text } } });
          break;
        case 'projectState': {
          if (projects.size === 0) continue;
          const id = of(projects, s.pick);
          const moves = PROJECT_MOVES[projects.get(id)!]!;
          if (moves.length === 0) continue;
          const state = moves[s.pick2 % moves.length]!;
          const project = state === 'started' && projects.get(id) === 'newed' ? { state, due_at: nowSeconds() + 10 * DAY } : { state };
          res = await call(baseOf(), 'PUT', `/api/projects/${id}/state`, { token, body: { project } });
          if (res.status === 200) {
            projects.set(id, res.body.data.attributes.state);
            // Start and pause move the project's tasks (API-CONTRACT.md §4): read them again.
            for (const t of res.body.data.relationships.tasks.data) tasks.delete(t.id);
            for (const t of res.body.data.relationships.tasks.data) {
              const got = await call(baseOf(), 'GET', `/api/tasks/${t.id}`, { token });
              tasks.set(t.id, got.body.data.attributes.state);
            }
          }
          break;
        }
        case 'deleteProject': {
          if (projects.size === 0) continue;
          const id = of(projects, s.pick);
          const before = await call(baseOf(), 'GET', `/api/projects/${id}`, { token });
          res = await call(baseOf(), 'DELETE', `/api/projects/${id}`, { token });
          if (res.status === 204) {
            projects.delete(id);
            for (const t of before.body.data.relationships.tasks.data) {
              if (['newed', 'started', 'planned'].includes(tasks.get(t.id) ?? '')) tasks.set(t.id, 'abandoned');
            }
          }
          break;
        }
        case 'createTask': {
          const task: Record<string, unknown> = { label: s.text };
          if (projects.size > 0 && s.pick2 % 2 === 0) task.project_id = of(projects, s.pick);
          if (s.pick2 % 5 === 1) task.planned_at = nowSeconds() + 2 * DAY;
          res = await call(baseOf(), 'POST', '/api/users/me/tasks', { token, body: { task } });
          if (res.status === 201) tasks.set(res.body.data.id, res.body.data.attributes.state);
          break;
        }
        case 'updateTask': {
          if (tasks.size === 0) continue;
          const task = s.pick2 % 3 === 0 ? { label: s.text } : { project_id: projects.size > 0 && s.pick2 % 3 === 1 ? of(projects, s.pick2) : null };
          const id = of(tasks, s.pick);
          res = await call(baseOf(), 'PATCH', `/api/tasks/${id}`, { token, body: { task } });
          if (res.status === 200) tasks.set(id, res.body.data.attributes.state);
          break;
        }
        case 'taskState': {
          if (tasks.size === 0) continue;
          const id = of(tasks, s.pick);
          const moves = TASK_MOVES[tasks.get(id)!]!;
          if (moves.length === 0) continue;
          res = await call(baseOf(), 'PUT', `/api/tasks/${id}/state`, { token, body: { task: { state: moves[s.pick2 % moves.length] } } });
          if (res.status === 200) tasks.set(id, res.body.data.attributes.state);
          break;
        }
        case 'reorder':
          if (tasks.size < 2) continue;
          res = await call(baseOf(), 'PUT', `/api/tasks/${of(tasks, s.pick)}/order`, { token, body: { task: { order: 1 + (s.pick2 % tasks.size) } } });
          break;
      }
      expect([200, 201, 204, 422], `${s.kind}: ${res.status} ${res.text}`).toContain(res.status);
      if (res.status === 422) expect(['reached_max_started', 'invalid_transition', 'taken'], res.text).toContain(res.body.errors[0].code);
      else if (res.status !== 200) ok += 1;
    }
    return ok;
  }

  const PATTERN_SETS = [['*'], ['task.*'], ['project.*'], ['project.created'], ['task.updated'], ['project.deleted', 'task.created'], ['project.updated', 'task.*']];

  /**
   * Users with 1 to 3 webhooks each (`*`, then patterns drawn from PATTERN_SETS), random writes in
   * parallel across users; when every webhook has reached its user's newest event, each
   * receiver holds exactly the matching events of its user, in order, once each.
   */
  async function exactDelivery(bases: string[], seed: number, receiverDelay: (n: number) => number) {
    const pick = (n: number) => bases[n % bases.length]!;
    const plan = fc.sample(
      fc.array(
        fc.record({
          // The first webhook of each user takes every event; up to two more, other patterns.
          hooks: fc.array(fc.integer({ min: 1, max: PATTERN_SETS.length - 1 }), { maxLength: 2 }).map((more) => [0, ...more]),
          steps: fc.array(step, { minLength: 25, maxLength: 40 }),
        }),
        { minLength: 4, maxLength: 4 },
      ),
      { seed, numRuns: 1 },
    )[0]!;
    const setups = await Promise.all(
      plan.map(async (p) => {
        const user = await newUser(pick(0));
        const hooks = await Promise.all(
          p.hooks.map(async (set, n) => {
            const r = await receiver();
            const delay = receiverDelay(n);
            if (delay > 0) r.respond((_req, res) => void setTimeout(() => res.writeHead(204).end(), delay));
            const events = PATTERN_SETS[set]!;
            const hook = await createWebhook(pick(n), user.token, r.url, events);
            return { ...hook, events, receiver: r };
          }),
        );
        return { user, hooks, steps: p.steps };
      }),
    );
    let turn = 0;
    const oks = await Promise.all(setups.map((s, i) => runSteps(() => pick(turn++), s.user, s.steps, `u${i}`)));
    let total = 0;
    let logged = 0;
    for (const [i, s] of setups.entries()) {
      for (const hook of s.hooks) await caughtUp(pick(0), s.user.token, hook.id, 30_000);
      const events = await feed(pick(0), s.user.token);
      expect(events.length, `seed ${seed}: user ${i} created or deleted`).toBeGreaterThanOrEqual(oks[i]!);
      logged += events.length;
      // Ids strictly increase in the feed itself.
      for (let k = 1; k < events.length; k++) expect(BigInt(events[k]!.id) > BigInt(events[k - 1]!.id)).toBe(true);
      for (const hook of s.hooks) {
        const wanted = events.filter((e) => matches(hook.events, e.type));
        const got = hook.receiver.received;
        expect(got.map((d) => d.json.id), `seed ${seed}: user ${i}, webhook ${hook.id} ${JSON.stringify(hook.events)}`).toEqual(wanted.map((e) => e.id));
        expect(hook.receiver.accepted).toHaveLength(got.length);
        for (const [k, d] of got.entries()) expectDeliveryOf(d, wanted[k]!, hook.secret);
        total += got.length;
      }
    }
    // Every user has a webhook of every event: at least the whole log went out.
    expect(total).toBeGreaterThanOrEqual(logged);
    expect(logged, `seed ${seed}: events written`).toBeGreaterThanOrEqual(40);
    return { total, types: new Set(setups.flatMap((s) => s.hooks.flatMap((h) => h.receiver.received.map((d) => d.json.type)))) };
  }

  it('delivers to each webhook exactly its user\'s matching events, in id order, once each, identical to the feed (random writes)', async () => {
    const seed = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31);
    const { total, types } = await exactDelivery([base], seed, (n) => (n === 1 ? 3 : 0));
    console.log(`seed ${seed}: ${total} deliveries`);
    expect([...types].sort()).toEqual(['project.created', 'project.deleted', 'project.updated', 'task.created', 'task.updated']);
  }, 60_000);

  describe('two service instances on one database', () => {
    let second: RunningService;
    let first: RunningService;

    beforeAll(async () => {
      const databaseUrl = await createTestDatabase();
      first = await startWebhookService(databaseUrl, true);
      services.push(first);
      second = await startWebhookService(databaseUrl, true);
      services.push(second);
    });

    it('attempts each event once per webhook: every receiver gets each of its events exactly once', async () => {
      const seed = Number(process.env.FC_SEED ?? (Date.now() + 1) % 2 ** 31);
      // Receivers that take a few milliseconds widen the window in which both processes hold a notification.
      const { total } = await exactDelivery([first.url, second.url], seed, (n) => 2 + 4 * n);
      const texts = await Promise.all([first.metricsUrl!, second.metricsUrl!].map((u) => scrape(u)));
      const delivered = texts.map((t) => sample(t, 'planning_webhook_deliveries_total', { outcome: 'delivered' })!);
      const failed = texts.map((t) => sample(t, 'planning_webhook_deliveries_total', { outcome: 'failed' })!);
      console.log(`seed ${seed}: ${total} deliveries, attempted by the two processes ${delivered.join(' + ')}`);
      // Every attempt made, by either process, is one of the deliveries the receivers got once each.
      expect(delivered[0]! + delivered[1]!).toBe(total);
      expect(failed).toEqual([0, 0]);
    }, 60_000);
  });
});
