/**
 * This checkout against an earlier commit, on the same load: `npm run bench:before-after` (about
 * 9 minutes on 2 cores, more when it waits for a busy machine to calm down; not part of `npm run
 * bench`). Figures in bench/README.md ("Before and after"); each run's report goes to
 * bench/results/before-after-<UTC start>.md.
 *
 *  1. BENCH_BASE (a commit) is exported with `git archive` into the run's temp folder and built
 *     there with this checkout's node_modules; this checkout is built too.
 *  2. One embedded PostgreSQL (durability off, pg_stat_statements loaded), a database for each
 *     target: the base's migrated by the base's own code (its service, started once as the
 *     superuser, migrates on start), this checkout's by this checkout's. Both seeded alike by
 *     this checkout's seed (bench/lib/workload.ts: bench_main with 10,000 tasks over 200
 *     projects, 50 users with 1,000, bench_in_project, growth users), then vacuumed until the
 *     pages of `tasks` are all-visible (bench/lib/list-seed.ts), as autovacuum leaves a table
 *     whose old rows no longer change: index-only scans then read no heap. The seeded tokens
 *     are found by their SHA-256 on both sides (a base from before tokens named their user
 *     looks a token up by its hash alone).
 *  3. Both built services as children (`npm start`'s flags, production, warnings only, rate
 *     limits off), each connecting as its own role, so pg_stat_statements tells their
 *     statements apart.
 *  4. Rows under load (BENCH_CONNECTIONS connections), the two targets in turns, BENCH_ROUNDS
 *     slices each (forward, then backward), a wait for the shared machine to go quiet and 1 s
 *     of unrecorded load before each slice (and 5 s of reads only, unrecorded, before the first
 *     row): list tasks (page 1 of bench_main), get one task,
 *     change task state, reorder task, create task (every connection as bench_main, so the
 *     writes of one user queue on its lock), create task over 50 users (each connection as
 *     another user at a time), the mixed workload (MIX). Reads first, so that the lists read
 *     the seeded rows with every page all-visible, alike on both sides (the mixed row, after
 *     the writes, lists what they left); the state changes re-read the flipped tasks'
 *     states before each slice. Per row: req/s, p50/p99, and from pg_stat_statements the
 *     statements and the database's execution time per request (calls of the target's role ÷
 *     its token lookups, one per request; BEGIN, COMMIT and NOTIFY count as statements).
 *  5. One request at a time (BENCH_SEQUENTIAL of each, after 20 unrecorded), the targets
 *     alternating request by request on kept-alive connections: median and p90 latency, and the
 *     statements of each request with no other request in flight (calls per request and mean
 *     time of each, in the report). The reads after the read rows, the writes after the write
 *     rows.
 *
 * Env: BENCH_BASE (1c5ff3c: main before #29; `BENCH_BASE=HEAD` for an A/A run, the same code on
 * both sides), BENCH_SECONDS (10 per row and target, split into the rounds), BENCH_CONNECTIONS
 * (32), BENCH_ROUNDS (6), BENCH_SEQUENTIAL (300), BENCH_QUIET_WAIT (240: seconds it may wait in
 * all for other processes to go quiet), BENCH_OUT (also write the Markdown report there),
 * BENCH_DEBUG (every statement of every slice).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createRoles, openDatabase, startDatabase, STATEMENT_STATS, type BenchDatabase } from '../lib/database.js';
import { f0, f1, log, num, ROOT, utcMinute } from '../lib/env.js';
import { statusOf } from '../lib/http.js';
import { vacuumUntilVisible } from '../lib/list-seed.js';
import { runLoad, type Script } from '../lib/load.js';
import { meter, rowOf, rowTable, type Meter, type Row, type Slice } from '../lib/measure.js';
import { resetStatementStats, statementStats, totals, type StatementStat } from '../lib/pg-stats.js';
import { builtServiceArgs, buildService, SERVICE_ENV, startTarget, stopChild, type Target } from '../lib/processes.js';
import { quietWait } from '../lib/quiet.js';
import { writeResult } from '../lib/report.js';
import { listFirstPage } from '../lib/scripts.js';
import { runScenario } from '../lib/session.js';
import { ascending, quantile } from '../lib/stats.js';
import { takeTurns } from '../lib/turns.js';
import { MIX, reorderIn, scriptsOf, seedWorld, type Scripts, type World } from '../lib/workload.js';

const BASE = process.env.BENCH_BASE ?? '1c5ff3c';
const SECONDS = num('BENCH_SECONDS', 10);
const CONNECTIONS = num('BENCH_CONNECTIONS', 32);
/** Even, so that each target goes first in as many rounds as the other (forward, then backward). */
const ROUNDS = num('BENCH_ROUNDS', 6);
/** Requests to each target, one at a time, per sequential row. */
const SEQUENTIAL = num('BENCH_SEQUENTIAL', 300);
const SEQUENTIAL_WARMUP = 20;

/** One target: a service on its own database, with the world seeded there and its request scripts. */
interface Side {
  key: 'base' | 'head';
  label: string;
  target: Target;
  db: BenchDatabase;
  world: World;
  scripts: Scripts;
  meter: Meter;
}

interface LoadRow {
  name: string;
  script: (side: Side) => Script;
  /** Before each slice of a side (the state changes re-read the flipped tasks' states: a slice cut short leaves some unsent). */
  before?: (side: Side) => Promise<void>;
}

interface SequentialRow {
  name: string;
  results: Record<Side['key'], { median: number; p90: number; statements: number; failed: number; detail: StatementStat[]; requests: number }>;
}

const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();

/** The value at rank ⌈p × n⌉ of sorted latencies (as load.ts's percentiles), unrounded. */
const exactPercentile = (sorted: Float64Array, p: number) => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!);

runScenario('before-after', async (session) => {
  const { startedAt, loadBefore } = session;
  const baseCommit = git('rev-parse', '--short', BASE);
  const headCommit = git('rev-parse', '--short', 'HEAD');
  // Other people's uncommitted edits are in what this checkout builds: the report says so.
  const dirty = git('status', '--porcelain', '--', 'src').split('\n').filter(Boolean);

  const baseDir = path.join(session.dir, 'base');
  await fs.mkdir(baseDir);
  execFileSync('sh', ['-c', `git archive ${baseCommit} | tar -x -C "${baseDir}"`], { cwd: ROOT });
  await fs.symlink(path.join(ROOT, 'node_modules'), path.join(baseDir, 'node_modules'));
  log(`building ${baseCommit} and this checkout (HEAD ${headCommit}${dirty.length ? `, ${dirty.length} files of src changed` : ''})`);
  buildService(baseDir);
  buildService(ROOT);

  const pgServer = await startDatabase(session, { settings: { max_connections: '200', ...STATEMENT_STATS, 'pg_stat_statements.max': '5000' } });
  const roles = { base: 'bench_base', head: 'bench_head' } as const;
  const started: Array<Omit<Side, 'meter'>> = [];
  const vacuumNotes: string[] = [];
  let pgVersion = '';
  for (const [key, cwd] of [['base', baseDir], ['head', ROOT]] as const) {
    const database = await openDatabase(session, pgServer, `bench_${key}`, { migrate: key === 'head', statementStats: true });
    if (key === 'base') {
      await createRoles(database.q, Object.values(roles));
      pgVersion = (await database.q<{ v: string }>(`select current_setting('server_version') as v`)).rows[0]!.v;
      // The base's schema is its own migrations': its service migrates on start, once as the
      // superuser (its roles' service then finds nothing to apply).
      const migrating = await startTarget(session, { name: `migrate ${key}`, cwd, args: builtServiceArgs(), env: { ...SERVICE_ENV, DATABASE_URL: database.url } });
      await stopChild(migrating.child);
    }
    const t = Date.now();
    const world = await seedWorld(database.admin);
    vacuumNotes.push(`${key}: ${await vacuumUntilVisible(database.admin)}`);
    log(`${key}: seeded ${world.users} users, ${world.totalTasks} tasks in ${((Date.now() - t) / 1000).toFixed(1)} s`);
    const target = await startTarget(session, {
      name: key,
      cwd,
      role: roles[key],
      args: builtServiceArgs(),
      env: { ...SERVICE_ENV, DATABASE_URL: database.roleUrl(roles[key]) },
    });
    started.push({ key, label: key === 'base' ? baseCommit : `HEAD ${headCommit}`, target, db: database, world, scripts: scriptsOf(world, CONNECTIONS) });
  }
  const ourPids = [process.pid, pgServer.pid!, ...started.map((s) => s.target.pid)];
  const waitQuiet = quietWait(ourPids, num('BENCH_QUIET_WAIT', 240));
  // A meter per target: each reads pg_stat_statements through a client on the target's own database.
  const sides: Side[] = started.map((s) => ({ ...s, meter: meter({ client: s.db.admin, connections: CONNECTIONS, quiet: waitQuiet, ourPids }) }));
  const [base, head] = sides as [Side, Side];

  // Warm-up of both (JIT, pools, prepared statements), not measured. Reads only: a write now
  // would leave pages of `tasks` not all-visible, and the list's count would read them from the
  // heap, more or fewer on either side depending on the writes each made (the writes' own rows
  // warm up in the unrecorded second before each slice).
  for (const side of sides) {
    await runLoad(side.target.url, listFirstPage(side.world.main.token), { connections: CONNECTIONS, seconds: 3 });
    await runLoad(side.target.url, side.scripts.getTask, { connections: CONNECTIONS, seconds: 2 });
  }

  // ---- under load, in turns -----------------------------------------------------------------
  const rows: Array<{ name: string; base: Row; head: Row }> = [];
  const underLoad = async (def: LoadRow) => {
    const slices: Record<Side['key'], Slice[]> = { base: [], head: [] };
    await takeTurns(sides, ROUNDS, 'reverse', async (side) => {
      await def.before?.(side);
      slices[side.key].push(await side.meter.measure(side.target, def.script(side), SECONDS / ROUNDS, 1));
    });
    rows.push({ name: def.name, base: rowOf('main', base.target, def.name, slices.base, '—'), head: rowOf('main', head.target, def.name, slices.head, '—') });
  };

  // ---- one request at a time, alternating request by request ----------------------------------
  const sequentialRows: SequentialRow[] = [];
  const sequential = async (name: string, script: (side: Side) => Script, before?: (side: Side) => Promise<void>) => {
    for (const side of sides) await before?.(side);
    await waitQuiet();
    const next = sides.map((side) => script(side)(0));
    const agents = sides.map(() => new http.Agent({ keepAlive: true, maxSockets: 1 }));
    const times = sides.map(() => [] as number[]);
    const failed = sides.map(() => 0);
    const lookups = sides.map(() => 0);
    const calls = sides.map(() => 0);
    const detail = sides.map(() => [] as StatementStat[]);
    for (let i = 0; i < SEQUENTIAL + SEQUENTIAL_WARMUP; i++) {
      // Statements counted over the recorded requests only.
      if (i === SEQUENTIAL_WARMUP) await resetStatementStats(base.db.admin);
      for (let k = 0; k < sides.length; k++) {
        const j = (k + i) % sides.length;
        const side = sides[j]!;
        const r = next[j]!();
        const t0 = performance.now();
        const status = await statusOf(side.target.url, r, agents[j]!);
        const ms = performance.now() - t0;
        if (status >= 300) failed[j]! += 1;
        if (i >= SEQUENTIAL_WARMUP) times[j]!.push(ms);
      }
    }
    for (const agent of agents) agent.destroy();
    for (const [j, side] of sides.entries()) {
      detail[j] = await statementStats(side.db.admin, side.target.role);
      const sum = totals(detail[j]!);
      calls[j] = sum.calls;
      lookups[j] = sum.requests;
    }
    const result = (j: number) => {
      const sorted = ascending(times[j]!);
      return {
        median: quantile(sorted, 0.5),
        p90: quantile(sorted, 0.9),
        statements: calls[j]! / Math.max(1, lookups[j]!),
        failed: failed[j]!,
        detail: detail[j]!,
        requests: lookups[j]!,
      };
    };
    const row: SequentialRow = { name, results: { base: result(0), head: result(1) } };
    sequentialRows.push(row);
    log(
      `one at a time, ${name}: ` +
        sides.map((s, j) => `${s.key} median ${result(j).median.toFixed(2)} ms p90 ${result(j).p90.toFixed(2)} ms SQL/req ${result(j).statements.toFixed(2)}${failed[j] ? ` NON-2xx ${failed[j]}` : ''}`).join(', '),
    );
  };

  const list: LoadRow = { name: 'list tasks (page 1 of 10,000)', script: (s) => listFirstPage(s.world.main.token) };
  const getTask: LoadRow = { name: 'get one task', script: (s) => s.scripts.getTask };
  const changeState: LoadRow = { name: 'change task state', script: (s) => s.scripts.changeState, before: (s) => s.world.loadTaskStates() };
  const reorder: LoadRow = { name: 'reorder task (middle of 10k)', script: (s) => reorderIn(s.world.main, s.world.middle, 4_901) };
  const create: LoadRow = { name: 'create task', script: (s) => s.scripts.createMain };
  const createSpread: LoadRow = { name: 'create task, 50 users', script: (s) => s.scripts.createSpread };
  const mixed: LoadRow = { name: 'mixed (MIX)', script: (s) => s.scripts.mixed, before: (s) => s.world.loadTaskStates() };

  for (const def of [list, getTask]) await underLoad(def);
  for (const def of [list, getTask]) await sequential(def.name, def.script, def.before);
  for (const def of [changeState, reorder, create, createSpread]) await underLoad(def);
  // Seeded 2,000 apart, so that the sequential reorders are not the ones of the rows under load.
  const reorderSequential: LoadRow = { ...reorder, script: (s) => reorderIn(s.world.main, s.world.middle, 4_901, 2_000) };
  for (const def of [changeState, reorderSequential, create]) await sequential(def.name, def.script, def.before);
  await underLoad(mixed);

  // ---- report -------------------------------------------------------------------------------
  const ratio = (a: number, b: number) => (b > 0 ? (a / b).toFixed(3) : '—');
  const ms = (n: number) => (n >= 10 ? f0(n) : n.toFixed(1));
  const loadTable = [
    `| row | ${base.label} req/s | ${head.label} req/s | **req/s HEAD ÷ base** | p50 ms base / HEAD | p50 HEAD ÷ base | p99 ms base / HEAD | p99 HEAD ÷ base | statements per request base / HEAD | DB ms per request base / HEAD |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(({ name, base: b, head: h }) => {
      const p = (r: Row, q: number) => exactPercentile(r.load.latencies, q);
      return (
        `| ${name} | ${f0(b.load.rps)} | ${f0(h.load.rps)} | **${ratio(h.load.rps, b.load.rps)}** | ` +
        `${ms(p(b, 0.5))} / ${ms(p(h, 0.5))} | ${ratio(p(h, 0.5), p(b, 0.5))} | ${ms(p(b, 0.99))} / ${ms(p(h, 0.99))} | ${ratio(p(h, 0.99), p(b, 0.99))} | ` +
        `${f1(b.statementsUnderLoad)} / ${f1(h.statementsUnderLoad)} | ${b.dbMsPerRequest.toFixed(2)} / ${h.dbMsPerRequest.toFixed(2)} |`
      );
    }),
  ];
  const sequentialTable = [
    '| row | median / p90 ms base | median / p90 ms HEAD | **median HEAD ÷ base** | p90 HEAD ÷ base | statements per request base / HEAD |',
    '|---|---:|---:|---:|---:|---:|',
    ...sequentialRows.map(({ name, results: { base: b, head: h } }) =>
      `| ${name} | ${b.median.toFixed(2)} / ${b.p90.toFixed(2)} | ${h.median.toFixed(2)} / ${h.p90.toFixed(2)} | **${ratio(h.median, b.median)}** | ${ratio(h.p90, b.p90)} | ${b.statements.toFixed(2)} / ${h.statements.toFixed(2)} |`,
    ),
  ];
  // What each request sent, one at a time: its statements by time, the ones under 0.05 per request (background work) left out.
  const codeText = (text: string) => text.replace(/\s+/g, ' ').replace(/`/g, "'");
  const statementLines = sequentialRows.flatMap(({ name, results }) =>
    sides.flatMap((side) => {
      const r = results[side.key];
      const shown = r.detail.filter((x) => x.calls / Math.max(1, r.requests) >= 0.05).sort((a, b) => b.totalMs - a.totalMs);
      return [
        `- **${name}**, ${side.label}: ${r.statements.toFixed(2)} statements per request, ${(r.detail.reduce((a, x) => a + x.totalMs, 0) / Math.max(1, r.requests)).toFixed(3)} ms of execution:`,
        ...shown.map((x) => `  - ${(x.calls / Math.max(1, r.requests)).toFixed(2)} × ${x.meanMs.toFixed(3)} ms: \`${codeText(x.query).slice(0, 110)}\``),
      ];
    }),
  );
  const all = rows.flatMap((r) => [r.base, r.head]);
  const failures = all.filter((r) => r.load.non2xx > 0 || r.load.errors > 0);
  const sequentialFailures = sequentialRows.filter((r) => r.results.base.failed + r.results.head.failed > 0);
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  const report = [
    `### ${head.label} against ${baseCommit}${BASE !== baseCommit ? ` (BENCH_BASE=${BASE})` : ''}, ${utcMinute(startedAt)} UTC`,
    '',
    `Command: \`${BASE === '1c5ff3c' ? '' : `BENCH_BASE=${BASE} `}npm run bench:before-after\` (BENCH_SECONDS=${SECONDS} per row and target in ${ROUNDS} slices, BENCH_CONNECTIONS=${CONNECTIONS}, BENCH_SEQUENTIAL=${SEQUENTIAL}). ` +
      `Machine: ${os.availableParallelism()} CPUs (nproc; ${cpu}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.platform()} ${os.release()}; Node ${process.version}; ` +
      `PostgreSQL ${pgVersion} (embedded, fsync/synchronous_commit/full_page_writes off, pg_stat_statements on). PostgreSQL, both services and autocannon share these CPUs.`,
    '',
    `This checkout: HEAD ${headCommit}${dirty.length ? ` with uncommitted changes to ${dirty.length} files of src (${dirty.map((l) => l.slice(3)).join(', ')})` : ', src as committed'}. ` +
      `Base: ${baseCommit}, exported with \`git archive\`, migrated by its own code.`,
    '',
    `Seed, alike in both databases: ${base.world.totalTasks} tasks (bench_main 10,000 over 200 projects: 3,000 planned, 300 finished 30 days ago, 200 abandoned; 50 users × 1,000; bench_in_project 1,000; growth users 1k/10k/100k). ` +
      vacuumNotes.join('; ') + '.',
    '',
    `Under load: ${CONNECTIONS} connections, the targets in turns (forward, then backward), each slice after a wait for quiet and 1 s unrecorded. ` +
      'Statements and DB time per request: pg_stat_statements calls and execution time of the target\'s role ÷ its token lookups (one per request); BEGIN, COMMIT and NOTIFY count. ' +
      `Mixed: per 100 requests ${MIX.listTasks} list tasks (pages 1, 2, …), ${MIX.listProjects} list projects, ${MIX.getTask} get task, ${MIX.create} create, ${MIX.changeState} change state, ${MIX.reorder} reorder.`,
    '',
    ...loadTable,
    '',
    `One request at a time: ${SEQUENTIAL} of each to each target after ${SEQUENTIAL_WARMUP} unrecorded, alternating request by request on kept-alive connections; statements counted over the recorded requests (the services' background work, a few statements every few seconds, included).`,
    '',
    ...sequentialTable,
    '',
    'Statements of those requests (pg_stat_statements of each role over the recorded requests: calls per request × mean execution time; a statement prepared in SQL shows as its PREPARE):',
    '',
    ...statementLines,
    '',
    'Every row:',
    '',
    ...rowTable(all),
    '',
    `Rows with non-2xx or errors: ${failures.length === 0 ? 'none' : failures.map((r) => `${r.target} ${r.scenario}: ${JSON.stringify(r.load.statuses)} ${r.load.firstFailure ?? ''}`).join('; ')}. ` +
      `Sequential rows with non-2xx: ${sequentialFailures.length === 0 ? 'none' : sequentialFailures.map((r) => `${r.name} (base ${r.results.base.failed}, HEAD ${r.results.head.failed})`).join('; ')}. ` +
      `Log lines at warn or worse: base ${base.target.logLines}, HEAD ${head.target.logLines}.`,
    `Load average (1/5/15 min) before the run: ${loadBefore.map((x) => x.toFixed(2)).join(' / ')}; after: ${os.loadavg().map((x) => x.toFixed(2)).join(' / ')}. ` +
      `Other processes' share of the machine during the rows: ${f1(all.reduce((a, r) => a + r.otherCpuPercent, 0) / Math.max(1, all.length))} % on average, at most ${f1(Math.max(...all.map((r) => r.otherCpuPercent)))} %. ` +
      `Whole run: ${f0((Date.now() - startedAt.getTime()) / 1000)} s, of which ${f0(waitQuiet.waitedMs() / 1000)} s waiting for other processes to go quiet.`,
  ].join('\n');
  log('\n' + report);
  writeResult(session, report, { file: process.env.BENCH_OUT });
});
