/**
 * The high-availability deployment of docs/operations.md (`ha/ha.sh`: three PostgreSQL 15
 * nodes under Patroni, etcd, HAProxy, PgBouncer, two instances) under a load of keyed writes,
 * event streams and webhooks, while its primary is killed three ways (API-CONTRACT.md §17):
 *
 * 1. the primary's postgres, SIGKILL (`ha/ha.sh kill-primary`): Patroni restarts it, or
 *    promotes the synchronous standby;
 * 2. the primary's Patroni, SIGKILL: its postgres runs on without it; its leader key expires
 *    and the synchronous standby is promoted; the old node is started again and rejoins;
 * 3. the primary and the synchronous standby together (Patroni and postgres of each): the node
 *    left lacks acknowledged writes and must not be promoted, so writes are 503 until one of
 *    the two comes back (both are started again).
 *
 * Counted: every write answered 2xx is in the database afterwards, once (each cut-off one
 * sent again with its Idempotency-Key: applied once, its first answer replayed); no 500; the
 * 503 window from each kill to the first 2xx write; every event reached every stream and the
 * webhook, in order, none skipped; each user's newest acknowledged task, read back all along,
 * is never missing (200, or a 503 `unavailable` with Retry-After). The report is printed.
 *
 * Needs root (Patroni, etcd and PostgreSQL run as the `postgres` user) and Debian's packages
 * (`ha/ha.sh up` installs them as root): skipped without either outside CI; in CI it runs.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { changeLog, describeLoad, expectNothingLost, register, send, startLoad, type Load } from '../helpers/retrying-clients.js';
import { walkEveryRoute } from '../helpers/route-walk.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const HA = path.join(ROOT, 'ha/ha.sh');
const NEEDED = ['/usr/bin/patroni', '/usr/bin/etcd', '/usr/bin/etcdctl', '/usr/lib/postgresql/15/bin/postgres', '/usr/sbin/pgbouncer', '/usr/sbin/haproxy'];
const skip = !process.env.CI && (process.getuid?.() !== 0 || NEEDED.some((bin) => !existsSync(bin)));

/**
 * The 503 window the deployment aims at, from a kill to the first acknowledged write; the
 * report says whether each round met it. On a loaded machine Patroni's loops and the new
 * synchronous standby's catching up stretch it, so the test fails only past twice as long.
 */
const TARGET_WINDOW_MS = 15_000;
const LIMIT_WINDOW_MS = 2 * TARGET_WINDOW_MS;
const met = (ms: number) => (ms <= TARGET_WINDOW_MS ? 'target met' : 'over the 15 s target');

const portFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });

/**
 * 51 loopback ports in a row, free now: the deployment's (HA_PORT_BASE .. + 50). Below the
 * range the system picks the local ports of outgoing connections from, so that no connection
 * (the deployment's own, or this test's) takes one of them while it starts or after it stops.
 */
async function freeRange(size = 51): Promise<number> {
  const free = portFree;
  const ephemeral = Number((await fs.readFile('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').catch(() => '32768')).trim().split(/\s+/)[0]);
  const top = Math.max(12_000, (Number.isFinite(ephemeral) ? ephemeral : 32_768) - size);
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 10_000 + Math.floor(Math.random() * (top - 10_000));
    let ok = true;
    for (let p = base; p < base + size && ok; p++) ok = await free(p);
    if (ok) return base;
  }
  throw new Error('no 51 free ports in a row');
}

let stateDir: string | undefined;
let env: NodeJS.ProcessEnv = {};
async function ha(...args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)('bash', [HA, ...args], { cwd: ROOT, env, maxBuffer: 10_000_000 });
  return stdout.trim();
}

type Member = { name: string; role: string; state: string; port: number };
async function members(): Promise<Member[]> {
  return (await ha('status')).split('\n').filter(Boolean).map((line) => {
    // A state may hold spaces ("creating replica"): the port is the last word.
    const words = line.split(' ');
    return { name: words[0]!, role: words[1]!, state: words.slice(2, -1).join(' '), port: Number(words.at(-1)) };
  });
}

/**
 * The leader's own view of its standbys (pg_stat_replication): "name state sync_state" for
 * each, sorted; empty when it does not answer. Patroni names the synchronous standby from
 * this view, among the standbys that stream.
 */
async function standbysOf(leader: Member): Promise<string[]> {
  const client = new pg.Client({ host: '127.0.0.1', port: leader.port, user: 'postgres', database: 'postgres', connectionTimeoutMillis: 1_000, query_timeout: 1_000 });
  try {
    await client.connect();
    const { rows } = await client.query<{ line: string }>(
      "select concat_ws(' ', application_name, state, sync_state) as line from pg_stat_replication order by 1",
    );
    return rows.map((r) => r.line);
  } catch {
    return [];
  } finally {
    await client.end().catch(() => undefined);
  }
}

let receiver: Receiver | undefined;
let running: Load | undefined;
let parentDir: string | undefined;

/** Set once the kill test passed: otherwise Patroni's last lines and the cluster are printed before the logs go. */
let passed = false;

/** The instances' errors (LOG_LEVEL=warn keeps them), printed before their logs go with the state. */
async function printInstanceErrors(): Promise<void> {
  if (!passed && stateDir) {
    console.error(`the cluster as Patroni saw it last:\n${await ha('status').catch((error: unknown) => String(error))}`);
    for (const node of ['node1', 'node2', 'node3']) {
      const log = await fs.readFile(path.join(stateDir, 'logs', `patroni-${node}.log`), 'utf8').catch(() => '');
      console.error(`patroni-${node}.log, its last lines:\n${log.split('\n').filter((l) => !l.startsWith('  ')).slice(-25).join('\n')}`);
    }
  }
  for (const name of ['instance1', 'instance2']) {
    const log = stateDir ? await fs.readFile(path.join(stateDir, 'logs', `${name}.log`), 'utf8').catch(() => '') : '';
    const errors = log.split('\n').filter((line) => line.includes('"level":50'));
    if (errors.length > 0) console.error(`${name} logged ${errors.length} errors, the first:\n${errors.slice(0, 3).join('\n')}`);
  }
}

/**
 * The tier runs beside the end of the rest of the suite (vitest.config.ts), which keeps both
 * cores busy. Its windows are those of the deployment, not of a machine it shares: this
 * process, and so everything it starts from now on (ha/ha.sh, Patroni, etcd, PostgreSQL,
 * PgBouncer, HAProxy, the instances) and its clients, run at a higher scheduling priority
 * (nice -10: about nine times the CPU share of the suite's processes when both want it), as
 * a machine given to the deployment would serve them. Raising it needs root, which the tier
 * needs anyway; without, it stays as it was. Linux sets it per thread: this thread's
 * children inherit it.
 */
const PRIORITY = -10;
const priorityBefore = os.getPriority();
beforeAll(() => {
  if (skip) return;
  try {
    os.setPriority(PRIORITY);
  } catch {
    // Not root: the default priority.
  }
});

afterAll(async () => {
  // The clients of a test that failed before it stopped them would go on asking.
  running?.halt();
  // What the last test did not take down (it failed, or did not run).
  if (stateDir) {
    await printInstanceErrors();
    await ha('down').catch((error: unknown) => console.error(`ha/ha.sh down: ${String(error)}`));
  }
  if (parentDir) await fs.rm(parentDir, { recursive: true, force: true });
  await receiver?.close();
  if (os.getPriority() !== priorityBefore) os.setPriority(priorityBefore);
}, 120_000);

describe.skipIf(skip)('the high-availability deployment, its primary killed under load', () => {
  it('loses no acknowledged write and no event, never answers 500, and writes again within the window', async () => {
    const parent = (parentDir = await fs.mkdtemp(path.join(os.tmpdir(), 'planning-failover-')));
    // The `postgres` user walks through it to the state folder.
    await fs.chmod(parent, 0o755);
    stateDir = path.join(parent, 'ha');
    const base = await freeRange();
    env = {
      ...process.env,
      PATH: `${path.join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
      HA_STATE_DIR: stateDir,
      HA_PORT_BASE: String(base),
      // The instances' environment: the load is above the rate limits, which are not under test.
      RATE_LIMIT_PER_MINUTE: '0',
      RATE_LIMIT_AUTH_PER_MINUTE: '0',
      WEBHOOK_ALLOW_PRIVATE_URLS: '1',
      WEBHOOK_RETRY_SCHEDULE: '1,1,1,1,1,1,1,1,1,1,1,1',
      // A delivery the failover cut off goes on once the database answers (its lease given back);
      // one cut off otherwise, once its lease expires: 2 x this + 10 s.
      WEBHOOK_TIMEOUT_MS: '2000',
      LOG_LEVEL: 'warn',
      // The service as the run built it once (test/helpers/global-setup.ts), not compiled again by tsx.
      HA_SERVICE_ENTRY: inject('serviceEntry'),
    };
    const t0 = performance.now();
    const url = (await ha('up')).split('\n').at(-1)!;
    expect(url).toBe(`http://127.0.0.1:${base + 50}`);
    const upMs = performance.now() - t0;

    const hooked = await startReceiver();
    receiver = hooked;
    const hookPath = (u: number) => `${new URL(hooked.url).pathname.replace(/\/$/, '')}/u${u}`;
    const tokens = await Promise.all(Array.from({ length: 3 }, (_, u) => register(url, `failover_${u}`)));
    for (const [u, token] of tokens.entries()) {
      // A path of its own per user: each user's deliveries are told apart by it.
      const res = await send(url, 'POST', '/api/users/me/webhooks', { token, body: { webhook: { url: new URL(hookPath(u), receiver.url).href } } });
      expect(res.status, res.text).toBe(201);
    }
    const answers: Array<{ status: number; sentAt: number; answeredAt: number }> = [];
    const load = startLoad({
      tokens,
      writeUrl: () => url,
      streamUrl: () => url,
      streamsPerUser: 1,
      prefix: 'failover',
      patienceMs: 60_000,
      readBack: true,
      onAnswer: (status, sentAt, answeredAt) => answers.push({ status, sentAt, answeredAt }),
    });
    running = load;
    const loadStart = performance.now();

    /**
     * The 503 window: from `killedAt` to the answer of the first write acknowledged after the
     * first 503 that followed it (a write may still be acknowledged a moment after a kill, by
     * backends that have not yet seen their postmaster die, or by a primary whose Patroni died);
     * 0 when no write was refused.
     */
    const windowAfter = async (killedAt: number, what: string): Promise<number> => {
      let first: number | undefined;
      await eventually(
        () => {
          const refused = answers.find((a) => a.status === 503 && a.sentAt >= killedAt);
          const from = refused?.sentAt ?? killedAt;
          first = answers.find((a) => a.status === 201 && a.sentAt >= from)?.answeredAt;
          return first !== undefined && (refused !== undefined || performance.now() - killedAt > 20_000);
        },
        { timeout: 60_000, interval: 50, message: `a write refused, then one acknowledged, after ${what}` },
      );
      return answers.some((a) => a.status === 503 && a.sentAt >= killedAt) ? first! - killedAt : 0;
    };
    /** API-CONTRACT.md §17: a 503 comes fast, under 1 s; reported per round, failing past twice that. */
    const slowest: number[] = [];
    const slowest503After = (from: number, to: number) => {
      const ms = Math.max(0, ...answers.filter((a) => a.status === 503 && a.sentAt >= from && a.sentAt < to).map((a) => a.answeredAt - a.sentAt));
      slowest.push(ms);
      return `${ms.toFixed(0)} ms${ms < 1_000 ? '' : ' (over the 1 s target)'}`;
    };
    const report: string[] = [];
    /**
     * The cluster whole and settled before the next fault: a leader, a synchronous standby, all
     * three running, both standbys streaming from the leader with the synchronous one the
     * leader's own (pg_stat_replication), and no change for 1.5 s (more than one of Patroni's
     * loops). A primary that dies while its Patroni moves the synchronous standby to another
     * node leaves no node that may be promoted (Patroni first names none in /sync): a second
     * fault within one, which docs/operations.md describes; the rounds test single faults.
     * Patroni moves it when the one it names stops streaming, as a node that rejoins does for
     * a moment (it restarts its postgres after a rewind), so Patroni's roles alone were not
     * enough: once, the primary was killed 1.5 s into such a move.
     */
    const settled = async (what: string) => {
      let last = '';
      let since = performance.now();
      const started = performance.now();
      await eventually(
        async () => {
          const now = await members().catch(() => []);
          const leader = now.find((m) => m.role === 'leader');
          const sync = now.find((m) => m.role === 'sync_standby');
          const standbys = leader ? await standbysOf(leader) : [];
          const shape = [...now.map((m) => `${m.name} ${m.role}`).sort(), ...standbys].join(', ');
          const streaming = now.filter((m) => m !== leader).map((m) => `${m.name} streaming ${m === sync ? 'sync' : 'async'}`).sort();
          const whole = now.length === 3 && now.every((m) => m.state === 'running' || m.state === 'streaming') &&
            leader !== undefined && sync !== undefined && standbys.join(', ') === streaming.join(', ');
          if (!whole || shape !== last) {
            last = shape;
            since = performance.now();
            return false;
          }
          return performance.now() - since >= 1_500;
        },
        { timeout: 60_000, interval: 250, message: `the cluster settled ${what} (a leader, a synchronous standby, three nodes running, both standbys streaming, unchanged for 1.5 s)` },
      );
      report.push(`settled ${what} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    };

    await load.afterMore(5, 'before the first kill');

    // 1. The primary's postgres.
    let killedAt = performance.now();
    const first = await ha('kill-primary');
    const window1 = await windowAfter(killedAt, `killing ${first}'s postgres`);
    report.push(`postgres of ${first} killed: 503 window ${(window1 / 1000).toFixed(1)} s (${met(window1)}), slowest 503 ${slowest503After(killedAt, killedAt + window1)}`);
    // Round 2 needs a synchronous standby to promote; the node killed may still be rejoining.
    await settled('after the first round');
    await load.afterMore(5, 'after the first round');

    // 2. The primary's Patroni: its postgres runs on, alone; the synchronous standby is promoted.
    const primary2 = (await members()).find((m) => m.role === 'leader')!.name;
    killedAt = performance.now();
    await ha('kill-patroni', primary2);
    // Its Patroni starts again once another node leads (it then demotes and rewinds its postgres
    // to follow), while the writes wait for the new primary's synchronous standby.
    let leader2: string | undefined;
    const rejoined = eventually(async () => (leader2 = (await members()).find((m) => m.role === 'leader' && m.name !== primary2)?.name), {
      timeout: 60_000,
      interval: 250,
      message: `a new leader after killing ${primary2}'s Patroni`,
    }).then(() => ha('start-node', primary2));
    rejoined.catch(() => undefined); // awaited below
    const window2 = await windowAfter(killedAt, `killing ${primary2}'s Patroni`);
    await rejoined;
    report.push(`Patroni of ${primary2} killed: 503 window ${(window2 / 1000).toFixed(1)} s (${met(window2)}; new primary ${leader2}), slowest 503 ${slowest503After(killedAt, killedAt + window2)}`);
    await settled('after the second round');
    await load.afterMore(5, 'after the second round');

    // 3. The primary and its synchronous standby together: the node left may not be promoted.
    const cluster3 = await members();
    const primary3 = cluster3.find((m) => m.role === 'leader')!.name;
    const sync3 = cluster3.find((m) => m.role === 'sync_standby')!.name;
    const left = cluster3.find((m) => m.name !== primary3 && m.name !== sync3)!.name;
    killedAt = performance.now();
    await Promise.all([ha('kill-node', primary3), ha('kill-node', sync3)]);
    // Writes sent before both nodes are killed may be acknowledged: the kills run as processes of
    // their own, which on a busy machine may take over a second (in one CI run, two writes sent
    // 1.0 s after the kills were started were acknowledged).
    const killedBoth = performance.now();
    // Past the leader key's ttl (6 s) and Patroni's next loops: no write is acknowledged, the node left is no leader.
    const hold = killedAt + 9_000;
    while (performance.now() < hold) {
      const now = await members().catch(() => []);
      expect(now.filter((m) => m.role === 'leader' && m.name === left), `${left} lacks acknowledged writes and was promoted`).toEqual([]);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    expect(answers.filter((a) => a.status === 201 && a.sentAt >= Math.max(killedAt + 1_000, killedBoth) && a.answeredAt < hold)).toEqual([]);
    const refusedWhileDown = answers.filter((a) => a.status === 503 && a.sentAt >= killedAt && a.sentAt < hold).length;
    expect(refusedWhileDown).toBeGreaterThan(0);
    const returnedAt = performance.now();
    await Promise.all([ha('start-node', primary3), ha('start-node', sync3)]);
    const window3 = await windowAfter(returnedAt, `starting ${primary3} and ${sync3} again`);
    report.push(
      `${primary3} and ${sync3} killed together: ${left} not promoted, ${refusedWhileDown} writes refused 503 for ${((hold - killedAt) / 1000).toFixed(0)} s; ` +
        `writes again ${(window3 / 1000).toFixed(1)} s after they were started (${met(window3)}), slowest 503 ${slowest503After(killedAt, returnedAt + window3)}`,
    );
    await load.afterMore(5, 'after the third round');
    await load.stopWriting();
    const loadMs = performance.now() - loadStart;

    // Every acknowledged write there once, replays of cut-off keys, streams whole and in order;
    // meanwhile, every route of both doors through the deployment's URL, after its three failovers.
    // The walk expects each answer's status: it starts once the cluster has settled again.
    let walkStart = 0;
    const walking = settled('after the third round')
      .then(() => {
        walkStart = performance.now();
        return walkEveryRoute(url, 'ha_walk', hooked);
      })
      .then((walked) => ({ walked, walkMs: performance.now() - walkStart }));
    walking.catch(() => undefined); // awaited below; not unhandled should the check before it fail first
    const logs = await expectNothingLost(load, { directUrl: `postgresql://postgres@127.0.0.1:${base + 30}/planning`, url, tokens });
    // The read-back ran, and found what it read (its refusals and anything else were checked above).
    expect(load.reads.found).toBeGreaterThan(0);
    const { walked, walkMs } = await walking;
    // Every event at the webhook, in order: its first arrival of each event follows the log.
    const byUser = await Promise.all(tokens.map((token) => changeLog(url, token)));
    const delivered = () => byUser.every((log, u) => log.every((e) => receiver!.accepted.some((r) => r.path === hookPath(u) && r.json.id === e.id)));
    await eventually(delivered, { timeout: 60_000, message: 'every event delivered to the webhook' }).catch(() => undefined);
    const hooks = await Promise.all(tokens.map(async (token) => JSON.parse((await send(url, 'GET', '/api/users/me/webhooks', { token })).text).data));
    let missed = 0;
    let outOfOrder = 0;
    let duplicates = 0;
    for (const [u, log] of byUser.entries()) {
      const arrivals = receiver.accepted.filter((r) => r.path === hookPath(u)).map((r) => r.json.id);
      const firsts = arrivals.filter((id, i) => arrivals.indexOf(id) === i);
      duplicates += arrivals.length - firsts.length;
      missed += log.filter((e) => !firsts.includes(e.id)).length;
      outOfOrder += firsts.filter((id, i) => i > 0 && log.findIndex((e) => e.id === id) < log.findIndex((e) => e.id === firsts[i - 1])).length;
    }
    const fiveHundreds = answers.filter((a) => a.status >= 500 && a.status !== 503).length;
    report.unshift(
      `writes acknowledged ${load.acknowledged.size}, found ${load.acknowledged.size} (each once), 500s ${fiveHundreds}, ` +
        `events ${logs.flat().length}: streams missed 0, out of order 0; webhook missed ${missed}, out of order ${outOfOrder}, delivered again ${duplicates}`,
      `up in ${(upMs / 1000).toFixed(0)} s; every route of both doors walked through its URL after the failovers in ${(walkMs / 1000).toFixed(1)} s (${walked.rest.length} REST operations, ${walked.trpc.length} tRPC procedures)`,
      describeLoad(load, loadMs),
    );
    if (missed > 0) report.push(`webhooks: ${JSON.stringify(hooks)}; events per user ${byUser.map((l) => l.length)}, delivered ${byUser.map((_, u) => receiver!.accepted.filter((r) => r.path === hookPath(u)).length)}`);
    console.info(`failover report:\n  ${report.join('\n  ')}`);

    expect(fiveHundreds).toBe(0);
    expect(missed).toBe(0);
    expect(outOfOrder).toBe(0);
    expect(window1).toBeLessThan(LIMIT_WINDOW_MS);
    expect(window2).toBeLessThan(LIMIT_WINDOW_MS);
    expect(window3).toBeLessThan(LIMIT_WINDOW_MS);
    for (const ms of slowest) expect(ms).toBeLessThan(2_000);
    passed = true;
  }, 400_000);

  it('ha/ha.sh down leaves no process and no port of the deployment behind', async () => {
    expect(stateDir, 'the deployment was started by the test before').toBeDefined();
    const base = Number(env.HA_PORT_BASE);
    await printInstanceErrors();
    const started = performance.now();
    await ha('down');
    const downMs = performance.now() - started;
    const state = stateDir!;
    stateDir = undefined;
    const { stdout } = await promisify(execFile)('ps', ['-eo', 'pid=,args=']);
    expect(stdout.split('\n').filter((line) => line.includes(state)), 'processes still naming the state folder').toEqual([]);
    const busy: number[] = [];
    for (let port = base; port <= base + 50; port++) if (!(await portFree(port))) busy.push(port);
    expect(busy, 'ports of the deployment still taken').toEqual([]);
    expect(existsSync(state)).toBe(false);
    console.info(`ha/ha.sh down: ${(downMs / 1000).toFixed(1)} s, no process or port left`);
  }, 120_000);
});
