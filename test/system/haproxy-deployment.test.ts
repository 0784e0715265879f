/**
 * The deployment of README.md "Several instances behind HAProxy", run as written there
 * (test/helpers/deployment.ts reads its pgbouncer.ini, haproxy.cfg, error file and start
 * commands from README.md): instances behind Debian's HAProxy, on PgBouncer in transaction
 * mode, LISTEN going to PostgreSQL directly.
 *
 * - As written, it serves: every instance takes requests, a write through HAProxy reaches a
 *   stream open through HAProxy on another instance, and what HAProxy answers itself is the
 *   service's 503 envelope with Retry-After; its timeouts let an idle stream's heartbeats through.
 * - Killed under load: with a load of keyed writes (each retried with its key until it gets
 *   an answer other than 503) and streams that resume with Last-Event-ID, its instances are
 *   killed one by one with SIGKILL and started again, and a 4th joins mid-run. Every
 *   acknowledged write is there exactly once, in the tasks and in the change log; clients see
 *   only 2xx, and 503 with Retry-After (a 409 request_in_progress only for a retry of a request
 *   cut off with its instance, whose first run had not ended yet); a retry of any key gets its
 *   original answer again; every stream sees every event of its user once, in order.
 */
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { haproxyTimeoutMs, instancePorts, startDeployment, type Deployment } from '../helpers/deployment.js';
import { skipWithout } from '../helpers/pooled-database.js';
import { openStream, type SseStream } from '../helpers/sse.js';
import type { SpawnedService } from '../helpers/spawn-service.js';

const skip = skipWithout('postgres', 'pgbouncer', 'haproxy');
/** An idle stream's heartbeat (src/changes/event-hub.ts: the idle tick). */
const HEARTBEAT_MS = 15_000;

let deployment: Deployment | undefined;
let started: Promise<Deployment> | undefined;
/** The README's deployment, started once for whichever test comes first. */
const deployed = () =>
  (started ??= startDeployment({
    // The load sends more than a token's 1,200 requests a minute; the limits are not under test here.
    env: { RATE_LIMIT_PER_MINUTE: '0', RATE_LIMIT_AUTH_PER_MINUTE: '0' },
  }).then((d) => (deployment = d)));
afterAll(async () => {
  await deployment?.stop();
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

/** One request on a connection of its own (no keep-alive: a reset is then always this request's). */
function send(url: string, method: string, path: string, options: { token?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<Answer> {
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${url}${path}`,
      {
        method,
        agent: false,
        headers: {
          Connection: 'close',
          ...(options.token ? { Authorization: options.token } : {}),
          ...(payload === undefined ? {} : { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(payload)) }),
          ...options.headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

async function register(url: string, username: string): Promise<string> {
  const res = await send(url, 'POST', '/api/users', { body: { user: { username, password: 'password1' } } });
  expect(res.status, res.text).toBe(201);
  return JSON.parse(res.text).meta.token as string;
}

/** A user's whole change log, through the REST list (100 a page, following links.next). */
async function changeLog(url: string, token: string): Promise<Array<{ id: string; type: string; data: { id: number; attributes?: { label?: string } } }>> {
  const events = [];
  for (let path: string | undefined = '/api/users/me/events?after=0'; path; ) {
    const res = await send(url, 'GET', path, { token });
    expect(res.status, res.text).toBe(200);
    const page = JSON.parse(res.text);
    events.push(...page.data);
    path = page.links?.next ? new URL(page.links.next, url).pathname + new URL(page.links.next, url).search : undefined;
  }
  return events;
}

/**
 * A client's pause before it asks again after a 503 (its Retry-After, shortened for the
 * test): a wait on the clock, as a client's back-off is.
 */
async function backOff(ms = 50): Promise<void> {
  const until = performance.now() + ms;
  await eventually(() => performance.now() >= until, { interval: ms, message: 'the back-off' });
}

describe.skipIf(skip)("README.md's deployment: instances behind HAProxy, on PgBouncer", () => {
  it('runs as written: writes spread over the instances but the stream\'s, reach the stream within a second, and HAProxy\'s own answers are the service\'s 503', async () => {
    const d = await deployed();
    const cfg = d.readme.haproxy;
    // Only a failed connection is retried, never a request that reached an instance.
    expect(cfg).toMatch(/^\s*retry-on\s+conn-failure\s*$/m);
    expect(cfg).toMatch(/^\s*option\s+httpchk\s+GET\s+\/readyz\s*$/m);
    // A stream silent between heartbeats is not cut: HAProxy cuts a response silent for `timeout server`.
    expect(haproxyTimeoutMs(cfg, 'server')).toBeGreaterThan(2 * HEARTBEAT_MS);
    expect(haproxyTimeoutMs(cfg, 'client')).toBeGreaterThan(2 * HEARTBEAT_MS);
    // The README's instances are the first of its server lines.
    const servers = [...cfg.matchAll(/^\s*server\s+\S+\s+127\.0\.0\.1:(\d+)/gm)].map((m) => Number(m[1]));
    expect(servers.slice(0, instancePorts(d.readme.sh).length)).toEqual(instancePorts(d.readme.sh));

    const url = d.haproxy.url;
    const running = d.instances.filter((i): i is SpawnedService => i !== undefined);
    const token = await register(url, 'readme_deployment');
    const stream = await openStream(`${url}/api/users/me/events`, { Authorization: token });
    try {
      expect(stream.status, stream.text).toBe(200);
      // Least connections: the stream holds one instance, so the writes go to the others first.
      for (let i = 0; i < 3 * running.length; i++) {
        const sent = performance.now();
        const created = await send(url, 'POST', '/api/users/me/tasks', { token, body: { task: { label: `through haproxy ${i}` } } });
        expect(created.status, created.text).toBe(201);
        const event = await stream.nextEvent(1_000);
        expect(JSON.parse(event.data).data.attributes.label).toBe(`through haproxy ${i}`);
        expect(performance.now() - sent).toBeLessThan(1_000);
      }
    } finally {
      stream.close();
    }
    // The writes went to every instance but one: the stream's (least connections).
    const wrote = (i: SpawnedService) => i.output().includes('"path":"/api/users/me/tasks"');
    expect(running.filter(wrote)).toHaveLength(running.length - 1);

    // What HAProxy answers itself is the README's error file: the service's envelope, with
    // Retry-After (the test below sees HAProxy send it).
    const own = d.readme.http.split('\n');
    expect(own[0]).toBe('HTTP/1.1 503 Service Unavailable');
    expect(own).toContain('Retry-After: 1');
    expect(JSON.parse(own.at(-1)!).errors[0]).toMatchObject({ status: '503', code: 'service_unavailable' });
  }, 60_000);

  it('loses no acknowledged keyed write and no event while instances are killed, restarted and added under load', async () => {
    const d = await deployed();
    const url = d.haproxy.url;
    const USERS = 6;
    const tokens = await Promise.all(Array.from({ length: USERS }, (_, u) => register(url, `killed_${u}`)));

    // Every answer a client got, by status; 503s without Retry-After; resets (connection errors).
    const statuses = new Map<number, number>();
    const unexpected: string[] = [];
    let resets = 0;
    let retries = 0;
    /** Each acknowledged key: its body and the answer's text. */
    const acknowledged = new Map<string, { token: string; body: unknown; text: string }>();
    let stopping = false;

    /** A client's keyed write: sent again with its key until the answer is not a 503 or a broken connection. */
    /** Keys whose request was cut off at least once (sent again). */
    const cutKeys = new Set<string>();
    const keyedWrite = async (token: string, key: string, body: unknown) => {
      let cut = false;
      const final = await eventually(
        async () => {
          let res: Answer;
          try {
            res = await send(url, 'POST', '/api/users/me/tasks', { token, body, headers: { 'Idempotency-Key': key } });
          } catch (error) {
            resets += 1;
            unexpected.push(`${key}: ${String(error)}`); // HAProxy stays up: no connection of ours breaks
            cut = true;
            retries += 1;
            return false;
          }
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          if (res.status === 503) {
            if (!res.headers['retry-after']) unexpected.push(`${key}: 503 without Retry-After: ${res.text}`);
            expect(JSON.parse(res.text).errors[0].code).toBe('service_unavailable');
            cut = true;
            retries += 1;
            return false;
          }
          // The first run of a request cut off with its instance may still hold its key a moment.
          if (res.status === 409 && cut && JSON.parse(res.text).errors[0].code === 'request_in_progress') {
            retries += 1;
            return false;
          }
          return res;
        },
        { timeout: 20_000, interval: 25, message: `an answer to ${key} other than 503` },
      );
      if (cut) cutKeys.add(key);
      if (final.status !== 201) unexpected.push(`${key}: ${final.status} ${final.text}`);
      else acknowledged.set(key, { token, body, text: final.text });
    };
    const writer = async (u: number) => {
      for (let i = 0; !stopping; i++) {
        const key = `k${u}-${i}-${randomUUID()}`;
        await keyedWrite(tokens[u]!, key, { task: { label: key } });
      }
    };

    /** A client following its change log: on any end or refusal it reconnects with Last-Event-ID. */
    interface Follower {
      seen: string[];
      errorEvents: number;
      reconnects: number;
      stream?: SseStream;
    }
    const followers: Follower[] = [];
    const follow = async (token: string, f: Follower) => {
      let last = '0';
      while (!stopping) {
        let stream: SseStream;
        try {
          stream = await openStream(`${url}/api/users/me/events`, { Authorization: token, 'Last-Event-ID': last });
        } catch {
          f.reconnects += 1;
          continue;
        }
        f.stream = stream;
        if (stream.status !== 200) {
          if (stream.status !== 503 || !stream.headers.get('retry-after')) unexpected.push(`stream: ${stream.status} ${stream.text}`);
          await backOff();
          f.reconnects += 1;
          continue;
        }
        for (;;) {
          let message;
          try {
            message = await stream.next(60_000);
          } catch {
            break; // the stream ended (its instance was killed) or was closed
          }
          if (message.event === 'error') {
            f.errorEvents += 1;
            continue;
          }
          if (message.data === undefined || message.id === undefined) continue;
          f.seen.push(message.id);
          last = message.id;
        }
        f.reconnects += 1;
      }
    };
    const followed = tokens.flatMap((token) =>
      Array.from({ length: 2 }, () => {
        const f: Follower = { seen: [], errorEvents: 0, reconnects: 0 };
        followers.push(f);
        return follow(token, f);
      }),
    );

    const load = Promise.all(tokens.map((_, u) => writer(u)));
    const afterMore = async (n: number, what: string) => {
      const target = acknowledged.size + n;
      await eventually(() => acknowledged.size >= target, { timeout: 20_000, interval: 10, message: `${n} more writes acknowledged ${what}` });
    };
    const t0 = performance.now();
    await afterMore(20, 'before the first kill');
    // Kill each running instance in turn, let the load go on without it, then start it again;
    // start the 4th slot's instance while the second one is down.
    const slots = d.instances.map((instance, i) => (instance ? i : -1)).filter((i) => i >= 0);
    const extra = d.instances.findIndex((instance) => instance === undefined);
    for (const [n, slot] of slots.entries()) {
      await d.killInstance(slot);
      await afterMore(10, `with slot ${slot} killed`);
      if (n === 1 && extra >= 0) await d.startInstance(extra);
      await d.startInstance(slot);
      await d.joined(slot);
      await afterMore(10, `with slot ${slot} back`);
    }
    if (extra >= 0) await d.joined(extra);
    await afterMore(20, 'with every instance up');
    stopping = true;
    await load;
    const loadMs = performance.now() - t0;

    // Every acknowledged write once: in the tasks and in the change log.
    const client = new pg.Client({ connectionString: d.database.directUrl });
    await client.connect();
    try {
      const rows = (await client.query<{ label: string; n: number }>("select label, count(*)::int as n from tasks where label like 'k%' group by label")).rows;
      expect(rows.filter((r) => r.n !== 1)).toEqual([]);
      expect(new Set(rows.map((r) => r.label))).toEqual(new Set(acknowledged.keys()));
    } finally {
      await client.end();
    }
    const logs = await Promise.all(tokens.map((token) => changeLog(url, token)));
    const created = logs.flat().filter((e) => e.type === 'task.created').map((e) => e.data.attributes!.label!);
    expect(created.length).toBe(acknowledged.size);
    expect(new Set(created)).toEqual(new Set(acknowledged.keys()));

    // A key sent again gets its original answer, replayed: every key that was cut off, and every 10th.
    const keys = [...acknowledged].filter(([key], i) => cutKeys.has(key) || i % 10 === 0);
    for (let i = 0; i < keys.length; i += 16) {
      await Promise.all(
        keys.slice(i, i + 16).map(async ([key, sent]) => {
          const again = await send(url, 'POST', '/api/users/me/tasks', { token: sent.token, body: sent.body, headers: { 'Idempotency-Key': key } });
          expect({ status: again.status, replayed: again.headers['idempotent-replayed'], text: again.text }, key).toEqual({ status: 201, replayed: 'true', text: sent.text });
        }),
      );
    }

    // Every stream saw every event of its user once, in order: what the log lists.
    await eventually(
      () => followers.every((f, n) => f.seen.length >= logs[Math.floor(n / 2)]!.length),
      { timeout: 10_000, message: 'every stream caught up with its log' },
    );
    followers.forEach((f) => f.stream?.close());
    await Promise.all(followed);
    followers.forEach((f, n) => expect(f.seen, `stream ${n}`).toEqual(logs[Math.floor(n / 2)]!.map((e) => e.id)));

    // Only 2xx and 503 with Retry-After (and 409 for a retry only); the kills did cut requests and streams.
    expect(unexpected).toEqual([]);
    expect([...statuses.keys()].every((s) => s === 201 || s === 503 || s === 409)).toBe(true);
    expect(followers.reduce((n, f) => n + f.reconnects, 0)).toBeGreaterThan(0);
    // The instance started mid-run took writes.
    if (extra >= 0) expect(d.instances[extra]!.output()).toContain('"path":"/api/users/me/tasks"');
    console.info(
      `behind HAProxy, 3 instances killed one by one and a 4th added: ${acknowledged.size} keyed writes in ${(loadMs / 1000).toFixed(1)} s, ` +
        `answers ${JSON.stringify(Object.fromEntries(statuses))}, ${retries} retries, ${resets} resets, ` +
        `stream reconnects ${followers.reduce((n, f) => n + f.reconnects, 0)}, error events ${followers.reduce((n, f) => n + f.errorEvents, 0)}`,
    );
  }, 90_000);
});
