/**
 * CPU per request: `npm run bench:cpu` (part of `npm run bench`). What one request costs the
 * service in CPU, in its node process and in the PostgreSQL backends that serve it, against
 * the fewest floor (bench/floors/fewest-floor.ts) doing the same work; method and latest
 * figures in bench/README.md ("CPU per request"); each run's report goes to
 * bench/results/cpu-<UTC start>.md.
 *
 *  1. The throughput scenario's database and seed (lib/workload.ts), the built service
 *     (`node dist/src/main.js`, production, warn logs, rate limiter off) and the fewest floor,
 *     each connecting as its own PostgreSQL role; the floor checked against the service.
 *  2. Each one's warm-up (3 s of list tasks, 2 s of the mix), an idle pause, its RSS at rest.
 *  3. Per scenario, the two take turns for CPU_ROUNDS rounds (rotating which goes first): a
 *     slice is 1 s of unrecorded load, then CPU_REQUESTS requests (a fifth of it for reorder
 *     and start/pause, which cost 5–10 times a list) at CPU_CONNECTIONS connections. Around
 *     the slice, the CPU time of the target's node process (its threads, and its descendants
 *     if it forks) and of every PostgreSQL backend of its role (pg_stat_activity), from
 *     /proc/<pid>/task/<tid>/schedstat (ns; stat's clock ticks where absent).
 *     A backend that appeared during the slice counts from 0; one that vanished is counted
 *     and reported (its last part is lost).
 *  4. Per scenario and target: node, PostgreSQL and total µs per request (median of the
 *     rounds and min–max), req/s; floor ÷ service of the total per round, and service ÷ floor
 *     req/s per round, against the targets; RSS at rest and peak (VmHWM over the run).
 *
 * Env: CPU_REQUESTS (3000 per slice), CPU_CONNECTIONS (8), CPU_ROUNDS (5), CPU_REST_SECONDS
 *      (10: the idle pause after each one's warm-up, before its RSS at rest), BENCH_QUIET_WAIT
 *      (120: seconds it may wait in all for other processes to go quiet), BENCH_OUT (also
 *      append the Markdown report there), CPU_ONLY (comma-separated beginnings of scenario
 *      names: only those, e.g. `CPU_ONLY=reorder,list tasks`).
 */
import os from 'node:os';
import { checkFloor } from '../floors/floor-check.js';
import { createRoles, openDatabase, startDatabase } from '../lib/database.js';
import { f0, f1, log, num, sleep, utcMinute } from '../lib/env.js';
import { request } from '../lib/http.js';
import { runLoad, type LoadResult, type Script } from '../lib/load.js';
import { quiesce } from '../lib/pg-stats.js';
import { benchCpu, cpuNs, hasSchedstat, machineCpu, memory, processTree, statCpuNs } from '../lib/proc.js';
import { buildService, startBuiltService, startFloor, type Target } from '../lib/processes.js';
import { quietWait } from '../lib/quiet.js';
import { writeResult } from '../lib/report.js';
import { runScenario } from '../lib/session.js';
import { ascending } from '../lib/stats.js';
import { takeTurns } from '../lib/turns.js';
import { listProjects, listTasks, listTasksTrpc, MIX, reorderIn, scriptsOf, seedWorld } from '../lib/workload.js';

const REQUESTS = num('CPU_REQUESTS', 3_000);
const CONNECTIONS = num('CPU_CONNECTIONS', 8);
const ROUNDS = num('CPU_ROUNDS', 5);
const REST_SECONDS = num('CPU_REST_SECONDS', 10);
/** The Host header of the floor's byte-for-byte checks (the answers' links carry it). */
const CHECK_HOST = 'bench.example:8080';
const raw = (base: string, method: string, pathname: string, token: string, body?: unknown) => request(base, method, pathname, token, body, { host: CHECK_HOST });

/** CPU time of a set of processes at one moment, ns: from schedstat (`ns`) and from stat's clock ticks (`statNs`). */
interface Reading {
  ns: number;
  statNs: number;
}
const zero = (): Reading => ({ ns: 0, statNs: 0 });
const plus = (a: Reading, b: Reading): Reading => ({ ns: a.ns + b.ns, statNs: a.statNs + b.statNs });
const minus = (a: Reading, b: Reading): Reading => ({ ns: a.ns - b.ns, statNs: a.statNs - b.statNs });
function readingOf(pid: number): Reading | undefined {
  const ns = cpuNs(pid);
  const statNs = statCpuNs(pid);
  return ns === undefined || statNs === undefined ? undefined : { ns, statNs };
}

/** One target's part of a scenario: its CPU per request and throughput, one entry per round. */
interface Slice {
  load: LoadResult;
  /** µs per request. */
  nodeUs: number;
  pgUs: number;
  /** The rest of PostgreSQL meanwhile (postmaster, WAL writer, autovacuum, other backends), µs per request: for information. */
  pgOtherUs: number;
  /** The same CPU (node + backends) from stat's clock ticks, ns, and from schedstat: a cross-check. */
  statNs: number;
  ns: number;
  appeared: number;
  vanished: number;
  otherJiffies: number;
  totalJiffies: number;
}

runScenario('cpu', async (session) => {
  const { startedAt, loadBefore } = session;
  log(`data in ${session.dir}`);
  const db = await startDatabase(session, { settings: { max_connections: '200' } });
  const { admin, url: adminUrl, roleUrl } = await openDatabase(session, db, 'bench');
  await createRoles(admin.query.bind(admin) as typeof admin.query, ['bench_service', 'bench_fewest']);
  const pgVersion = (await admin.query<{ v: string }>(`select current_setting('server_version') as v`)).rows[0]!.v;

  let t = Date.now();
  const world = await seedWorld(admin);
  const { main, others, plannedPool, middle, mainPages, farDue, loadTaskStates, loadProjectStates } = world;
  log(`seeded ${world.users} users, ${world.totalTasks} tasks in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  const scripts = scriptsOf(world, CONNECTIONS);

  buildService();
  const service = await startBuiltService(session, { name: 'service', role: 'bench_service', roleUrl });
  const fewest = await startFloor(session, { name: 'fewest', role: 'bench_fewest', file: 'fewest-floor.ts', roleUrl });
  const targets = [service, fewest];

  // ---- the floor answers as the service does; the tRPC list is answered ---------------------
  const fewestCheck = await checkFloor({
    serviceUrl: service.url,
    floorUrl: fewest.url,
    databaseUrl: adminUrl,
    raw,
    main,
    spare: others[others.length - 1]!,
    mainPages,
    plannedTask: plannedPool[plannedPool.length - 1]!,
    middle,
    farDue,
    inProject: world.inProject,
  });
  log(`fewest floor check (${fewestCheck.ok ? 'all identical' : 'DIFFERENCES'}):\n  ${fewestCheck.lines.join('\n  ')}`);
  const trpcPath = listTasksTrpc(main, mainPages)(0)().path;
  const [trpc, rest] = await Promise.all([raw(service.url, 'GET', trpcPath, main.token), raw(service.url, 'GET', '/api/users/me/tasks?page=1', main.token)]);
  const trpcSame = trpc.status === 200 && rest.status === 200 && JSON.stringify(JSON.parse(trpc.text).result.data.json) === rest.text;
  const trpcCheck = `GET ${decodeURIComponent(trpcPath)}: ${trpc.status}, ${trpcSame ? 'the same document as' : 'DIFFERENT from'} GET /api/users/me/tasks?page=1`;
  log(trpcCheck);
  if (trpc.status !== 200) throw new Error(`the tRPC list answered ${trpc.status}: ${trpc.text.slice(0, 300)}`);

  // ---- warm-up, then RSS at rest -------------------------------------------------------
  // Each its own warm-up and pause, so that both have been idle alike when read (V8's memory
  // reducer first collects after about 8 s of idleness).
  const atRest = new Map<Target, number>();
  for (const target of targets) {
    await runLoad(target.url, listTasks(main, mainPages), { connections: CONNECTIONS, seconds: 3 });
    await loadTaskStates();
    await runLoad(target.url, scripts.mixed, { connections: CONNECTIONS, seconds: 2 });
    await sleep(REST_SECONDS * 1000);
    atRest.set(target, memory(target.pid).rssMb);
  }
  log(`RSS at rest: ${targets.map((x) => `${x.name} ${f0(atRest.get(x)!)} MB (${f0(x.readyMb)} MB once ready)`).join(', ')}`);

  // ---- CPU of a target and of its role's backends ---------------------------------------
  const pgPid = db.pid!;
  const ourPids = [process.pid, pgPid, service.pid, fewest.pid];
  const waitQuiet = quietWait(ourPids, num('BENCH_QUIET_WAIT', 120));
  const nodeCpu = (target: Target): Reading =>
    processTree(target.pid).reduce((sum, pid) => plus(sum, readingOf(pid) ?? zero()), zero());
  /** The role's backends, by pid and start time (a pid is never matched to another backend that reused it). */
  const backends = async (role: string): Promise<Map<string, Reading>> => {
    const { rows } = await admin.query<{ pid: number; started: string }>('select pid, backend_start::text as started from pg_stat_activity where usename = $1', [role]);
    const out = new Map<string, Reading>();
    for (const row of rows) {
      const r = readingOf(row.pid);
      if (r) out.set(`${row.pid}@${row.started}`, r);
    }
    return out;
  };
  /** Every process of PostgreSQL's tree, by pid. */
  const pgTree = (): Map<number, Reading> => {
    const out = new Map<number, Reading>();
    for (const pid of processTree(pgPid)) {
      const r = readingOf(pid);
      if (r) out.set(pid, r);
    }
    return out;
  };
  const snapshot = async (target: Target) => {
    const pg = await backends(target.role);
    return { pg, tree: pgTree(), node: nodeCpu(target), cpu: machineCpu(), ours: benchCpu(ourPids) };
  };

  /** One slice: 1 s unrecorded, then `requests` requests, with the CPU they took. */
  const slice = async (target: Target, script: () => Script, requests: number, before?: () => Promise<void>): Promise<Slice> => {
    await before?.();
    await waitQuiet();
    await runLoad(target.url, script(), { connections: CONNECTIONS, seconds: 1 });
    await sleep(300);
    await quiesce(admin, target.role);
    await before?.();
    const s0 = await snapshot(target);
    const load = await runLoad(target.url, script(), { connections: CONNECTIONS, amount: requests });
    // Work a response leaves behind (a notification to the service's LISTEN, a GC): a moment to run.
    await sleep(200);
    const s1 = await snapshot(target);
    let pg = zero();
    let appeared = 0;
    for (const [key, after] of s1.pg) {
      const was = s0.pg.get(key);
      if (!was) appeared++;
      pg = plus(pg, minus(after, was ?? zero()));
    }
    const vanished = [...s0.pg.keys()].filter((key) => !s1.pg.has(key)).length;
    let tree = zero();
    for (const [pid, after] of s1.tree) tree = plus(tree, minus(after, s0.tree.get(pid) ?? zero()));
    const node = minus(s1.node, s0.node);
    const n = Math.max(1, load.completed);
    const result: Slice = {
      load,
      nodeUs: node.ns / n / 1000,
      pgUs: pg.ns / n / 1000,
      pgOtherUs: Math.max(0, tree.ns - pg.ns) / n / 1000,
      ns: node.ns + pg.ns,
      statNs: node.statNs + pg.statNs,
      appeared,
      vanished,
      otherJiffies: Math.max(0, s1.cpu.procs - s0.cpu.procs - (s1.ours - s0.ours)),
      totalJiffies: s1.cpu.total - s0.cpu.total,
    };
    log(
      `  ${target.name.padEnd(8)} ${f0(load.rps).padStart(5)} req/s  node ${f0(result.nodeUs)} µs  PG ${f0(result.pgUs)} µs  total ${f0(result.nodeUs + result.pgUs)} µs/req` +
        `  (PG other ${f0(result.pgOtherUs)})  backends +${appeared} −${vanished}  non-2xx ${load.non2xx}  errors ${load.errors}` +
        `  other CPU ${f0((result.otherJiffies / Math.max(1, result.totalJiffies)) * 100)} %${load.firstFailure ? `  first failure: ${load.firstFailure}` : ''}`,
    );
    return result;
  };

  // ---- the scenarios -----------------------------------------------------------------------
  interface Scenario {
    name: string;
    /** The service's requests, and the floor's when they differ (the floor has no tRPC door). */
    service: () => Script;
    floor?: () => Script;
    before?: () => Promise<void>;
    /** Requests per slice: REQUESTS, or for the writes that cost 5–10 times a list, a fifth of it. */
    requests: number;
    /** Floor CPU ÷ service CPU, at least. */
    cpuGoal?: number;
    note?: string;
  }
  const heavy = Math.max(CONNECTIONS, Math.round(REQUESTS / 5));
  const scenarios: Scenario[] = [
    { name: 'list tasks (REST)', service: () => listTasks(main, mainPages), requests: REQUESTS, cpuGoal: 0.8 },
    { name: 'list tasks (tRPC)', service: () => listTasksTrpc(main, mainPages), floor: () => listTasks(main, mainPages), requests: REQUESTS, cpuGoal: 0.7, note: "the floor's REST list" },
    { name: 'list projects (REST)', service: () => listProjects(main, 8), requests: REQUESTS, cpuGoal: 0.8 },
    { name: 'change task state (REST)', service: () => scripts.changeState, before: loadTaskStates, requests: REQUESTS, cpuGoal: 0.7 },
    { name: 'create task (REST)', service: () => scripts.createMain, requests: REQUESTS, cpuGoal: 0.7 },
    { name: 'reorder task (middle of 10k)', service: () => reorderIn(main, middle, 4_901), requests: heavy },
    { name: 'start/pause project', service: () => scripts.startPause, before: loadProjectStates, requests: heavy },
    { name: 'mixed 70% reads', service: () => scripts.mixed, before: loadTaskStates, requests: REQUESTS },
  ];
  const results: Array<{ scenario: Scenario; service: Slice[]; floor: Slice[] }> = [];
  const only = process.env.CPU_ONLY?.split(',').map((name) => name.trim().toLowerCase());
  for (const scenario of scenarios) {
    if (only && !only.some((name) => scenario.name.toLowerCase().startsWith(name))) continue;
    log(`${scenario.name}:`);
    const out = { scenario, service: [] as Slice[], floor: [] as Slice[] };
    await takeTurns(targets, ROUNDS, 'rotate', async (target) => {
      if (target === service) out.service.push(await slice(service, scenario.service, scenario.requests, scenario.before));
      else out.floor.push(await slice(fewest, scenario.floor ?? scenario.service, scenario.requests, scenario.before));
    });
    results.push(out);
  }

  // ---- report ---------------------------------------------------------------------------
  const peak = new Map(targets.map((target) => [target, memory(target.pid).hwmMb]));
  const median = (xs: number[]) => {
    const s = ascending(xs);
    return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  };
  /** `median (min–max)` of per-round values. */
  const spread = (xs: number[], digits = 0) => {
    const s = ascending(xs);
    return `${median(s).toFixed(digits)} (${s[0]!.toFixed(digits)}–${s[s.length - 1]!.toFixed(digits)})`;
  };
  const total = (s: Slice) => s.nodeUs + s.pgUs;
  const perRound = (a: Slice[], b: Slice[], f: (x: Slice, y: Slice) => number) => a.map((x, i) => f(x, b[i]!));
  const met = (value: number, goal: number) => (value >= goal ? 'met' : '**not met**');
  const cpuRows: string[] = [];
  const rpsRows: string[] = [];
  const summary: string[] = [];
  const all: Slice[] = [];
  for (const { scenario, service: sv, floor: fl } of results) {
    all.push(...sv, ...fl);
    const cpuRatios = perRound(sv, fl, (s, f) => total(f) / total(s));
    const rpsRatios = perRound(sv, fl, (s, f) => s.load.rps / f.load.rps);
    const other = (xs: Slice[]) => (xs.reduce((a, s) => a + s.otherJiffies, 0) / Math.max(1, xs.reduce((a, s) => a + s.totalJiffies, 0))) * 100;
    const failures = (xs: Slice[]) => xs.reduce((a, s) => a + s.load.non2xx + s.load.errors, 0);
    const backendsMoved = (xs: Slice[]) => `+${xs.reduce((a, s) => a + s.appeared, 0)} −${xs.reduce((a, s) => a + s.vanished, 0)}`;
    for (const [name, xs] of [['service', sv], [`fewest${scenario.note ? ` (${scenario.note})` : ''}`, fl]] as const) {
      cpuRows.push(
        `| ${scenario.name} | ${name} | ${spread(xs.map((s) => s.nodeUs))} | ${spread(xs.map((s) => s.pgUs))} | **${spread(xs.map(total))}** | ${f0(median(xs.map((s) => s.pgOtherUs)))} | ` +
          `${spread(xs.map((s) => s.load.rps))} | ${failures(xs)} | ${backendsMoved(xs)} | ${f0(other(xs))} |`,
      );
    }
    const cpuRatio = median(cpuRatios);
    cpuRows.push(
      `| ${scenario.name} | **floor ÷ service** | ${spread(perRound(sv, fl, (s, f) => f.nodeUs / s.nodeUs), 2)} | ${spread(perRound(sv, fl, (s, f) => f.pgUs / s.pgUs), 2)} | ` +
        `**${spread(cpuRatios, 2)}** | | | | | |`,
    );
    const rpsRatio = median(rpsRatios);
    rpsRows.push(
      `| ${scenario.name} | ${f0(median(sv.map((s) => s.load.rps)))} | ${f0(median(fl.map((s) => s.load.rps)))}${scenario.note ? ` (${scenario.note})` : ''} | **${spread(rpsRatios, 2)}** | ≥ 0.8 | ${met(rpsRatio, 0.8)} |`,
    );
    summary.push(
      `| ${scenario.name} | ${f0(median(fl.map(total)))}${scenario.note ? ` (${scenario.note})` : ''} | ${f0(median(sv.map(total)))} | **${spread(cpuRatios, 2)}** | ${scenario.cpuGoal === undefined ? '—' : `≥ ${scenario.cpuGoal}`} | ${scenario.cpuGoal === undefined ? '—' : met(cpuRatio, scenario.cpuGoal)} |`,
    );
  }
  const restRatio = atRest.get(service)! / atRest.get(fewest)!;
  const statCheck = all.reduce((a, s) => a + s.statNs, 0) / Math.max(1, all.reduce((a, s) => a + s.ns, 0));
  const otherAll = (all.reduce((a, s) => a + s.otherJiffies, 0) / Math.max(1, all.reduce((a, s) => a + s.totalJiffies, 0))) * 100;
  const failed = all.filter((s) => s.load.non2xx > 0 || s.load.errors > 0);
  const cpuModel = os.cpus()[0]?.model ?? 'unknown CPU';
  const report = [
    `### CPU per request, ${utcMinute(startedAt)} UTC`,
    '',
    `Command: \`npm run bench:cpu\` (CPU_REQUESTS=${REQUESTS}, CPU_CONNECTIONS=${CONNECTIONS}, CPU_ROUNDS=${ROUNDS}). ` +
      `Machine: ${os.availableParallelism()} CPUs (${cpuModel}), ${os.platform()} ${os.release()}; Node ${process.version}; PostgreSQL ${pgVersion} (embedded, fsync/synchronous_commit/full_page_writes off). ` +
      `PostgreSQL, both targets and autocannon share these CPUs. CPU from ${hasSchedstat ? '/proc/<pid>/task/<tid>/schedstat (ns on CPU)' : "/proc/<pid>/stat (clock ticks of 10 ms)"}.`,
    '',
    `Seed: ${world.totalTasks} tasks, as the throughput scenario (bench_main 10,000 over 200 projects; 50 users × 1,000; bench_in_project 1,000; growth users). ` +
      `Fewest floor check: ${fewestCheck.ok ? 'all identical' : `**DIFFERENCES**: ${fewestCheck.lines.filter((l) => l.includes('DIFFERENT')).join('; ')}`}. tRPC list: ${trpcCheck}.`,
    '',
    `Per round, each target: 1 s unrecorded, then ${REQUESTS} requests (reorder and start/pause ${heavy}: each costs 5–10 times a list) at ${CONNECTIONS} connections; the targets in turns, ${ROUNDS} rounds, rotating which goes first. ` +
      'Figures are the median of the rounds, (min–max) over them. Ratio = floor CPU ÷ service CPU (node + PostgreSQL), per round.',
    '',
    '| scenario | floor µs/req (node + PG) | service µs/req | floor ÷ service, median (min–max) | target | |',
    '|---|---:|---:|---:|---:|---|',
    ...summary,
    '',
    'Every figure (µs per request; PG = the backends of the target\'s role; "PG other" = the rest of PostgreSQL meanwhile, for information; backends = appeared / vanished during the slices; other CPU = share of the machine used by processes outside the bench):',
    '',
    '| scenario | target | node µs | PG µs | total µs | PG other µs | req/s | non-2xx + errors | backends | other CPU % |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...cpuRows,
    '',
    'Throughput in the same slices (service req/s ÷ floor req/s, per round):',
    '',
    '| scenario | service req/s | floor req/s | service ÷ floor, median (min–max) | target | |',
    '|---|---:|---:|---:|---:|---|',
    ...rpsRows,
    '',
    `Memory: RSS at rest (after 3 s of list tasks and 2 s of the mix at ${CONNECTIONS} connections, then ${REST_SECONDS} s idle): service ${f0(atRest.get(service)!)} MB, floor ${f0(atRest.get(fewest)!)} MB, ` +
      `**service ÷ floor ${restRatio.toFixed(2)}** (target ≤ 1.3: ${restRatio <= 1.3 ? 'met' : '**not met**'}); once ready ${f0(service.readyMb)} / ${f0(fewest.readyMb)} MB; ` +
      `peak (VmHWM over the run) service ${f0(peak.get(service)!)} MB, floor ${f0(peak.get(fewest)!)} MB.`,
    '',
    `Mixed: out of every 100 requests ${MIX.listTasks} list tasks, ${MIX.listProjects} list projects, ${MIX.getTask} get task, ${MIX.create} create, ${MIX.changeState} change state, ${MIX.reorder} reorder.`,
    `Cross-check: node + backends CPU from stat's clock ticks ÷ from schedstat, over every slice: ${statCheck.toFixed(3)}. ` +
      `Slices with non-2xx or errors: ${failed.length === 0 ? 'none' : failed.map((s) => `${JSON.stringify(s.load.statuses)} ${s.load.firstFailure ?? ''}`).join('; ')}. ` +
      `Service log lines at warn or worse: ${service.logLines}.`,
    `Other processes used ${f1(otherAll)} % of the machine during the slices. Load average (1/5/15 min) before the run: ${loadBefore.map((x) => x.toFixed(2)).join(' / ')}; after: ${os.loadavg().map((x) => x.toFixed(2)).join(' / ')}. ` +
      `Whole run: ${f0((Date.now() - startedAt.getTime()) / 1000)} s, of which ${f0(waitQuiet.waitedMs() / 1000)} s waiting for other processes to go quiet.`,
  ].join('\n');
  log('\n' + report);
  writeResult(session, report, { file: process.env.BENCH_OUT, append: true }); // after throughput's, in npm run bench
});
