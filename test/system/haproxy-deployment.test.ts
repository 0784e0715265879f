/**
 * The deployment of docs/operations.md "Several instances behind HAProxy", run as written there
 * (test/helpers/deployment.ts reads its pgbouncer.ini, haproxy.cfg, error file and start
 * commands from that page): instances behind Debian's HAProxy, on PgBouncer in transaction
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
import { afterAll, describe, expect, it } from 'vitest';
import { haproxyTimeoutMs, instancePorts, startDeployment, type Deployment } from '../helpers/deployment.js';
import { skipWithout } from '../helpers/pooled-database.js';
import { describeLoad, expectNothingLost, register, send, startLoad } from '../helpers/retrying-clients.js';
import { openStream } from '../helpers/sse.js';
import type { SpawnedService } from '../helpers/spawn-service.js';

const skip = skipWithout('postgres', 'pgbouncer', 'haproxy');
/** An idle stream's heartbeat (src/changes/event-hub.ts: the idle tick). */
const HEARTBEAT_MS = 15_000;

let started: Promise<Deployment> | undefined;
/**
 * The page's deployment, started once for whichever test comes first (one deployment's start
 * is three instances, each with its database migrated, PostgreSQL, PgBouncer and HAProxy).
 * The first test, which reads how HAProxy spreads requests, runs on it as the page starts it
 * (it checks that only the page's instances run there): the kill test, which leaves a 4th
 * instance and restarted ones, comes after it, and its stream is closed by then. The kill
 * test's users and keys are its own (expectNothingLost reads only the load's keys), so what
 * the first one wrote is not counted there.
 */
const deployment = () =>
  (started ??= startDeployment({
    // The load sends more than a token's 1,200 requests a minute; the limits are not under test here.
    env: { RATE_LIMIT_PER_MINUTE: '0', RATE_LIMIT_AUTH_PER_MINUTE: '0' },
  }));
afterAll(async () => {
  await (await started?.catch(() => undefined))?.stop();
});

describe.skipIf(skip)("docs/operations.md's deployment: instances behind HAProxy, on PgBouncer", () => {
  it('runs as written: writes spread over the instances but the stream\'s, reach the stream within a second, and HAProxy\'s own answers are the service\'s 503', async () => {
    const d = await deployment();
    const cfg = d.documented.haproxy;
    // Only a failed connection is retried, never a request that reached an instance.
    expect(cfg).toMatch(/^\s*retry-on\s+conn-failure\s*$/m);
    expect(cfg).toMatch(/^\s*option\s+httpchk\s+GET\s+\/readyz\s*$/m);
    // A stream silent between heartbeats is not cut: HAProxy cuts a response silent for `timeout server`.
    expect(haproxyTimeoutMs(cfg, 'server')).toBeGreaterThan(2 * HEARTBEAT_MS);
    expect(haproxyTimeoutMs(cfg, 'client')).toBeGreaterThan(2 * HEARTBEAT_MS);
    // The page's instances are the first of its server lines.
    const servers = [...cfg.matchAll(/^\s*server\s+\S+\s+127\.0\.0\.1:(\d+)/gm)].map((m) => Number(m[1]));
    expect(servers.slice(0, instancePorts(d.documented.sh).length)).toEqual(instancePorts(d.documented.sh));

    const url = d.haproxy.url;
    const running = d.instances.filter((i): i is SpawnedService => i !== undefined);
    // As the page starts it: its instances and no other (the kill test, which adds one, comes after this one).
    expect(running).toHaveLength(instancePorts(d.documented.sh).length);
    const token = await register(url, 'readme_deployment');
    // What each instance logs from here on.
    const logged = running.map((i) => i.output().length);
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
    const wrote = (i: SpawnedService, n: number) => i.output().slice(logged[n]).includes('"path":"/api/users/me/tasks"');
    expect(running.filter(wrote)).toHaveLength(running.length - 1);

    // What HAProxy answers itself is the page's error file: the service's envelope, with
    // Retry-After (the test below sees HAProxy send it).
    const own = d.documented.http.split('\n');
    expect(own[0]).toBe('HTTP/1.1 503 Service Unavailable');
    expect(own).toContain('Retry-After: 1');
    expect(JSON.parse(own.at(-1)!).errors[0]).toMatchObject({ status: '503', code: 'unavailable' });
  }, 60_000);

  it('loses no acknowledged keyed write and no event while instances are killed, restarted and added under load', async () => {
    const d = await deployment();
    const url = d.haproxy.url;
    const tokens = await Promise.all(Array.from({ length: 6 }, (_, u) => register(url, `killed_${u}`)));
    // Everything through HAProxy, which stays up: no client connection of ours may break.
    const load = startLoad({ tokens, writeUrl: () => url, streamUrl: () => url, streamsPerUser: 2, prefix: 'killed' });
    const t0 = performance.now();
    await load.afterMore(20, 'before the first kill');
    // Kill each running instance in turn, let the load go on without it, then start it again;
    // start the 4th slot's instance while the second one is down.
    const slots = d.instances.map((instance, i) => (instance ? i : -1)).filter((i) => i >= 0);
    const extra = d.instances.findIndex((instance) => instance === undefined);
    for (const [n, slot] of slots.entries()) {
      await d.killInstance(slot);
      await load.afterMore(10, `with slot ${slot} killed`);
      if (n === 1 && extra >= 0) await d.startInstance(extra);
      await d.startInstance(slot);
      await d.joined(slot);
      await load.afterMore(10, `with slot ${slot} back`);
    }
    if (extra >= 0) await d.joined(extra);
    await load.afterMore(20, 'with every instance up');
    await load.stopWriting();
    const loadMs = performance.now() - t0;

    await expectNothingLost(load, { directUrl: d.database.directUrl, url, tokens });
    // The kills did cut streams, which resumed; the instance started mid-run took writes.
    expect(load.followers.reduce((n, f) => n + f.reconnects, 0)).toBeGreaterThan(0);
    if (extra >= 0) expect(d.instances[extra]!.output()).toContain('"path":"/api/users/me/tasks"');
    console.info(`behind HAProxy, 3 instances killed one by one and a 4th added: ${describeLoad(load, loadMs)}`);
  }, 90_000);
});
