/**
 * Webhook delivery (API-CONTRACT.md §14): `npm run bench:webhooks` (not part of `npm run bench`,
 * nor of `npm test`). Method and latest figures in bench/README.md ("Webhooks"); each run's
 * report goes to bench/results/webhooks-<UTC start>.md.
 *
 *  1. An embedded PostgreSQL with pg_stat_statements, database `bench` migrated by this
 *     checkout, users seeded in bulk SQL (below). `npm run build`; the built service as a
 *     child (`npm start`'s flags, production, warn logs, rate limits off) with
 *     WEBHOOK_ALLOW_PRIVATE_URLS=1, connecting as its own role; a receiver as another child
 *     (bench/lib/receiver.ts: node:http on the loopback, 204 at once, arrival times and
 *     webhook-ids). With WEBHOOKS_BASE (default c96f62f, the commit before webhooks; `none`
 *     skips it), that commit too, exported with `git archive`, built, and run as a third child
 *     on a database of its own (migrated by its code), seeded alike.
 *  2. Latency, on the idle service: one user with one webhook (every event); WEBHOOKS_LATENCY
 *     task creations one at a time (after 20 unrecorded), WEBHOOKS_PAUSE_MS apart; each one's
 *     event timed at the receiver from the commit of the write's transaction
 *     (track_commit_timestamp, pg_xact_commit_timestamp of the event row's xmin, against the
 *     arrival on the system clock), from the write's answer (its body read: commit → arrival
 *     less the answer's way back) and from the write's request (an upper bound).
 *     At the end of the run (6.), the same through docs/operations.md's deployment (PostgreSQL 15,
 *     PgBouncer, three built instances, HAProxy; WEBHOOKS_DEPLOYMENT=0 skips it), the writes
 *     sent to HAProxy.
 *  3. Throughput: a backlog of WEBHOOKS_BACKLOG task creations for one user whose one webhook
 *     is disabled, and of WEBHOOKS_PARALLEL_BACKLOG for each of WEBHOOKS_PARALLEL users (one
 *     webhook each); then,
 *     in turns (WEBHOOKS_BACKLOG_ROUNDS), `PATCH {"webhook":{"state":"enabled"}}` and the time
 *     until the receiver has every event (distinct webhook-ids): deliveries per second. Before
 *     each turn the webhooks are disabled and replayed from before the backlog.
 *  4. Write cost: task creations by 50 users, 32 in flight (connection c's k-th request for
 *     user (c + k) mod 50), for users with 0 webhooks and for 50 other users with 10 webhooks
 *     each (all enabled, every event, the fast receiver), and on the service before webhooks,
 *     in turns (WEBHOOKS_ROUNDS, rotating which goes first), WEBHOOKS_SLICE_SECONDS each after
 *     WEBHOOKS_WARMUP_SECONDS unrecorded; after each slice of the 10-webhook users the bench
 *     waits until every webhook has delivered everything (the drain) before the next slice.
 *     Writes/s, the service's CPU per write (during the slice, and with the drain), the
 *     database's and the receiver's CPU per write, statements per write (the deliverer's
 *     claims and records apart), by pg_stat_statements of the role.
 *  5. With WEBHOOKS_PROFILE (1), the service again alone with `--cpu-prof` under the 10-webhook
 *     load and its drain: self time by package and frame, per write and per delivery.
 *  6. Then the deployment's latency (2), with the machine to itself.
 *
 * Env: WEBHOOKS_LATENCY (200), WEBHOOKS_PAUSE_MS (100), WEBHOOKS_DEPLOYMENT (1),
 *      WEBHOOKS_BACKLOG (2000), WEBHOOKS_PARALLEL (10), WEBHOOKS_PARALLEL_BACKLOG (1000),
 *      WEBHOOKS_BACKLOG_ROUNDS (3), WEBHOOKS_ROUNDS (6), WEBHOOKS_SLICE_SECONDS (4), WEBHOOKS_WARMUP_SECONDS (1),
 *      WEBHOOKS_BASE (c96f62f; `none`), WEBHOOKS_PROFILE (1), BENCH_CONNECTIONS (32), BENCH_QUIET_WAIT (120),
 *      BENCH_OUT (also write the Markdown report there).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { aggregate, profileTables, readProfile } from '../lib/cpu-profile.js';
import { createRoles, openDatabase, startDatabase, STATEMENT_STATS, type BenchDatabase } from '../lib/database.js';
import { deploymentMissing, startDocumentedDeployment } from '../lib/deployment.js';
import { f0, f1, log, num, ROOT, sleep, utcMinute } from '../lib/env.js';
import { request } from '../lib/http.js';
import { mergeLoads, runLoad, type LoadResult, type Script } from '../lib/load.js';
import { quiesce, resetStatementStats, statementStats, type StatementStat } from '../lib/pg-stats.js';
import { benchCpu, cpuNs, machineCpu } from '../lib/proc.js';
import { buildService, builtServiceArgs, SERVICE_ENV, startBuiltService, startTarget, stopChild, type Target } from '../lib/processes.js';
import { quietWait } from '../lib/quiet.js';
import { startReceiver, type Arrival } from '../lib/receiver.js';
import { writeResult } from '../lib/report.js';
import { seedUser, type SeededUser } from '../lib/seed.js';
import { runScenario } from '../lib/session.js';
import { ascending, quantile } from '../lib/stats.js';
import { takeTurns } from '../lib/turns.js';

const LATENCY_WRITES = num('WEBHOOKS_LATENCY', 200);
const LATENCY_WARMUP = 20;
const PAUSE_MS = num('WEBHOOKS_PAUSE_MS', 100);
const DEPLOYMENT = num('WEBHOOKS_DEPLOYMENT', 1) !== 0;
const BACKLOG = num('WEBHOOKS_BACKLOG', 2000);
const PARALLEL = num('WEBHOOKS_PARALLEL', 10);
const PARALLEL_BACKLOG = num('WEBHOOKS_PARALLEL_BACKLOG', 1000);
const BACKLOG_ROUNDS = num('WEBHOOKS_BACKLOG_ROUNDS', 3);
const ROUNDS = num('WEBHOOKS_ROUNDS', 6);
const SLICE_SECONDS = num('WEBHOOKS_SLICE_SECONDS', 4);
const WARMUP_SECONDS = num('WEBHOOKS_WARMUP_SECONDS', 1);
const CONNECTIONS = num('BENCH_CONNECTIONS', 32);
const BASE = process.env.WEBHOOKS_BASE ?? 'c96f62f';
const WITH_BASE = BASE !== '' && BASE !== 'none';
const WRITERS = 50;
const HOOKS_PER_USER = 10;
/** Longest wait for a backlog or a drain. */
const DRAIN_TIMEOUT_MS = 300_000;
const ROLE = 'bench_service';
const PROFILE = num('WEBHOOKS_PROFILE', 1) !== 0;
/** PostgreSQL keeps each transaction's commit time: the latency's start. */
const COMMIT_TIMES = { track_commit_timestamp: 'on' };
const BASE_ROLE = 'bench_base';

const median = (xs: readonly number[]) => {
  const s = ascending(xs);
  if (s.length === 0) return NaN;
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const spread = (xs: readonly number[], digits = 0) => {
  const s = ascending(xs);
  if (s.length === 0) return '—';
  return `${median(s).toFixed(digits)} (${s[0]!.toFixed(digits)}–${s[s.length - 1]!.toFixed(digits)})`;
};
const ms = (ns: bigint) => Number(ns) / 1e6;
const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();

/** The deliverer's statements (src/webhooks/delivery.store.ts): the claim, and the record of an attempt. */
const isClaim = (s: StatementStat) => /for update of w skip locked/.test(s.query);
const isRecord = (s: StatementStat) => /insert into webhook_deliveries/.test(s.query);
const isTokenLookup = (s: StatementStat) => /from access_tokens t join users u/.test(s.query);

interface StatementSums {
  calls: number;
  requests: number;
  claims: number;
  records: number;
  ms: number;
  claimMs: number;
  recordMs: number;
}
function sums(stats: StatementStat[]): StatementSums {
  const sum = (f: (s: StatementStat) => boolean, v: (s: StatementStat) => number) => stats.filter(f).reduce((a, s) => a + v(s), 0);
  return {
    calls: sum(() => true, (s) => s.calls),
    requests: sum(isTokenLookup, (s) => s.calls),
    claims: sum(isClaim, (s) => s.calls),
    records: sum(isRecord, (s) => s.calls),
    ms: sum(() => true, (s) => s.totalMs),
    claimMs: sum(isClaim, (s) => s.totalMs),
    recordMs: sum(isRecord, (s) => s.totalMs),
  };
}

interface Hook {
  user: SeededUser;
  id: number;
  path: string;
}

/** One timed write of the latency part, ms to the event's arrival at the receiver. */
interface Timed {
  fromAnswer: number;
  fromRequest: number;
  fromCommit: number;
}

runScenario('webhooks', async (session) => {
  const { startedAt, loadBefore } = session;
  log(`data in ${session.dir}`);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64, timeout: 4_000 });
  session.defer(() => agent.destroy());

  // track_commit_timestamp: each event row's commit time (pg_xact_commit_timestamp(xmin)), to the microsecond.
  const db = await startDatabase(session, { settings: { max_connections: '200', ...STATEMENT_STATS, ...COMMIT_TIMES } });
  const main = await openDatabase(session, db, 'bench', { statementStats: true });
  const { admin } = main;
  await createRoles(main.q, WITH_BASE ? [ROLE, BASE_ROLE] : [ROLE]);
  const pgVersion = (await admin.query<{ v: string }>(`select current_setting('server_version') as v`)).rows[0]!.v;

  // ---- seed ---------------------------------------------------------------------------------
  const latencyUser = await seedUser(admin, 'wh_latency', 100, 1);
  const backlogUser = await seedUser(admin, 'wh_backlog', 100, 1);
  const parallelUsers: SeededUser[] = [];
  for (let i = 0; i < PARALLEL; i++) parallelUsers.push(await seedUser(admin, `wh_parallel_${i}`, 100, 1));
  const zeroUsers: SeededUser[] = [];
  const tenUsers: SeededUser[] = [];
  for (let i = 0; i < WRITERS; i++) zeroUsers.push(await seedUser(admin, `wh_zero_${i}`, 1_000, 10));
  for (let i = 0; i < WRITERS; i++) tenUsers.push(await seedUser(admin, `wh_ten_${i}`, 1_000, 10));
  await admin.query('vacuum analyze');

  // ---- build and start ----------------------------------------------------------------------
  const head = git('rev-parse', '--short', 'HEAD');
  const srcChanges = git('status', '--short', '--', 'src', 'package.json').split('\n').filter(Boolean);
  log(`building this checkout (HEAD ${head}${srcChanges.length ? `, ${srcChanges.length} uncommitted changes under src/` : ''})`);
  buildService();
  const receiver = await startReceiver(session);
  const service = await startBuiltService(session, { name: 'service', role: ROLE, roleUrl: main.roleUrl, env: { WEBHOOK_ALLOW_PRIVATE_URLS: '1' } });

  let baseService: Target | undefined;
  let baseDb: BenchDatabase | undefined;
  let baseUsers: SeededUser[] = [];
  if (WITH_BASE) {
    const baseDir = path.join(session.dir, 'base');
    await fs.mkdir(baseDir);
    execFileSync('sh', ['-c', `git archive ${BASE} | tar -x -C "${baseDir}"`], { cwd: ROOT });
    await fs.symlink(path.join(ROOT, 'node_modules'), path.join(baseDir, 'node_modules'));
    log(`building ${BASE} (before webhooks)`);
    buildService(baseDir);
    baseDb = await openDatabase(session, db, 'bench_base', { migrate: false, statementStats: true });
    // Its own code migrates its database on start.
    baseService = await startTarget(session, {
      name: 'before webhooks',
      cwd: baseDir,
      role: BASE_ROLE,
      args: builtServiceArgs(),
      env: { ...SERVICE_ENV, DATABASE_URL: baseDb.roleUrl(BASE_ROLE) },
    });
    for (let i = 0; i < WRITERS; i++) baseUsers.push(await seedUser(baseDb.admin, `wh_zero_${i}`, 1_000, 10));
    await baseDb.q('vacuum analyze');
  }

  const ourPids = [process.pid, db.pid!, service.pid, receiver.pid, ...(baseService ? [baseService.pid] : [])];
  const waitQuiet = quietWait(ourPids, num('BENCH_QUIET_WAIT', 120));

  // ---- helpers ------------------------------------------------------------------------------
  const call = async (base: string, method: string, pathname: string, token: string, body: unknown, expect: number) => {
    const res = await request(base, method, pathname, token, body, { agent });
    if (res.status !== expect) throw new Error(`${method} ${pathname} answered ${res.status} (expected ${expect}): ${res.text.slice(0, 300)}`);
    return res.text === '' ? undefined : (JSON.parse(res.text) as { data: { id: number } });
  };
  const createHook = async (base: string, user: { token: string }, hookPath: string) =>
    (await call(base, 'POST', '/api/users/me/webhooks', user.token, { webhook: { url: `${receiver.base}${hookPath}`, events: ['*'] } }, 201))!.data.id;
  const setState = (base: string, hook: Hook, state: 'enabled' | 'disabled') =>
    call(base, 'PATCH', `/api/webhooks/${hook.id}`, hook.user.token, { webhook: { state } }, 200);
  const lastSeq = async (client: pg.Client, userId: number) =>
    (await client.query<{ s: string }>('select last_event_seq::text as s from users where id = $1', [userId])).rows[0]!.s;
  /** Events behind the places of these users' enabled webhooks. */
  const waiting = async (userIds: number[]) =>
    Number((await admin.query<{ n: string }>(
      `select coalesce(sum(greatest(u.last_event_seq - w.cursor, 0)), 0)::text as n
         from webhooks w join users u on u.id = w.user_id where w.user_id = any($1::int[]) and w.state = 'enabled'`,
      [userIds],
    )).rows[0]!.n);
  const drain = async (userIds: number[]) => {
    const began = performance.now();
    while ((await waiting(userIds)) > 0) {
      if (performance.now() - began > DRAIN_TIMEOUT_MS) throw new Error(`webhooks of ${userIds.length} users still had events waiting after ${DRAIN_TIMEOUT_MS / 1000} s`);
      await sleep(50);
    }
    return performance.now() - began;
  };

  // ---- 2. latency -----------------------------------------------------------------------------
  /** Arrivals on /trace/ paths by `<path> <data.id>` (task.created events only). */
  const arrivals = new Map<string, Arrival>();
  const arrivalWaiters = new Map<string, () => void>();
  receiver.onArrival((arrival) => {
    if (arrival.type !== 'task.created') return;
    const key = `${arrival.path} ${String(arrival.dataId)}`;
    arrivals.set(key, arrival);
    arrivalWaiters.get(key)?.();
  });
  const arrivalOf = (key: string) =>
    arrivals.get(key) ??
    new Promise<Arrival | undefined>((resolve) => {
      const timer = setTimeout(() => {
        arrivalWaiters.delete(key);
        resolve(undefined);
      }, 10_000);
      arrivalWaiters.set(key, () => {
        clearTimeout(timer);
        arrivalWaiters.delete(key);
        resolve(arrivals.get(key));
      });
    });

  const latency = async (base: string, token: string, userId: number, hookPath: string, client: pg.Client) => {
    const timed: Array<{ fromAnswer: number; fromRequest: number; eventId: string; wall: number }> = [];
    let lost = 0;
    for (let i = 0; i < LATENCY_WARMUP + LATENCY_WRITES; i++) {
      const t0 = process.hrtime.bigint();
      const res = await request(base, 'POST', '/api/users/me/tasks', token, { task: { label: `latency ${i}` } }, { agent });
      const t1 = process.hrtime.bigint();
      if (res.status !== 201) throw new Error(`create answered ${res.status}: ${res.text.slice(0, 300)}`);
      const taskId = (JSON.parse(res.text) as { data: { id: number } }).data.id;
      const arrival = await arrivalOf(`${hookPath} ${taskId}`);
      if (!arrival) lost++;
      else if (i >= LATENCY_WARMUP) timed.push({ fromAnswer: ms(arrival.ns - t1), fromRequest: ms(arrival.ns - t0), eventId: arrival.id, wall: arrival.wall });
      await sleep(PAUSE_MS);
    }
    // The commit of the transaction that stored the event (the write's own).
    const { rows } = await client.query<{ seq: string; committed: number }>(
      `select seq::text as seq, extract(epoch from pg_xact_commit_timestamp(xmin))::float8 * 1000 as committed
         from events where user_id = $1 and seq = any($2::bigint[])`,
      [userId, timed.map((t) => t.eventId)],
    );
    const committedAt = new Map(rows.map((r) => [r.seq, Number(r.committed)]));
    const samples: Timed[] = timed.map((t) => ({ fromAnswer: t.fromAnswer, fromRequest: t.fromRequest, fromCommit: t.wall - (committedAt.get(t.eventId) ?? NaN) }));
    return { samples, lost };
  };

  const latencyHook: Hook = { user: latencyUser, id: 0, path: '/trace/latency' };
  latencyHook.id = await createHook(service.url, latencyUser, latencyHook.path);
  await waitQuiet();
  log('latency, one instance');
  const cpuL0 = machineCpu();
  const oursL0 = benchCpu(ourPids);
  const oneInstance = await latency(service.url, latencyUser.token, latencyUser.id, latencyHook.path, admin);
  const cpuL1 = machineCpu();
  const latencyOther = (Math.max(0, cpuL1.procs - cpuL0.procs - (benchCpu(ourPids) - oursL0)) / Math.max(1, cpuL1.total - cpuL0.total)) * 100;

  // ---- 3. throughput ------------------------------------------------------------------------
  log('throughput: writing the backlogs');
  const single: Hook = { user: backlogUser, id: 0, path: '/count/single/0' };
  single.id = await createHook(service.url, backlogUser, single.path);
  const parallel: Hook[] = [];
  for (const [i, user] of parallelUsers.entries()) {
    const hook: Hook = { user, id: 0, path: `/count/parallel/${i}` };
    hook.id = await createHook(service.url, user, hook.path);
    parallel.push(hook);
  }
  for (const hook of [single, ...parallel]) await setState(service.url, hook, 'disabled');
  const before = new Map<number, string>();
  for (const hook of [single, ...parallel]) before.set(hook.user.id, await lastSeq(admin, hook.user.id));
  const writeBacklog = async (users: SeededUser[], perUser: number) => {
    const script: Script = (c) => {
      let k = 0;
      return () => {
        const user = users[(c + k) % users.length]!;
        k++;
        return { method: 'POST', path: '/api/users/me/tasks', token: user.token, body: { task: { label: `backlog ${c}-${k}` } } };
      };
    };
    const load = await runLoad(service.url, script, { connections: CONNECTIONS, amount: perUser * users.length });
    if (load.non2xx > 0 || load.errors > 0) throw new Error(`backlog writes: ${load.non2xx} non-2xx, ${load.errors} errors; first: ${load.firstFailure}`);
    return load;
  };
  const singleWrites = await writeBacklog([backlogUser], BACKLOG);
  const parallelWrites = await writeBacklog(parallelUsers, PARALLEL_BACKLOG);
  const backlogOf = async (hooks: Hook[]) => {
    let n = 0;
    for (const hook of hooks) n += Number(await lastSeq(admin, hook.user.id)) - Number(before.get(hook.user.id));
    return n;
  };
  const singleBacklog = await backlogOf([single]);
  const parallelBacklog = await backlogOf(parallel);
  log(`  backlogs: ${singleBacklog} events (${f0(singleWrites.rps)} writes/s), ${parallelBacklog} over ${PARALLEL} users (${f0(parallelWrites.rps)} writes/s)`);

  interface BacklogRun {
    seconds: number;
    perSecond: number;
    duplicates: number;
    serviceCpuUs: number;
    pgCpuUs: number;
    receiverCpuUs: number;
    statementsPer: number;
    recordsPer: number;
    claimsPer: number;
    otherCpu: number;
  }
  const backlogWays = [
    { name: `1 webhook (1 user), ${singleBacklog} events`, hooks: [single], prefix: '/count/single/', events: singleBacklog },
    { name: `${PARALLEL} webhooks (${PARALLEL} users × 1), ${parallelBacklog} events`, hooks: parallel, prefix: '/count/parallel/', events: parallelBacklog },
  ];
  const backlogRuns = backlogWays.map(() => [] as BacklogRun[]);
  let quietRound = -1;
  await takeTurns(backlogWays, BACKLOG_ROUNDS, 'rotate', async (way, index, round) => {
    for (const hook of way.hooks) {
      await setState(service.url, hook, 'disabled');
      await call(service.url, 'POST', `/api/webhooks/${hook.id}/replay`, hook.user.token, { replay: { after: before.get(hook.user.id) } }, 202);
    }
    await receiver.reset(way.prefix);
    await quiesce(admin, ROLE);
    if (round !== quietRound) {
      quietRound = round;
      await waitQuiet();
    }
    await resetStatementStats(admin);
    const c0 = cpuNs(service.pid)!;
    const pg0 = benchCpu([db.pid!]);
    const rc0 = cpuNs(receiver.pid)!;
    const m0 = machineCpu();
    const o0 = benchCpu(ourPids);
    const t0 = process.hrtime.bigint();
    await Promise.all(way.hooks.map((hook) => setState(service.url, hook, 'enabled')));
    const began = performance.now();
    let stats = await receiver.stats(way.prefix);
    while (stats.unique < way.events) {
      if (performance.now() - began > DRAIN_TIMEOUT_MS) throw new Error(`${way.name}: ${stats.unique} of ${way.events} events after ${DRAIN_TIMEOUT_MS / 1000} s`);
      await sleep(20);
      stats = await receiver.stats(way.prefix);
    }
    const seconds = ms(stats.lastNewNs! - t0) / 1000;
    await drain(way.hooks.map((h) => h.user.id));
    await quiesce(admin, ROLE);
    const c1 = cpuNs(service.pid)!;
    const pg1 = benchCpu([db.pid!]);
    const rc1 = cpuNs(receiver.pid)!;
    const m1 = machineCpu();
    const o1 = benchCpu(ourPids);
    const s = sums(await statementStats(admin, ROLE));
    stats = await receiver.stats(way.prefix);
    const run: BacklogRun = {
      seconds,
      perSecond: way.events / seconds,
      duplicates: stats.requests - stats.unique,
      serviceCpuUs: (c1 - c0) / 1000 / way.events,
      pgCpuUs: ((pg1 - pg0) * 10_000) / way.events,
      receiverCpuUs: (rc1 - rc0) / 1000 / way.events,
      statementsPer: s.calls / way.events,
      recordsPer: s.records / way.events,
      claimsPer: s.claims / way.events,
      otherCpu: (Math.max(0, m1.procs - m0.procs - (o1 - o0)) / Math.max(1, m1.total - m0.total)) * 100,
    };
    backlogRuns[index]!.push(run);
    log(`  round ${round + 1} ${way.name.padEnd(44)} ${f1(seconds).padStart(6)} s  ${f0(run.perSecond).padStart(6)} deliveries/s  service ${f0(run.serviceCpuUs)} µs CPU/delivery  ${run.statementsPer.toFixed(2)} statements/delivery  duplicates ${run.duplicates}`);
  });
  // Left enabled and caught up: they see no more events.

  // ---- 4. write cost --------------------------------------------------------------------------
  log('write cost: creating the webhooks of the 10-webhook users');
  for (const [i, user] of tenUsers.entries()) {
    for (let k = 0; k < HOOKS_PER_USER; k++) await createHook(service.url, user, `/count/ten/${i}/${k}`);
  }
  const tenIds = tenUsers.map((u) => u.id);
  const writersScript = (users: SeededUser[], tag: string): Script => (c) => {
    let k = 0;
    return () => {
      const user = users[(c + k) % users.length]!;
      k++;
      return { method: 'POST', path: '/api/users/me/tasks', token: user.token, body: { task: { label: `${tag} ${c}-${k}` } } };
    };
  };
  interface CostTarget {
    name: string;
    target: Target;
    client: pg.Client;
    role: string;
    script: Script;
    hooks: boolean;
  }
  const targets: CostTarget[] = [
    { name: '0 webhooks per user', target: service, client: admin, role: ROLE, script: writersScript(zeroUsers, 'zero'), hooks: false },
    { name: `${HOOKS_PER_USER} webhooks per user`, target: service, client: admin, role: ROLE, script: writersScript(tenUsers, 'ten'), hooks: true },
    ...(baseService && baseDb
      ? [{ name: `before webhooks (${BASE})`, target: baseService, client: baseDb.admin, role: BASE_ROLE, script: writersScript(baseUsers, 'base'), hooks: false }]
      : []),
  ];
  interface CostSlice {
    load: LoadResult;
    /** Service CPU ns during the slice; and until the drain ended. */
    serviceNs: number;
    serviceDrainNs: number;
    pgJiffies: number;
    pgDrainJiffies: number;
    receiverNs: number;
    receiverSliceNs: number;
    slice: StatementSums;
    withDrain: StatementSums;
    /** Deliveries the receiver got during the slice, and the events the slice made for webhooks. */
    deliveredInSlice: number;
    drainMs: number;
    otherJiffies: number;
    totalJiffies: number;
  }
  const slices = targets.map(() => [] as CostSlice[]);
  /** The 10-webhook target's statements over all its slices and drains, by query id. */
  const tenRaw = new Map<string, StatementStat>();
  // Warm-up of each target (and its drain), unrecorded.
  for (const t of targets) {
    await runLoad(t.target.url, t.script, { connections: CONNECTIONS, seconds: 2 });
    if (t.hooks) await drain(tenIds);
  }
  quietRound = -1;
  await takeTurns(targets, ROUNDS, 'rotate', async (t, index, round) => {
    await quiesce(t.client, t.role);
    if (round !== quietRound) {
      quietRound = round;
      await waitQuiet();
    }
    if (WARMUP_SECONDS > 0) await runLoad(t.target.url, t.script, { connections: CONNECTIONS, seconds: WARMUP_SECONDS });
    if (t.hooks) await drain(tenIds);
    await sleep(300);
    await quiesce(t.client, t.role);
    await resetStatementStats(t.client);
    const r0 = await receiver.stats('/count/ten/');
    const s0 = cpuNs(t.target.pid)!;
    const p0 = benchCpu([db.pid!]);
    const rc0 = cpuNs(receiver.pid)!;
    const m0 = machineCpu();
    const o0 = benchCpu(ourPids);
    const load = await runLoad(t.target.url, t.script, { connections: CONNECTIONS, seconds: SLICE_SECONDS });
    const s1 = cpuNs(t.target.pid)!;
    const p1 = benchCpu([db.pid!]);
    const rc1 = cpuNs(receiver.pid)!;
    const m1 = machineCpu();
    const o1 = benchCpu(ourPids);
    const r1 = await receiver.stats('/count/ten/');
    const sliceStats = sums(await statementStats(t.client, t.role));
    const drainMs = t.hooks ? await drain(tenIds) : 0;
    await sleep(300);
    await quiesce(t.client, t.role);
    const s2 = cpuNs(t.target.pid)!;
    const p2 = benchCpu([db.pid!]);
    const rc2 = cpuNs(receiver.pid)!;
    const drained = await statementStats(t.client, t.role);
    const withDrain = sums(drained);
    if (t.hooks) {
      for (const x of drained) {
        const kept = tenRaw.get(x.queryid);
        if (kept) {
          kept.calls += x.calls;
          kept.totalMs += x.totalMs;
        } else tenRaw.set(x.queryid, { ...x });
      }
    }
    const slice: CostSlice = {
      load,
      serviceNs: s1 - s0,
      serviceDrainNs: s2 - s0,
      pgJiffies: p1 - p0,
      pgDrainJiffies: p2 - p0,
      receiverNs: rc2 - rc0,
      receiverSliceNs: rc1 - rc0,
      slice: sliceStats,
      withDrain,
      deliveredInSlice: r1.requests - r0.requests,
      drainMs,
      otherJiffies: Math.max(0, m1.procs - m0.procs - (o1 - o0)),
      totalJiffies: m1.total - m0.total,
    };
    slices[index]!.push(slice);
    const writes = Math.max(1, load.completed);
    log(
      `  round ${round + 1} ${t.name.padEnd(30)} ${f0(load.rps).padStart(5)} writes/s  p50 ${load.p50} ms  p99 ${load.p99} ms  non-2xx ${load.non2xx}  ` +
        `service ${f0(slice.serviceNs / 1000 / writes)} µs/write (${f0(slice.serviceDrainNs / 1000 / writes)} with the drain)  ` +
        `claims ${(sliceStats.claims / writes).toFixed(2)}/write  ${t.hooks ? `delivered in slice ${slice.deliveredInSlice} of ${writes * HOOKS_PER_USER}, drain ${f1(drainMs / 1000)} s` : ''}`,
    );
  });

  // ---- report -----------------------------------------------------------------------------------
  const pct = (values: number[], q: number) => quantile(ascending(values), q);
  const latencyRows = (name: string, r: { samples: Timed[]; lost: number }, note = '') => {
    const row = (what: string, xs: number[]) =>
      `| ${name} | ${what} | ${xs.length} | ${pct(xs, 0.5).toFixed(1)} | ${pct(xs, 0.9).toFixed(1)} | ${pct(xs, 0.99).toFixed(1)} | ${Math.max(...xs).toFixed(1)} | ${r.lost}${note} |`;
    return [
      row('**commit → arrival**', r.samples.map((s) => s.fromCommit)),
      row("write's answer → arrival", r.samples.map((s) => s.fromAnswer)),
      row("write's request → arrival", r.samples.map((s) => s.fromRequest)),
    ];
  };

  // The services measured above stop: the profiled one alone delivers, then the deployment has the machine.
  await stopChild(service.child);
  if (baseService) await stopChild(baseService.child);

  // ---- 5. a CPU profile of the 10-webhook load ------------------------------------------------
  let profileLines: string[] = [];
  if (PROFILE) {
    log('CPU profile: the 10-webhook users\' writes and their drain');
    const profDir = path.join(session.dir, 'profile');
    await fs.mkdir(profDir);
    const profiled = await startBuiltService(session, {
      name: 'profiled', role: ROLE, roleUrl: main.roleUrl, env: { WEBHOOK_ALLOW_PRIVATE_URLS: '1' }, nodeFlags: ['--cpu-prof', `--cpu-prof-dir=${profDir}`],
    });
    await runLoad(profiled.url, targets[1]!.script, { connections: CONNECTIONS, seconds: 2 });
    await drain(tenIds);
    await sleep(300);
    await quiesce(admin, ROLE);
    await resetStatementStats(admin);
    const r0 = await receiver.stats('/count/ten/');
    const c0 = cpuNs(profiled.pid)!;
    const from = Number(process.hrtime.bigint() / 1000n);
    const load = await runLoad(profiled.url, targets[1]!.script, { connections: CONNECTIONS, seconds: SLICE_SECONDS });
    const mid = Number(process.hrtime.bigint() / 1000n);
    const c1 = cpuNs(profiled.pid)!;
    const r1 = await receiver.stats('/count/ten/');
    const writeStats = sums(await statementStats(admin, ROLE));
    await drain(tenIds);
    const to = Number(process.hrtime.bigint() / 1000n);
    const c2 = cpuNs(profiled.pid)!;
    const r2 = await receiver.stats('/count/ten/');
    await sleep(300);
    const allStats = sums(await statementStats(admin, ROLE));
    await stopChild(profiled.child, 'SIGINT', 20_000);
    const profile = readProfile(profDir);
    const during = aggregate(profile, from, mid);
    const drained = aggregate(profile, mid, to);
    const inSlice = r1.requests - r0.requests;
    const inDrain = r2.requests - r1.requests;
    profileLines = [
      '#### Where the service\'s CPU goes with 10 webhooks per user',
      '',
      `The built service again, alone, with \`--cpu-prof\` (the same database and users): 2 s of the ${HOOKS_PER_USER}-webhook users' writes and their drain unrecorded, then ${SLICE_SECONDS} s of them ` +
        `(${load.completed} writes, ${f0(load.rps)}/s, ${inSlice} deliveries meanwhile) and the drain (${inDrain} deliveries in ${f1((to - mid) / 1e6)} s, ${f0(inDrain / ((to - mid) / 1e6))}/s). ` +
        `Service CPU (schedstat): ${f0((c1 - c0) / 1000 / Math.max(1, load.completed))} µs per write during the writes; ${f0((c2 - c1) / 1000 / Math.max(1, inDrain))} µs per delivery in the drain. ` +
        `Statements: ${(writeStats.calls / Math.max(1, load.completed)).toFixed(2)} per write during the writes (claims ${(writeStats.claims / Math.max(1, load.completed)).toFixed(2)}, records ${(writeStats.records / Math.max(1, load.completed)).toFixed(2)}); ` +
        `in the drain ${((allStats.calls - writeStats.calls) / Math.max(1, inDrain)).toFixed(2)} per delivery (claims ${((allStats.claims - writeStats.claims) / Math.max(1, inDrain)).toFixed(3)}, records ${((allStats.records - writeStats.records) / Math.max(1, inDrain)).toFixed(2)}), ` +
        `${((allStats.recordMs - writeStats.recordMs) / Math.max(1, inDrain)).toFixed(3)} ms of record and ${((allStats.claimMs - writeStats.claimMs) / Math.max(1, inDrain)).toFixed(3)} ms of claim statement time per delivery.`,
      '',
      `During the writes (${during.total.toFixed(0)} ms of samples, ${during.busy.toFixed(0)} ms busy), per write:`,
      '',
      ...profileTables(during, { top: 15, per: { count: load.completed, unit: 'write' } }),
      '',
      `During the drain, deliveries only (${drained.total.toFixed(0)} ms of samples, ${drained.busy.toFixed(0)} ms busy), per delivery:`,
      '',
      ...profileTables(drained, { top: 20, per: { count: inDrain, unit: 'delivery' } }),
      '',
    ];
  }

  // The deployment last, with the machine to itself.
  let deploymentRows: string[] = [];
  let deploymentNote = '';
  if (!DEPLOYMENT) deploymentNote = 'Through the deployment: not measured (WEBHOOKS_DEPLOYMENT=0).';
  else if (deploymentMissing().length > 0) deploymentNote = `Through the deployment: not measured, this machine lacks ${deploymentMissing().join(', ')}.`;
  else {
    try {
      log('latency through docs/operations.md\'s deployment (PostgreSQL 15, PgBouncer, HAProxy)');
      const d = await startDocumentedDeployment(session, { ...SERVICE_ENV, WEBHOOK_ALLOW_PRIVATE_URLS: '1' }, COMMIT_TIMES);
      const reg = await request(d.url, 'POST', '/api/users', '', { user: { username: 'wh_deployed', password: 'password1' } }, { agent });
      if (reg.status !== 201) throw new Error(`register through HAProxy: ${reg.status} ${reg.text.slice(0, 300)}`);
      const body = JSON.parse(reg.text) as { data: { id: number }; meta: { token: string } };
      const user = { token: body.meta.token };
      await createHook(d.url, user, '/trace/deployed');
      await waitQuiet();
      const deployed = await latency(d.url, user.token, body.data.id, '/trace/deployed', d.direct);
      deploymentRows = latencyRows(`deployment: HAProxy → ${d.instances.length} instances → PgBouncer`, deployed);
      deploymentNote =
        `Through the deployment: PostgreSQL 15 and PgBouncer (transaction mode, docs/operations.md's pgbouncer.ini), ${d.instances.length} built instances with docs/operations.md's environment ` +
        `(${Object.entries(d.env).filter(([k]) => !k.startsWith('DATABASE_URL') && !k.startsWith('DATABASE_DIRECT')).map(([k, v]) => `${k}=${v}`).join(' ')}; LISTEN direct to PostgreSQL), ` +
        `HAProxy with docs/operations.md's haproxy.cfg (${d.slots} server lines, one with no instance as in docs/operations.md); the writes and the webhook's creation through HAProxy, the receiver as above. ` +
        `Every instance's deliverer is woken by each write's NOTIFY and they race for the webhook's lease.`;
    } catch (error) {
      deploymentNote = `Through the deployment: not measured, it failed: ${String(error).slice(0, 500)}`;
      log(deploymentNote);
    }
  }

  const costRows = targets.map((t, i) => {
    const ss = slices[i]!;
    const merged = mergeLoads(ss.map((s) => s.load));
    const writes = ss.reduce((a, s) => a + s.load.completed, 0);
    const per = (f: (s: CostSlice) => number) => ss.reduce((a, s) => a + f(s), 0) / Math.max(1, writes);
    const other = (ss.reduce((a, s) => a + s.otherJiffies, 0) / Math.max(1, ss.reduce((a, s) => a + s.totalJiffies, 0))) * 100;
    return (
      `| ${t.name} | **${spread(ss.map((s) => s.load.rps))}** | ${merged.p50} / ${merged.p99} | ${merged.non2xx + merged.errors} | ` +
      `${f0(per((s) => s.serviceNs) / 1000)} / ${f0(per((s) => s.serviceDrainNs) / 1000)} | ` +
      `${f0(per((s) => s.pgJiffies) * 10_000)} / ${f0(per((s) => s.pgDrainJiffies) * 10_000)} | ${t.hooks ? `${f0(per((s) => s.receiverSliceNs) / 1000)} / ${f0(per((s) => s.receiverNs) / 1000)}` : '—'} | ` +
      `${per((s) => s.slice.calls).toFixed(2)} / ${per((s) => s.withDrain.calls).toFixed(2)} | ${per((s) => s.slice.claims).toFixed(2)} | ` +
      `${t.hooks ? `${per((s) => s.withDrain.records).toFixed(2)}` : '—'} | ` +
      `${t.hooks ? `${f0((100 * ss.reduce((a, s) => a + s.deliveredInSlice, 0)) / Math.max(1, writes * HOOKS_PER_USER))} % / ${spread(ss.map((s) => s.drainMs / 1000), 1)} / ${spread(ss.map((s) => (s.load.completed * HOOKS_PER_USER - s.deliveredInSlice) / (s.drainMs / 1000)))}` : '—'} | ${f0(other)} |`
    );
  });
  const rpsOf = (i: number) => slices[i]!.map((s) => s.load.rps);
  const ratio = (a: number, b: number) => rpsOf(a).map((x, round) => x / rpsOf(b)[round]!);
  const tenVsZero = ratio(1, 0);
  const ratioRows = [
    `| ${targets[1]!.name} ÷ ${targets[0]!.name} | **${spread(tenVsZero, 3)}** | ≥ 0.95: **${median(tenVsZero) >= 0.95 ? 'met' : `not met (${f1((1 - median(tenVsZero)) * 100)} % fewer writes/s)`}** |`,
    ...(targets[2] ? [`| ${targets[0]!.name} ÷ ${targets[2].name} | **${spread(ratio(0, 2), 3)}** | |`, `| ${targets[1]!.name} ÷ ${targets[2].name} | ${spread(ratio(1, 2), 3)} | |`] : []),
  ];
  const tenWrites = slices[1]!.reduce((a, s) => a + s.load.completed, 0);
  const statementRows = tenRaw.size > 0
    ? [...tenRaw.values()].sort((a, b) => b.totalMs - a.totalMs).slice(0, 8).map((s) => {
        const writes = Math.max(1, tenWrites);
        const kind = isClaim(s) ? 'deliverer: claim' : isRecord(s) ? 'deliverer: record an attempt' : isTokenLookup(s) ? 'token lookup' : /insert into tasks|next_task_order/.test(s.query) ? 'the create' : 'other';
        return `| ${kind} | ${(s.calls / writes).toFixed(2)} | ${(s.totalMs / Math.max(1, s.calls)).toFixed(3)} | ${(s.totalMs / writes).toFixed(3)} | \`${s.query.replace(/\s+/g, ' ').replace(/\|/g, '\\|').slice(0, 90)}…\` |`;
      })
    : [];

  const backlogRows = backlogWays.map((way, i) => {
    const runs = backlogRuns[i]!;
    const other = median(runs.map((r) => r.otherCpu));
    return (
      `| ${way.name} | **${spread(runs.map((r) => r.perSecond))}** | ${spread(runs.map((r) => r.seconds), 2)} | ` +
      `${f0(median(runs.map((r) => r.serviceCpuUs)))} / ${f0(median(runs.map((r) => r.pgCpuUs)))} / ${f0(median(runs.map((r) => r.receiverCpuUs)))} | ` +
      `${median(runs.map((r) => r.statementsPer)).toFixed(2)} (${median(runs.map((r) => r.recordsPer)).toFixed(2)} records, ${median(runs.map((r) => r.claimsPer)).toFixed(3)} claims) | ${runs.reduce((a, r) => a + r.duplicates, 0)} | ${f0(other)} |`
    );
  });
  const parallelRatio = backlogRuns[1]!.map((r, round) => r.perSecond / backlogRuns[0]![round]!.perSecond);

  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  const report = [
    `### Webhooks, ${utcMinute(startedAt)} UTC`,
    '',
    `Command: \`npm run bench:webhooks\` (WEBHOOKS_LATENCY=${LATENCY_WRITES}, WEBHOOKS_PAUSE_MS=${PAUSE_MS}, WEBHOOKS_BACKLOG=${BACKLOG}, WEBHOOKS_PARALLEL=${PARALLEL}, WEBHOOKS_PARALLEL_BACKLOG=${PARALLEL_BACKLOG}, ` +
      `WEBHOOKS_BACKLOG_ROUNDS=${BACKLOG_ROUNDS}, WEBHOOKS_ROUNDS=${ROUNDS}, WEBHOOKS_SLICE_SECONDS=${SLICE_SECONDS}, WEBHOOKS_WARMUP_SECONDS=${WARMUP_SECONDS}, ` +
      `BENCH_CONNECTIONS=${CONNECTIONS}, WEBHOOKS_BASE=${WITH_BASE ? BASE : 'none'}). ` +
      `Built from HEAD ${head}${srcChanges.length ? ` with uncommitted changes in the working tree (${srcChanges.map((l) => `\`${l.trim()}\``).join(', ')})` : ''}. ` +
      `Machine: ${os.availableParallelism()} CPUs (${cpu}), ${os.platform()} ${os.release()}; Node ${process.version}; PostgreSQL ${pgVersion} (embedded, fsync/synchronous_commit/full_page_writes off). ` +
      'PostgreSQL, the service, the receiver and the client share these CPUs.',
    '',
    '#### Commit → first attempt',
    '',
    `One user with one webhook (every event), ${LATENCY_WRITES} task creations one at a time (${LATENCY_WARMUP} unrecorded first), ${PAUSE_MS} ms apart, on an idle service; each event's arrival at the receiver (when its request's headers were parsed). ` +
      "**Commit → arrival**: PostgreSQL's commit time of the write's transaction (`track_commit_timestamp = on`, `pg_xact_commit_timestamp(xmin)` of the event's row, the system clock to the µs) to the arrival on the system clock (the receiver reads it to a few µs). " +
      "*From the write's answer* (its body read, the bench's monotonic clock, the same as the receiver's) is commit → arrival less the answer's way back to the client (negative when the delivery arrived first); *from the write's request* is an upper bound of it. " +
      "(The event's `at` cannot serve: the service stores it in whole seconds.) " +
      `Other processes used ${f0(latencyOther)} % of the machine during the one-instance run.`,
    '',
    '| setup | measured | events | p50 ms | p90 ms | p99 ms | max ms | not arrived within 10 s |',
    '|---|---|---:|---:|---:|---:|---:|---:|',
    ...latencyRows('one instance (embedded PostgreSQL)', oneInstance),
    ...deploymentRows,
    '',
    deploymentNote,
    '',
    '#### Deliveries per second',
    '',
    `A backlog: task creations (${CONNECTIONS} in flight) while the webhook is disabled, then \`PATCH {"webhook":{"state":"enabled"}}\`; the time from that request to the arrival of the last new event at the receiver. ` +
      `${BACKLOG_ROUNDS} rounds, the two setups in turns; before each, the webhooks disabled again and replayed from before the backlog (\`POST /api/webhooks/:id/replay\`). ` +
      "CPU (the service's schedstat, PostgreSQL's backends in clock ticks, the receiver's) and statements (pg_stat_statements of the service's role) per delivered event, until every place is recorded.",
    '',
    '| setup | deliveries/s, median (min–max) | seconds | CPU µs/delivery: service / PostgreSQL / receiver (medians) | SQL statements/delivery | duplicates | other CPU % |',
    '|---|---:|---:|---:|---:|---:|---:|',
    ...backlogRows,
    '',
    `${PARALLEL} webhooks ÷ 1, deliveries/s per round: ${spread(parallelRatio, 2)}. The backlogs were written at ${f0(singleWrites.rps)} and ${f0(parallelWrites.rps)} writes/s.`,
    '',
    '#### The cost to the write path',
    '',
    `Task creations by ${WRITERS} users (connection c's k-th request for user (c + k) mod ${WRITERS}), ${CONNECTIONS} in flight, ${ROUNDS} rounds of ${SLICE_SECONDS} s per target after ${WARMUP_SECONDS} s unrecorded, the targets in turns (rotating which goes first). ` +
      `Users with 0 webhooks and ${WRITERS} other users with ${HOOKS_PER_USER} webhooks each (${WRITERS * HOOKS_PER_USER} in all, enabled, every event, the fast receiver) on the same service; ` +
      `after each slice of the latter (and its warm-up) the bench waits until every webhook delivered every event (the drain) before the next slice. ` +
      (WITH_BASE ? `The third target is the service at ${BASE}, the commit before webhooks (no deliverer; its LISTEN connection opens with the first event stream, and none is opened here), on its own database seeded alike on the same PostgreSQL. ` : '') +
      "CPU per write: the service's (schedstat), PostgreSQL's (every backend, clock ticks) and the receiver's, during the slice / until the drain ended. Statements per write: the role's pg_stat_statements calls ÷ the slice's writes.",
    '',
    '| target | writes/s, median (min–max) | p50 / p99 ms | failed | service CPU µs/write, slice / with drain | PostgreSQL CPU µs/write, slice / with drain | receiver CPU µs/write, slice / with drain | SQL/write, slice / with drain | claims/write | records/write | delivered during the slice / drain s / deliveries/s in the drain | other CPU % |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...costRows,
    '',
    'Writes/s ratios, per round (median, min–max):',
    '',
    '| ratio | median (min–max) | target |',
    '|---|---:|---|',
    ...ratioRows,
    '',
    ...(statementRows.length
      ? [
          `Where the database time of the ${HOOKS_PER_USER}-webhook target goes (its ${ROUNDS} slices and their drains, ${tenWrites} writes; top statements by total time, pg_stat_statements of the role):`,
          '',
          '| statement | calls/write | mean ms | ms/write | query |',
          '|---|---:|---:|---:|---|',
          ...statementRows,
          '',
        ]
      : []),
    ...profileLines,
    `Service log lines at warn or worse: ${service.logLines}. Load average (1/5/15 min) before the run: ${loadBefore.map((x) => x.toFixed(2)).join(' / ')}; after: ${os.loadavg().map((x) => x.toFixed(2)).join(' / ')}. ` +
      `Whole run: ${f0((Date.now() - startedAt.getTime()) / 1000)} s, of which ${f0(waitQuiet.waitedMs() / 1000)} s waiting for other processes to go quiet.`,
  ].join('\n');
  log('\n' + report);
  writeResult(session, report, { file: process.env.BENCH_OUT });
});
