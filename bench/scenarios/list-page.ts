/**
 * Page 1 of the task list, one connection at a time, across commits: `npx tsx
 * bench/scenarios/list-page.ts` (a few minutes; not part of `npm run bench`). Each run's report
 * goes to bench/results/list-page-<UTC start>.md.
 *
 *  1. LIST_TARGETS, a comma list of commits (`.` is this checkout as it is, uncommitted changes
 *     included): each other commit exported with `git archive` and built with this checkout's
 *     node_modules.
 *  2. One embedded PostgreSQL (durability off, pg_stat_statements), a database per target
 *     migrated by the target's own code (its service started once as the superuser), seeded
 *     alike by this checkout's seed: users with LIST_SIZES tasks each, every task open (newed)
 *     and listed, so the count behind `links.last` grows with the user; then `vacuum analyze`
 *     and `vacuum tasks` until every page is all-visible.
 *  3. Each target's built service (`npm start`'s flags, production, warnings only, rate limits
 *     off) as its own role; with LIST_PROFILE=1 under `--cpu-prof`.
 *  4. 2 s of unrecorded load on every (target, size); then LIST_ROUNDS rounds, each size in
 *     turn, the targets forward then backward (A B, B A, …): `GET /api/users/me/tasks?page=1`
 *     by autocannon, ONE connection, LIST_SECONDS each. Latencies of a (target, size) merged
 *     over its rounds; the median of its per-round p50s too.
 *  5. pg_stat_statements per target over the recorded load: statements per request and the
 *     mean execution time of each. With LIST_PROFILE=1 the services are stopped with SIGINT
 *     and their profiles read over the recorded windows (self time by package and frame, per
 *     request).
 *
 * Env: LIST_TARGETS (`1c5ff3c,.`), LIST_SIZES (`1000,10000,100000`), LIST_ROUNDS (4),
 * LIST_SECONDS (5), LIST_PROFILE (0), LIST_SETUP_SQL (SQL run on every target's database after
 * its seed: for an experiment, a column that one target reads), BENCH_QUIET_WAIT (60), BENCH_OUT.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { aggregate, profileTables, readProfile, type Aggregate } from '../lib/cpu-profile.js';
import { createRoles, openDatabase, startDatabase, STATEMENT_STATS, type BenchDatabase } from '../lib/database.js';
import { log, num, ROOT, utcMinute } from '../lib/env.js';
import { vacuumUntilVisible } from '../lib/list-seed.js';
import { runLoad, mergeLoads, type LoadResult } from '../lib/load.js';
import { resetStatementStats, statementStats, totals, type StatementStat } from '../lib/pg-stats.js';
import { builtServiceArgs, buildService, SERVICE_ENV, startTarget, stopChild, type Target } from '../lib/processes.js';
import { cpuNs } from '../lib/proc.js';
import { quietWait } from '../lib/quiet.js';
import { writeResult } from '../lib/report.js';
import { listFirstPage } from '../lib/scripts.js';
import { seedUser, type SeededUser } from '../lib/seed.js';
import { runScenario } from '../lib/session.js';
import { ascending, quantile } from '../lib/stats.js';

const TARGETS = (process.env.LIST_TARGETS ?? '1c5ff3c,.').split(',').map((s) => s.trim()).filter(Boolean);
const SIZES = (process.env.LIST_SIZES ?? '1000,10000,100000').split(',').map(Number);
const ROUNDS = num('LIST_ROUNDS', 4);
const SECONDS = num('LIST_SECONDS', 5);
const PROFILE = process.env.LIST_PROFILE === '1';
/** SQL run on every target's database after its seed, before its vacuum (for experiments: a column a target reads). */
const SETUP_SQL = process.env.LIST_SETUP_SQL ?? '';

const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();

interface Side {
  ref: string;
  label: string;
  db: BenchDatabase;
  role: string;
  target: Target;
  users: Map<number, SeededUser>;
  profDir?: string;
  windows: Array<[number, number]>;
  loads: Map<number, LoadResult[]>;
  /** CPU ns over the recorded load of each size: the service's process, and PostgreSQL's backends of its role. */
  cpu: Map<number, { service: number; backends: number }>;
  stats: StatementStat[];
}

/** CPU ns so far of each backend of `role` (pid → ns). */
async function backendsCpu(db: BenchDatabase, role: string): Promise<Map<number, number>> {
  const { rows } = await db.admin.query<{ pid: number }>('select pid from pg_stat_activity where usename = $1', [role]);
  return new Map(rows.flatMap((r) => {
    const ns = cpuNs(r.pid);
    return ns === undefined ? [] : [[r.pid, ns] as [number, number]];
  }));
}

runScenario('list-page', async (session) => {
  const { startedAt, loadBefore } = session;
  const dirty = git('status', '--porcelain', '--', 'src').split('\n').filter(Boolean);
  const pgServer = await startDatabase(session, { settings: { max_connections: '100', ...STATEMENT_STATS } });
  const sides: Side[] = [];
  for (const [i, ref] of TARGETS.entries()) {
    let cwd = ROOT;
    let label = `${git('rev-parse', '--short', 'HEAD')}${dirty.length ? ` + ${dirty.length} changed files of src` : ''} (this checkout)`;
    if (ref !== '.') {
      const commit = git('rev-parse', '--short', ref);
      label = commit;
      cwd = path.join(session.dir, `t${i}`);
      await fs.mkdir(cwd);
      execFileSync('sh', ['-c', `git archive ${commit} | tar -x -C "${cwd}"`], { cwd: ROOT });
      await fs.symlink(path.join(ROOT, 'node_modules'), path.join(cwd, 'node_modules'));
    }
    log(`building ${label}`);
    buildService(cwd);
    const db = await openDatabase(session, pgServer, `list_${i}`, { migrate: false, statementStats: true });
    const role = `list_t${i}`;
    await createRoles(db.q, [role]);
    const migrating = await startTarget(session, { name: `migrate ${label}`, cwd, args: builtServiceArgs(), env: { ...SERVICE_ENV, DATABASE_URL: db.url } });
    await stopChild(migrating.child);
    const users = new Map<number, SeededUser>();
    for (const size of SIZES) users.set(size, await seedUser(db.admin, `list_${size}`, size, 0));
    if (SETUP_SQL) await db.admin.query(SETUP_SQL);
    const visible = await vacuumUntilVisible(db.admin);
    log(`${label}: seeded ${SIZES.join(', ')}; ${visible}`);
    const profDir = PROFILE ? path.join(session.dir, `prof-${i}`) : undefined;
    if (profDir) await fs.mkdir(profDir);
    const target = await startTarget(session, {
      name: label,
      cwd,
      role,
      args: builtServiceArgs(profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : []),
      env: { ...SERVICE_ENV, DATABASE_URL: db.roleUrl(role) },
    });
    sides.push({ ref, label, db, role, target, users, profDir, windows: [], loads: new Map(SIZES.map((s) => [s, []])), cpu: new Map(SIZES.map((s) => [s, { service: 0, backends: 0 }])), stats: [] });
  }
  const waitQuiet = quietWait([process.pid, pgServer.pid!, ...sides.map((s) => s.target.pid)], num('BENCH_QUIET_WAIT', 60));

  for (const side of sides) for (const size of SIZES) await runLoad(side.target.url, listFirstPage(side.users.get(size)!.token), { connections: 1, seconds: 2 });
  for (const side of sides) await resetStatementStats(side.db.admin);

  for (let round = 0; round < ROUNDS; round++) {
    for (const size of SIZES) {
      const order = round % 2 === 0 ? sides : [...sides].reverse();
      for (const side of order) {
        await waitQuiet();
        const pg0 = await backendsCpu(side.db, side.role);
        const service0 = cpuNs(side.target.pid) ?? 0;
        const from = Number(process.hrtime.bigint() / 1000n);
        const load = await runLoad(side.target.url, listFirstPage(side.users.get(size)!.token), { connections: 1, seconds: SECONDS });
        side.windows.push([from, Number(process.hrtime.bigint() / 1000n)]);
        const cpu = side.cpu.get(size)!;
        cpu.service += (cpuNs(side.target.pid) ?? 0) - service0;
        for (const [pid, ns] of await backendsCpu(side.db, side.role)) cpu.backends += ns - (pg0.get(pid) ?? 0);
        side.loads.get(size)!.push(load);
        const sorted = load.latencies;
        log(`round ${round + 1}, ${size} tasks, ${side.label}: ${load.completed} requests, p50 ${quantile(Array.from(sorted), 0.5).toFixed(2)} ms, non-2xx ${load.non2xx}`);
      }
    }
  }
  for (const side of sides) side.stats = await statementStats(side.db.admin, side.role);

  const profiles = new Map<Side, Aggregate>();
  for (const side of sides) {
    if (!side.profDir) continue;
    await stopChild(side.target.child, 'SIGINT', 20_000);
    const profile = readProfile(side.profDir);
    // The recorded windows only: one aggregate over their union.
    const parts = side.windows.map(([from, to]) => aggregate(profile, from, to));
    const merged: Aggregate = { frames: new Map(), buckets: new Map(), total: 0, busy: 0, kept: 0 };
    for (const p of parts) {
      for (const [k, v] of p.frames) {
        const e = merged.frames.get(k) ?? { ms: 0, bucket: v.bucket };
        e.ms += v.ms;
        merged.frames.set(k, e);
      }
      for (const [k, v] of p.buckets) merged.buckets.set(k, (merged.buckets.get(k) ?? 0) + v);
      merged.total += p.total;
      merged.busy += p.busy;
      merged.kept += p.kept;
    }
    profiles.set(side, merged);
  }

  // ---- report -------------------------------------------------------------------------------
  const exact = (sorted: Float64Array, p: number) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!);
  const cell = (side: Side, size: number) => {
    const slices = side.loads.get(size)!;
    const all = mergeLoads(slices);
    const p50s = ascending(slices.map((s) => exact(s.latencies, 0.5)));
    return { all, p50: exact(all.latencies, 0.5), p99: exact(all.latencies, 0.99), medianOfP50s: quantile(p50s, 0.5), p50s };
  };
  const table = [
    `| target | ${SIZES.map((s) => `${s.toLocaleString('en')} tasks p50 / p99 ms (req/s)`).join(' | ')} | p50 ${SIZES.at(-1)!.toLocaleString('en')} ÷ ${SIZES[0]!.toLocaleString('en')} |`,
    `|---|${SIZES.map(() => '---:').join('|')}|---:|`,
    ...sides.map((side) => {
      const cells = SIZES.map((size) => cell(side, size));
      return `| ${side.label} | ${cells.map((c) => `**${c.p50.toFixed(2)}** / ${c.p99.toFixed(2)} (${c.all.rps.toFixed(0)})`).join(' | ')} | ${(cells.at(-1)!.p50 / cells[0]!.p50).toFixed(2)} |`;
    }),
  ];
  const cpuTable = [
    `| target | ${SIZES.map((s) => `${s.toLocaleString('en')} tasks: service / PostgreSQL µs CPU per request`).join(' | ')} |`,
    `|---|${SIZES.map(() => '---:').join('|')}|`,
    ...sides.map((side) => `| ${side.label} | ${SIZES.map((size) => {
      const n = Math.max(1, mergeLoads(side.loads.get(size)!).completed);
      const c = side.cpu.get(size)!;
      return `${(c.service / n / 1000).toFixed(0)} / ${(c.backends / n / 1000).toFixed(0)}`;
    }).join(' | ')} |`),
  ];
  const perRound = sides.flatMap((side) =>
    SIZES.map((size) => `- ${side.label}, ${size.toLocaleString('en')} tasks: p50 of each round ${side.loads.get(size)!.map((s) => exact(s.latencies, 0.5).toFixed(2)).join(', ')} ms; non-2xx ${mergeLoads(side.loads.get(size)!).non2xx}`),
  );
  const statementLines = sides.flatMap((side) => {
    const sum = totals(side.stats);
    const requests = Math.max(1, sum.requests);
    return [
      `- **${side.label}**: ${(sum.calls / requests).toFixed(2)} statements per request, ${(sum.ms / requests).toFixed(3)} ms of execution per request (all sizes):`,
      ...side.stats
        .filter((s) => s.calls / requests >= 0.05)
        .map((s) => `  - ${(s.calls / requests).toFixed(2)} × ${s.meanMs.toFixed(3)} ms: \`${s.query.replace(/\s+/g, ' ').replace(/`/g, "'").slice(0, 120)}\``),
    ];
  });
  const profileLines = [...profiles].flatMap(([side, agg]) => {
    const requests = SIZES.reduce((a, size) => a + mergeLoads(side.loads.get(size)!).completed, 0);
    return [
      '',
      `#### CPU profile of ${side.label}: ${agg.busy.toFixed(0)} ms busy over ${requests} requests, **${((agg.busy * 1000) / Math.max(1, requests)).toFixed(0)} µs per request**`,
      '',
      ...profileTables(agg, { top: 30, per: { count: requests, unit: 'request' } }),
    ];
  });
  const report = [
    `### Page 1 of the task list, one connection, ${utcMinute(startedAt)} UTC — \`npx tsx bench/scenarios/list-page.ts\``,
    '',
    `LIST_TARGETS=${TARGETS.join(',')}, LIST_SIZES=${SIZES.join(',')}, ${ROUNDS} rounds × ${SECONDS} s per (target, size), the targets forward then backward in each round, ` +
      `one autocannon connection on a kept-alive socket, \`GET /api/users/me/tasks?page=1\` (every task open and listed). ` +
      (SETUP_SQL ? `After the seed, on every database: \`${SETUP_SQL.replace(/\s+/g, ' ')}\`. ` : '') +
      `Nice value of the bench (its children inherit it): ${os.getPriority()}. ` +
      `Node ${process.version}, ${os.availableParallelism()} CPUs (${os.cpus()[0]?.model ?? '?'}) shared by PostgreSQL, the services and autocannon${PROFILE ? '; the services under `--cpu-prof`' : ''}. ` +
      `Load average before ${loadBefore.map((x) => x.toFixed(2)).join(' / ')}, after ${os.loadavg().map((x) => x.toFixed(2)).join(' / ')}; ${(waitQuiet.waitedMs() / 1000).toFixed(0)} s waited for other processes to calm down.`,
    '',
    ...table,
    '',
    'CPU time per request over the recorded load (schedstat: the service\'s threads; PostgreSQL\'s backends of the target\'s role; the token lookup included), less sensitive to other processes than the latencies:',
    '',
    ...cpuTable,
    '',
    ...perRound,
    '',
    'Statements (pg_stat_statements of each target\'s role over the recorded load):',
    '',
    ...statementLines,
    ...profileLines,
  ].join('\n');
  log('\n' + report);
  writeResult(session, report, { file: process.env.BENCH_OUT });
});
