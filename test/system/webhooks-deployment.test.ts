/**
 * Webhooks (API-CONTRACT.md §14) in docs/operations.md's deployment "Several instances behind HAProxy",
 * run as written there (test/helpers/deployment.ts): every instance delivers, on PgBouncer in
 * transaction mode, and its instances are killed with SIGKILL under load and started again.
 *
 * Users with 20 webhooks between them, each on a loopback receiver of its own, some listening
 * to every event and some to patterns (`task.*`, `project.*`, two event types), some receivers
 * answering at once and some after 50 to 150 ms (so that a kill is likely to land while an
 * attempt waits for its answer). Keyed writes through HAProxy (batches giving every event type,
 * and single task creations), each sent again with its key until it is answered, run while each
 * instance in turn is killed and started again, twice over (each restart's process loaded the
 * service's code beforehand and runs it after the kill: deployment.ts `prepareInstance`).
 * Once the writes stop, every webhook's place reaches its user's newest event (its lease of a
 * killed instance expired and another instance took it), and then:
 *
 * - Nothing lost: every committed event of a user that matches a webhook's patterns reached
 *   that webhook's receiver; every acknowledged write is in the change log.
 * - Nothing foreign: a receiver got only its user's events that match its patterns, each the
 *   event exactly as the change log serves it, signed with its webhook's secret, with the
 *   event id as `webhook-id`.
 * - Order: the first arrivals of the events at each receiver are in increasing id order.
 * - Duplicates are the same delivery again: the same `webhook-id` and the same body; an
 *   attempt cut off before its answer (its instance killed meanwhile) is made again.
 *
 * The number of attempts cut off and of duplicates received is logged.
 */
import { createHmac, randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { startDeployment, type Deployment } from '../helpers/deployment.js';
import { eventually } from '../helpers/eventually.js';
import { skipWithout } from '../helpers/pooled-database.js';
import { mulberry32 } from '../helpers/prng.js';
import { backOff, changeLog, register, send, type Answer, type LoggedEvent } from '../helpers/retrying-clients.js';
import { startReceiver, type Receiver, type Received } from '../helpers/webhook-receiver.js';

const skip = skipWithout('postgres', 'pgbouncer', 'haproxy');

/** An attempt's time limit: a killed instance's leases expire 2 × this + 10 s later. */
const WEBHOOK_TIMEOUT_MS = 2_000;
const USERS = 5;
/** Each user's webhooks: their patterns (undefined: the default, every event). */
const PATTERNS: Array<string[] | undefined> = [undefined, ['task.*'], ['project.*'], ['task.created', 'project.deleted']];
/** A writer's pause between two of its writes: the events come slower than a slow receiver takes them. */
const PACE_MS = 400;
/** How many restarts ahead an instance's process is spawned to load its code (see `restarts`). */
const AHEAD = 3;

interface Hook {
  user: number;
  id: number;
  secret: string;
  patterns: string[];
  slow: boolean;
  receiver: Receiver;
  /** Requests whose sender was gone (connection closed) before the answer was written. */
  cut: Received[];
  /** Requests waiting for their answer now. */
  waiting: number;
}

/** The test's own reading of §14's patterns: an event type, `<resource>.*`, or `*`. */
function matches(patterns: string[], type: string): boolean {
  return patterns.some((p) => p === '*' || p === type || (p.endsWith('.*') && type.startsWith(p.slice(0, -1))));
}

/** Standard Webhooks: `v1,` + base64 HMAC-SHA256 of `<id>.<timestamp>.<body>`, keyed with the secret's bytes. */
function signature(secret: string, id: string, timestamp: string, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

const deployments: Deployment[] = [];
const receivers: Receiver[] = [];
afterEach(async () => {
  await Promise.all(deployments.splice(0).map((d) => d.stop()));
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

describe.skipIf(skip)("webhooks in docs/operations.md's deployment: instances behind HAProxy, on PgBouncer", () => {
  it('delivers every matching event of each user to each webhook, in order, at least once, while instances are killed and restarted under load', async () => {
    const t0 = performance.now();
    const d = await startDeployment({
      env: {
        // The load sends more than a token's 1,200 requests a minute; the limits are not under test here.
        RATE_LIMIT_PER_MINUTE: '0',
        RATE_LIMIT_AUTH_PER_MINUTE: '0',
        WEBHOOK_ALLOW_PRIVATE_URLS: '1',
        WEBHOOK_TIMEOUT_MS: String(WEBHOOK_TIMEOUT_MS),
        // An attempt that fails (a timeout on a busy machine) is tried again soon: the retry schedule is not under test here.
        WEBHOOK_RETRY_SCHEDULE: '1,1,2,2,3,3,5,5,5,5',
      },
    });
    deployments.push(d);
    const url = d.haproxy.url;
    const slots = d.instances.map((instance, i) => (instance ? i : -1)).filter((i) => i >= 0);
    // Each instance in turn is killed and started again, twice over. The process of a restart is
    // spawned AHEAD restarts before its turn and loads the service's code meanwhile (deployment.ts
    // `prepareInstance`): starting it after the kill is then the service's own start (its
    // configuration, connections, migrations, listening), not seconds of loading modules on a
    // busy machine while the writes go on.
    const order = [...slots, ...slots];
    const restarts = order.slice(0, AHEAD).map((slot) => d.prepareInstance(slot));

    // Users, and their webhooks on receivers of their own.
    const tokens = await Promise.all(Array.from({ length: USERS }, (_, u) => register(url, `hooked_${u}`)));
    const random = mulberry32(20_260_615);
    // The users' webhooks are created side by side, each user's in the order of PATTERNS.
    const byUser = await Promise.all(
      tokens.map(async (token, u) => {
        const own: Hook[] = [];
        for (const [k, events] of PATTERNS.entries()) {
          const receiver = await startReceiver();
          receivers.push(receiver);
          const slow = events !== undefined && (k + u) % 2 === 1;
          const res = await send(url, 'POST', '/api/users/me/webhooks', {
            token,
            body: { webhook: { url: receiver.url, ...(events ? { events } : {}), description: `user ${u}, webhook ${k}` } },
          });
          expect(res.status, res.text).toBe(201);
          const created = JSON.parse(res.text) as { data: { id: number; attributes: { events: string[] } }; meta: { secret: string } };
          expect(created.data.attributes.events.toSorted()).toEqual((events ?? ['*']).toSorted());
          const hook: Hook = { user: u, id: created.data.id, secret: created.meta.secret, patterns: events ?? ['*'], slow, receiver, cut: [], waiting: 0 };
          receiver.respond((request, res) => {
            hook.waiting += 1;
            res.once('close', () => {
              if (!res.writableFinished) hook.cut.push(request);
            });
            // A slow receiver answers 50 to 150 ms later, as a busy one does.
            const delay = slow ? 50 + Math.floor(random() * 100) : 0;
            setTimeout(() => {
              hook.waiting -= 1;
              if (!res.destroyed) res.writeHead(204).end();
            }, delay);
          });
          own.push(hook);
        }
        return own;
      }),
    );
    const hooks = byUser.flat();
    expect(hooks).toHaveLength(20);

    // Keyed writes through HAProxy, each sent again with its key until it is answered.
    const acknowledged = new Map<string, number>();
    const statuses = new Map<number, number>();
    const unexpected: string[] = [];
    let retries = 0;
    let stopping = false;
    const keyedWrite = async (u: number, key: string, path: string, body: unknown, ok: number) => {
      let cut = false;
      const final = await eventually(
        async () => {
          let res: Answer;
          try {
            res = await send(url, 'POST', path, { token: tokens[u], body, headers: { 'Idempotency-Key': key } });
          } catch (error) {
            unexpected.push(`${key}: ${String(error)}`);
            return false;
          }
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          if (res.status === 503 && res.headers['retry-after']) {
            cut = true;
            retries += 1;
            return false;
          }
          // The first run of a request cut off with its instance may still hold its key a moment.
          if (res.status === 409 && cut && JSON.parse(res.text).errors?.[0]?.code === 'request_in_progress') {
            retries += 1;
            return false;
          }
          return res;
        },
        { timeout: 20_000, interval: 25, message: `an answer to ${key} other than 503` },
      );
      if (final.status === ok) acknowledged.set(key, u);
      else unexpected.push(`${key}: ${final.status} ${final.text}`);
    };
    const writer = async (u: number) => {
      for (let i = 0; !stopping; i++) {
        const key = `hook-${u}-${i}-${randomUUID()}`;
        if (i % 3 === 2) {
          await keyedWrite(u, key, '/api/users/me/tasks', { task: { label: key } }, 201);
        } else {
          // project.created, task.created, project.updated, task.updated; and every other time
          // project.deleted with the task.updated of the task it releases.
          const operations: unknown[] = [
            { op: 'projects.create', ref: 'p', input: { project: { name: key } } },
            { op: 'tasks.create', ref: 't', input: { task: { label: key, project_id: { ref: 'p' } } } },
            { op: 'projects.update', input: { id: { ref: 'p' }, project: { description: 'edited' } } },
            { op: 'tasks.update', input: { id: { ref: 't' }, task: { label: `${key} edited` } } },
            ...(i % 3 === 1 ? [{ op: 'projects.delete', input: { id: { ref: 'p' } } }] : []),
          ];
          await keyedWrite(u, key, '/api/batch', { operations }, 200);
        }
        await backOff(PACE_MS);
      }
    };
    const writers = Promise.all(tokens.map((_, u) => writer(u)));
    const afterMore = async (n: number, what: string) => {
      const target = acknowledged.size + n;
      await eventually(() => acknowledged.size >= target || unexpected.length > 0, { timeout: 30_000, interval: 10, message: `${n} more writes acknowledged ${what}` });
      expect(unexpected).toEqual([]);
    };
    /** Waits until slow receivers hold attempts unanswered, so that the kill likely cuts one off. */
    const attemptsUnderWay = (what: string) =>
      eventually(() => hooks.filter((h) => h.waiting > 0).length >= 2, { timeout: 30_000, interval: 5, message: `attempts waiting for slow receivers ${what}` });

    const loadStart = performance.now();
    try {
      await afterMore(20, 'before the first kill');
      for (const [k, slot] of order.entries()) {
        await attemptsUnderWay(`before slot ${slot} is killed`);
        await d.killInstance(slot);
        await afterMore(10, `with slot ${slot} killed`);
        await restarts[k]!.start();
        if (k + AHEAD < order.length) restarts.push(d.prepareInstance(order[k + AHEAD]!));
        await d.joined(slot);
        await afterMore(10, `with slot ${slot} back`);
      }
      await afterMore(15, 'with every instance up');
    } finally {
      // The writers stop even when a step above failed, so that none outlives the test.
      stopping = true;
      await writers;
    }
    const loadMs = performance.now() - loadStart;
    expect(unexpected).toEqual([]);

    // Every webhook's place reaches its user's newest event (a killed instance's leases expire first).
    const newest = await Promise.all(
      tokens.map(async (token) => {
        const res = await send(url, 'GET', '/api/users/me/events', { token });
        expect(res.status, res.text).toBe(200);
        return BigInt(JSON.parse(res.text).meta.last_event_id as string);
      }),
    );
    const catchUpStart = performance.now();
    let behind: string[] = [];
    const caughtUp = eventually(
      async () => {
        behind = [];
        for (const [u, token] of tokens.entries()) {
          const res = await send(url, 'GET', '/api/users/me/webhooks', { token });
          expect(res.status, res.text).toBe(200);
          for (const w of JSON.parse(res.text).data as Array<{ id: number; attributes: { state: string; disabledReason: string | null; lastEventId: string } }>) {
            // A disabled webhook never catches up: fail at once, saying why.
            expect(w.attributes.state, `webhook ${w.id}: ${w.attributes.disabledReason}`).toBe('enabled');
            if (BigInt(w.attributes.lastEventId) < newest[u]!) behind.push(`webhook ${w.id} of user ${u} at ${w.attributes.lastEventId} of ${newest[u]}`);
          }
        }
        return behind.length === 0;
      },
      { timeout: 60_000, interval: 250, message: 'every webhook delivered up to its user\'s newest event' },
    );
    await caughtUp.catch(async (error: Error) => {
      // What the rows of the webhooks left behind say, for the failure's message.
      const client = new pg.Client({ connectionString: d.database.directUrl });
      await client.connect();
      const rows = await client
        .query('select w.user_id, w.id, w.state, w.cursor, u.last_event_seq, w.attempt, w.next_attempt_at, w.lease_owner, w.lease_until, now() as now from webhooks w join users u on u.id = w.user_id where w.cursor < u.last_event_seq order by w.user_id, w.id')
        .finally(() => client.end());
      throw new Error(`${error.message}\n${behind.join('\n')}\n${JSON.stringify(rows.rows, null, 1)}`);
    });
    const catchUpMs = performance.now() - catchUpStart;

    // The committed change logs; every acknowledged write is in its user's, once.
    const logs: LoggedEvent[][] = await Promise.all(tokens.map((token) => changeLog(url, token)));
    for (const [u, log] of logs.entries()) {
      expect(BigInt(log.at(-1)!.id)).toBe(newest[u]);
      const created = log.filter((e) => e.type === 'task.created').map((e) => e.data.attributes!.label!);
      const acked = [...acknowledged].filter(([, user]) => user === u).map(([key]) => key);
      expect(created.toSorted()).toEqual(acked.toSorted());
    }

    let duplicates = 0;
    let cut = 0;
    let requests = 0;
    for (const hook of hooks) {
      const name = `webhook ${hook.id} of user ${hook.user} (${hook.patterns.join(',')}${hook.slow ? ', slow' : ''})`;
      const log = logs[hook.user]!;
      const byId = new Map(log.map((e) => [e.id, e]));
      const expected = log.filter((e) => matches(hook.patterns, e.type)).map((e) => e.id);
      const received = hook.receiver.received;
      requests += received.length;

      // Each request: this user's event matching the patterns, exactly as the log serves it, signed.
      for (const r of received) {
        const event = byId.get(r.json.id);
        expect(event, `${name} got ${r.body}`).toBeDefined();
        expect(matches(hook.patterns, r.json.type), `${name} got ${r.json.type}`).toBe(true);
        expect(JSON.parse(r.body), name).toEqual(event);
        expect(r.path).toBe('/hook');
        expect(r.headers['content-type']).toBe('application/json');
        expect(r.headers['webhook-id'], name).toBe(r.json.id);
        const timestamp = String(r.headers['webhook-timestamp']);
        expect(timestamp).toMatch(/^\d+$/);
        expect(String(r.headers['webhook-signature']).split(' '), name).toContain(signature(hook.secret, r.json.id, timestamp, r.body));
      }

      // Order: the first arrival of each event, in increasing id order; then every matching event arrived.
      const first = new Map<string, Received>();
      for (const r of received) if (!first.has(r.json.id)) first.set(r.json.id, r);
      const order = [...first.keys()];
      for (let i = 1; i < order.length; i++) {
        expect(BigInt(order[i]!) > BigInt(order[i - 1]!), `${name}: ${order[i]} arrived first after ${order[i - 1]}`).toBe(true);
      }
      expect(expected.filter((id) => !first.has(id)), `${name}: matching events lost`).toEqual([]);
      expect(order, `${name}: the matching events of its user's log`).toEqual(expected);

      // A duplicate is the same delivery again; an attempt cut off is made again afterwards.
      for (const r of received) {
        const f = first.get(r.json.id)!;
        if (r === f) continue;
        duplicates += 1;
        expect(r.headers['webhook-id'], name).toBe(f.headers['webhook-id']);
        expect(r.body, name).toBe(f.body);
      }
      for (const c of hook.cut) {
        cut += 1;
        const again = received.slice(received.indexOf(c) + 1).filter((r) => r.json.id === c.json.id);
        expect(again.length, `${name}: event ${c.json.id}, cut off, attempted again`).toBeGreaterThan(0);
      }
    }

    const events = logs.reduce((n, l) => n + l.length, 0);
    console.info(
      `webhooks behind HAProxy, ${slots.length} instances killed one by one and restarted, twice: ${acknowledged.size} keyed writes (${retries} retries, ` +
        `answers ${JSON.stringify(Object.fromEntries(statuses))}) in ${(loadMs / 1000).toFixed(1)} s, ${events} events; ` +
        `${hooks.length} webhooks got ${requests} requests: ${cut} attempts cut off before their answer, ${duplicates} duplicates; ` +
        `caught up ${(catchUpMs / 1000).toFixed(1)} s after the load; ${((performance.now() - t0) / 1000).toFixed(1)} s in all`,
    );
  }, 180_000);
});
