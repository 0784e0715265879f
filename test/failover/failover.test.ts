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
 * webhook, in order, none skipped. The report is printed.
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
import { afterAll, describe, expect, inject, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { changeLog, describeLoad, expectNothingLost, register, send, startLoad } from '../helpers/retrying-clients.js';
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

/** 51 loopback ports in a row, free now: the deployment's (HA_PORT_BASE .. + 50). */
async function freeRange(size = 51): Promise<number> {
  const free = (port: number) =>
    new Promise<boolean>((resolve) => {
      const server = net.createServer();
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
    });
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 30_000);
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

type Member = { name: string; role: string; state: string };
async function members(): Promise<Member[]> {
  return (await ha('status')).split('\n').filter(Boolean).map((line) => {
    const [name, role, state] = line.split(' ');
    return { name: name!, role: role!, state: state! };
  });
}

let receiver: Receiver | undefined;
afterAll(async () => {
  // The instances' errors (LOG_LEVEL=warn keeps them), before their logs go with the state.
  for (const name of ['instance1', 'instance2']) {
    const log = stateDir ? await fs.readFile(path.join(stateDir, 'logs', `${name}.log`), 'utf8').catch(() => '') : '';
    const errors = log.split('\n').filter((line) => line.includes('"level":50'));
    if (errors.length > 0) console.error(`${name} logged ${errors.length} errors, the first:\n${errors.slice(0, 3).join('\n')}`);
  }
  if (stateDir) await ha('down').catch((error: unknown) => console.error(`ha/ha.sh down: ${String(error)}`));
  if (stateDir) await fs.rm(path.dirname(stateDir), { recursive: true, force: true });
  await receiver?.close();
}, 120_000);

describe.skipIf(skip)('the high-availability deployment, its primary killed under load', () => {
  it('loses no acknowledged write and no event, never answers 500, and writes again within the window', async () => {
    const parent = await fs.mkdtemp(path.join(os.tmpdir(), 'planning-failover-'));
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
      // A delivery cut off by a failover goes on once its lease expires: 2 x this + 10 s.
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
      onAnswer: (status, sentAt, answeredAt) => answers.push({ status, sentAt, answeredAt }),
    });
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
    const slowest503After = (from: number, to: number) =>
      Math.max(0, ...answers.filter((a) => a.status === 503 && a.sentAt >= from && a.sentAt < to).map((a) => a.answeredAt - a.sentAt));
    const allRunning = () => eventually(async () => (await members()).filter((m) => m.state === 'running' || m.state === 'streaming').length === 3, { timeout: 60_000, interval: 500, message: 'every node running again' });

    const report: string[] = [];
    await load.afterMore(10, 'before the first kill');

    // 1. The primary's postgres.
    let killedAt = performance.now();
    const first = await ha('kill-primary');
    const window1 = await windowAfter(killedAt, `killing ${first}'s postgres`);
    report.push(`postgres of ${first} killed: 503 window ${(window1 / 1000).toFixed(1)} s (${met(window1)}), slowest 503 ${slowest503After(killedAt, killedAt + window1).toFixed(0)} ms`);
    // Round 2 needs a synchronous standby to promote; the node killed may still be rejoining.
    await eventually(async () => (await members()).some((m) => m.role === 'sync_standby'), { timeout: 60_000, interval: 500, message: 'a synchronous standby again' });
    await load.afterMore(5, 'after the first round');

    // 2. The primary's Patroni: its postgres runs on, alone; the synchronous standby is promoted.
    const primary2 = (await members()).find((m) => m.role === 'leader')!.name;
    killedAt = performance.now();
    await ha('kill-patroni', primary2);
    const window2 = await windowAfter(killedAt, `killing ${primary2}'s Patroni`);
    const leader2 = (await members()).find((m) => m.role === 'leader')?.name;
    report.push(`Patroni of ${primary2} killed: 503 window ${(window2 / 1000).toFixed(1)} s (${met(window2)}; new primary ${leader2}), slowest 503 ${slowest503After(killedAt, killedAt + window2).toFixed(0)} ms`);
    await ha('start-node', primary2);
    await allRunning();
    await load.afterMore(5, 'after the second round');

    // 3. The primary and its synchronous standby together: the node left may not be promoted.
    const cluster3 = await members();
    const primary3 = cluster3.find((m) => m.role === 'leader')!.name;
    const sync3 = cluster3.find((m) => m.role === 'sync_standby')!.name;
    const left = cluster3.find((m) => m.name !== primary3 && m.name !== sync3)!.name;
    killedAt = performance.now();
    await Promise.all([ha('kill-node', primary3), ha('kill-node', sync3)]);
    // Past the leader key's ttl (8 s) and Patroni's next loops: no write is acknowledged, the node left is no leader.
    const hold = killedAt + 11_000;
    while (performance.now() < hold) {
      const now = await members().catch(() => []);
      expect(now.filter((m) => m.role === 'leader' && m.name === left), `${left} lacks acknowledged writes and was promoted`).toEqual([]);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    expect(answers.filter((a) => a.status === 201 && a.sentAt >= killedAt + 1_000 && a.answeredAt < hold)).toEqual([]);
    const refusedWhileDown = answers.filter((a) => a.status === 503 && a.sentAt >= killedAt && a.sentAt < hold).length;
    expect(refusedWhileDown).toBeGreaterThan(0);
    const returnedAt = performance.now();
    await Promise.all([ha('start-node', primary3), ha('start-node', sync3)]);
    const window3 = await windowAfter(returnedAt, `starting ${primary3} and ${sync3} again`);
    report.push(
      `${primary3} and ${sync3} killed together: ${left} not promoted, ${refusedWhileDown} writes refused 503 for ${((hold - killedAt) / 1000).toFixed(0)} s; ` +
        `writes again ${(window3 / 1000).toFixed(1)} s after they were started (${met(window3)}), slowest 503 ${slowest503After(killedAt, returnedAt + window3).toFixed(0)} ms`,
    );
    await load.afterMore(5, 'after the third round');
    await load.stopWriting();
    const loadMs = performance.now() - loadStart;

    // Every acknowledged write there once, replays of cut-off keys, streams whole and in order.
    const logs = await expectNothingLost(load, { directUrl: `postgresql://postgres@127.0.0.1:${base + 30}/planning`, url, tokens });
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
      `up in ${(upMs / 1000).toFixed(0)} s; ${describeLoad(load, loadMs)}`,
    );
    if (missed > 0) report.push(`webhooks: ${JSON.stringify(hooks)}; events per user ${byUser.map((l) => l.length)}, delivered ${byUser.map((_, u) => receiver!.accepted.filter((r) => r.path === hookPath(u)).length)}`);
    console.info(`failover report:\n  ${report.join('\n  ')}`);

    expect(fiveHundreds).toBe(0);
    expect(missed).toBe(0);
    expect(outOfOrder).toBe(0);
    expect(window1).toBeLessThan(LIMIT_WINDOW_MS);
    expect(window2).toBeLessThan(LIMIT_WINDOW_MS);
    expect(window3).toBeLessThan(LIMIT_WINDOW_MS);
  }, 400_000);
});
