/**
 * CPU profile of the built service under the write scenarios: `npm run bench:profile`. Each
 * run's report goes to bench/results/profile-<UTC start>.md.
 *
 * 1. An embedded PostgreSQL (as the throughput scenario: fsync off, pg_stat_statements),
 *    database `bench`, migrated; seeds bench_main (10,000 tasks over 200 projects, 3,000 planned).
 * 2. The service built; then, for each scenario (change task state, create task, get task) separately, the
 *    service as `node --cpu-prof --cpu-prof-dir=<tmp> dist/src/main.js` with the bench's
 *    environment (production, warn logs, rate limiter off), connecting as its own role; 3 s
 *    of unrecorded warm-up, PROFILE_SECONDS (10) of load at BENCH_CONNECTIONS (32), then
 *    SIGINT so that Node writes the .cpuprofile on its way out.
 * 3. From the profile, only the samples taken during the load: the top 25 frames by self
 *    time, and self time by package (node_modules/<pkg>; node: internals; the service's
 *    own src/ by folder; V8 builtins with no script; GC, idle, program).
 * 4. Round trips per request from pg_stat_statements (the role's calls ÷ its token lookups),
 *    with each statement's calls per request and mean time.
 * 5. Time in each write function per call (`track_functions = pl`): where a write's database
 *    time goes (the lock's wait in `key_open`, the operation's function, `apply`'s own work).
 * 6. The owner's lock hold time per write, in a second short run of the same requests one at a
 *    time, every statement logged with its duration (log_min_duration_statement = 0, read from
 *    the embedded server's stderr). A write is one statement, `select w_….apply(…)`, that takes
 *    the lock near its start and commits at its end: alone (nothing to wait for), its duration
 *    is the time it holds the lock, an upper bound (the key's check comes before the lock).
 *    Logging costs the database time, so this run's throughput is not reported.
 * 7. With get task: the fewest floor (bench/floors/fewest-floor.ts) profiled under the same reads,
 *    and each process's busy CPU per request split into its socket writes and the rest: both
 *    send the same two statements and one response, so the writes cost them alike, and the rest
 *    is what the service's layers (Express, tRPC, MikroORM, its own code) add.
 *
 * Env: PROFILE_SECONDS (10), BENCH_CONNECTIONS (32), PROFILE_OUT (also write the Markdown there),
 *      PROFILE_ONLY (comma-separated beginnings of the scenarios' names: only those), PROFILE_KEEP
 *      (a folder: each .cpuprofile is copied there, for DevTools or a closer reading).
 */
import { copyFileSync, readdirSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { aggregate, type Aggregate, type CpuProfile } from '../lib/cpu-profile.js';
import { createRoles, openDatabase, startDatabase, STATEMENT_STATS } from '../lib/database.js';
import { log, num, sleep, utcMinute } from '../lib/env.js';
import { runLoad, type LoadResult, type Script } from '../lib/load.js';
import { resetStatementStats, statementStats, totals } from '../lib/pg-stats.js';
import { buildService, startBuiltService, startFloor, stopChild } from '../lib/processes.js';
import { writeResult } from '../lib/report.js';
import { createTask, flipTaskStates, readStates } from '../lib/scripts.js';
import { seedMainUser, taskIdsByOrder } from '../lib/seed.js';
import { runScenario } from '../lib/session.js';
import { ascending, quantile } from '../lib/stats.js';

/** PROFILE_ONLY: beginnings of the scenarios' names (`PROFILE_ONLY="get"`); unset, every scenario. */
const ONLY = process.env.PROFILE_ONLY?.split(',').map((name) => name.trim().toLowerCase()).filter(Boolean);
const SECONDS = num('PROFILE_SECONDS', 10);
const CONNECTIONS = num('BENCH_CONNECTIONS', 32);
const ROLE = 'bench_profiled';

runScenario('profile', async (session) => {
  const { startedAt: started, loadBefore } = session;
  /** PostgreSQL's log lines while collecting. */
  let pgLog: string[] | undefined;
  const db = await startDatabase(session, {
    // track_functions: the time spent in each write function (`pg_stat_user_functions`).
    settings: { max_connections: '100', ...STATEMENT_STATS, track_functions: 'pl', log_line_prefix: '%m [%p] ' },
    // PostgreSQL's log lines reach this process through the embedded server's stderr.
    logger: {
      debug: (_obj, line) => {
        if (pgLog) pgLog.push(line);
      },
      info: () => undefined,
      warn: () => undefined,
      error: (obj, msg) => console.error(msg, obj),
    },
  });
  const report: string[] = [];
  const { admin, q, roleUrl } = await openDatabase(session, db, 'bench', { statementStats: true });
  await createRoles(q, [ROLE]);
  const main = await seedMainUser(admin);
  await q('vacuum analyze');
  const planned = await taskIdsByOrder(admin, main.id, 1, 3_000);
  buildService();

  const states = new Map<number, string>();
  const changeState: Script = flipTaskStates(planned, states, main.token, CONNECTIONS);
  let created = 0;
  const create: Script = createTask(main.token, () => `profiled task ${++created}`);
  const loadStates = () => readStates(admin, 'tasks', planned, states);

  // A read beside the writes: what a request costs the service when its database work is one row.
  const getTask: Script = () => () => ({ method: 'GET', path: `/api/tasks/${planned[0]}`, token: main.token });
  const scenarios = ([['change task state', changeState], ['create task', create], ['get task', getTask]] as Array<[string, Script]>)
    .filter(([name]) => !ONLY || ONLY.some((prefix) => name.startsWith(prefix)));
  const profiledLoads = new Map<string, { agg: Aggregate; load: LoadResult }>();
  for (const [name, script] of scenarios) {
    const profDir = path.join(session.dir, `prof-${name.replace(/\W+/g, '-')}`);
    await fs.mkdir(profDir);
    const service = await startBuiltService(session, { name: `service (${name})`, role: ROLE, roleUrl, nodeFlags: ['--cpu-prof', `--cpu-prof-dir=${profDir}`] });
    const { url, child } = service;
    await loadStates();
    await runLoad(url, script, { connections: CONNECTIONS, seconds: 3 });
    await sleep(300);
    await loadStates();
    await resetStatementStats(admin);
    await admin.query('select pg_stat_reset()');
    const from = Number(process.hrtime.bigint() / 1000n);
    const load = await runLoad(url, script, { connections: CONNECTIONS, seconds: SECONDS });
    const to = Number(process.hrtime.bigint() / 1000n);
    await sleep(300);
    const stats = await statementStats(admin, ROLE);
    const { requests, calls } = totals(stats);
    const functions = await functionStats(admin);

    // The lock's hold time: the same requests again, one at a time, every statement logged.
    await loadStates();
    await q(`alter system set log_min_duration_statement = 0`);
    await q('select pg_reload_conf()');
    await sleep(300);
    pgLog = [];
    const logged = await runLoad(url, script, { connections: 1, seconds: Math.min(5, SECONDS) });
    await q(`alter system reset log_min_duration_statement`);
    await q('select pg_reload_conf()');
    await sleep(500);
    const hold = lockHold(pgLog.join('\n'));
    pgLog = undefined;

    const { agg, window } = await stopAndAggregate(child, profDir, from, to, name);
    profiledLoads.set(name, { agg, load });
    const busy = agg.total - (agg.buckets.get('(idle)') ?? 0);
    const pct = (ms: number) => ((ms / agg.total) * 100).toFixed(1);
    const pctBusy = (ms: number, bucket: string) => (bucket === '(idle)' ? '—' : ((ms / busy) * 100).toFixed(1));
    report.push(
      `#### ${name}: ${load.rps.toFixed(0)} req/s, p50 ${load.p50} ms, p99 ${load.p99} ms, non-2xx ${load.non2xx} (${CONNECTIONS} connections, ${SECONDS} s)`,
      '',
      `Round trips (statements) per request, pg_stat_statements: **${(calls / Math.max(1, requests)).toFixed(2)}** (${calls} calls ÷ ${requests} token lookups).`,
      '',
      '| statement | calls/request | mean ms |',
      '|---|---:|---:|',
      ...stats.map((s) => `| \`${s.query.replace(/\s+/g, ' ').replace(/\|/g, '\\|').slice(0, 110)}\` | ${(s.calls / Math.max(1, requests)).toFixed(2)} | ${s.meanMs.toFixed(3)} |`),
      '',
      ...(functions.length === 0
        ? []
        : [
            'Time in the write functions per call, under this load (`track_functions`; total includes the functions it calls, and the wait for the owner\'s lock in `key_open`):',
            '',
            '| function | calls | total ms per call | self ms per call |',
            '|---|---:|---:|---:|',
            ...functions.map((f) => `| \`${f.name}\` | ${f.calls} | ${f.totalMs.toFixed(3)} | ${f.selfMs.toFixed(3)} |`),
            '',
          ]),
      `Owner's lock held per write (the duration of its one call of apply, one request at a time: ${hold.count} writes in ${Math.min(5, SECONDS)} s with every statement logged, ${logged.rps.toFixed(0)} req/s meanwhile): ` +
        `median **${hold.median.toFixed(2)} ms**, mean ${hold.mean.toFixed(2)} ms, p90 ${hold.p90.toFixed(2)} ms.`,
      '',
      `CPU profile: ${agg.total.toFixed(0)} ms of samples (${window}), of which ${busy.toFixed(0)} ms busy (not idle): the service used ${((busy / ((to - from) / 1000)) * 100).toFixed(0)} % of one core. ` +
        '"V8 builtins and native" includes `writeBuffer`, the socket write: with loopback TCP the kernel delivers the bytes inside that call, so each round trip to PostgreSQL and each response costs CPU there.',
      '',
      '| self time by package | ms | % | % of busy |',
      '|---|---:|---:|---:|',
      ...[...agg.buckets].sort((a, b) => b[1] - a[1]).map(([b, ms]) => `| ${b} | ${ms.toFixed(0)} | ${pct(ms)} | ${pctBusy(ms, b)} |`),
      '',
      '| top 25 frames by self time | package | ms | % | % of busy |',
      '|---|---|---:|---:|---:|',
      ...[...agg.frames]
        .sort((a, b) => b[1].ms - a[1].ms)
        .slice(0, 25)
        .map(([f, e]) => `| \`${f.replace(/\|/g, '\\|')}\` | ${e.bucket} | ${e.ms.toFixed(0)} | ${pct(e.ms)} | ${pctBusy(e.ms, e.bucket)} |`),
      '',
    );
    log(`profiled ${name}: ${load.rps.toFixed(0)} req/s, ${(calls / Math.max(1, requests)).toFixed(2)} statements/request, lock held ${hold.median.toFixed(1)} ms (median)`);
  }
  // The same reads of the fewest floor: what of a request's CPU is the socket writes, which
  // both make alike (two statements and a response), and what is the rest of each process.
  const served = profiledLoads.get('get task');
  if (served) {
    const profDir = path.join(session.dir, 'prof-fewest-get-task');
    await fs.mkdir(profDir);
    const floor = await startFloor(session, { name: 'fewest floor (get task)', role: ROLE, file: 'fewest-floor.ts', roleUrl, nodeFlags: ['--cpu-prof', `--cpu-prof-dir=${profDir}`] });
    await runLoad(floor.url, getTask, { connections: CONNECTIONS, seconds: 3 });
    const from = Number(process.hrtime.bigint() / 1000n);
    const load = await runLoad(floor.url, getTask, { connections: CONNECTIONS, seconds: SECONDS });
    const to = Number(process.hrtime.bigint() / 1000n);
    const { agg } = await stopAndAggregate(floor.child, profDir, from, to, 'fewest get task');
    const rows = [
      ['service', served],
      ['fewest floor', { agg, load }],
    ] as const;
    report.push(
      `#### get task, the service against the fewest floor (${CONNECTIONS} connections, ${SECONDS} s each)`,
      '',
      'Busy time of the thread per request (µs, profile samples that are not idle ÷ responses: its CPU, and the moments a backend it woke took its core): the socket writes (`writev`, `writeUtf8String`, `writeBuffer`: ' +
        'with loopback TCP the kernel delivers the bytes inside the call) and the rest of the process (JavaScript, GC, Node\'s internals).',
      '',
      '| process | req/s | busy µs/request | socket writes µs | the rest µs | GC µs |',
      '|---|---:|---:|---:|---:|---:|',
      ...rows.map(([who, { agg: a, load: l }]) => {
        const per = (ms: number) => ((ms * 1000) / Math.max(1, l.completed)).toFixed(0);
        const writes = [...a.frames].filter(([f]) => SOCKET_WRITES.has(f)).reduce((sum, [, e]) => sum + e.ms, 0);
        const gc = a.buckets.get('(garbage collector)') ?? 0;
        return `| ${who} | ${l.rps.toFixed(0)} | ${per(a.busy)} | ${per(writes)} | ${per(a.busy - writes)} | ${per(gc)} |`;
      }),
      '',
    );
  }
  const head = [
    `### CPU profile, ${utcMinute(started)} UTC — \`npm run bench:profile\``,
    '',
    `Node ${process.version}, ${os.availableParallelism()} CPUs shared by PostgreSQL, the service and autocannon; load average before ${loadBefore.map((x) => x.toFixed(2)).join(' / ')}, after ${os.loadavg().map((x) => x.toFixed(2)).join(' / ')}.`,
    '',
  ];
  const text = [...head, ...report].join('\n');
  log('\n' + text);
  writeResult(session, text, { file: process.env.PROFILE_OUT });
});

/** The frames in which Node hands bytes to a socket (frameName's form: native frames have no script). */
const SOCKET_WRITES = new Set(['writev', 'writeUtf8String', 'writeBuffer', 'writeLatin1String']);

/**
 * Stops a process started with `--cpu-prof` (SIGINT: Node writes the profile on its way out) and
 * aggregates the samples taken between `from` and `to`; copied to PROFILE_KEEP when set.
 */
async function stopAndAggregate(child: ChildProcess, profDir: string, from: number, to: number, name: string): Promise<{ agg: Aggregate; window: string }> {
  await stopChild(child, 'SIGINT', 20_000);
  const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error(`no .cpuprofile written for ${name}`);
  const profile = JSON.parse(readFileSync(path.join(profDir, file), 'utf8')) as CpuProfile;
  if (process.env.PROFILE_KEEP) copyFileSync(path.join(profDir, file), path.join(process.env.PROFILE_KEEP, `${name.replace(/\W+/g, '-')}.cpuprofile`));
  const agg = aggregate(profile, from, to);
  if (agg.kept >= 100) return { agg, window: 'the samples taken during the load' };
  return { agg: aggregate(profile, -Infinity, Infinity), window: "every sample of the process (the load window did not match the profile's clock)" };
}

/**
 * From a PostgreSQL log with every statement's duration: the durations of the write calls
 * (`select w_<hash>.apply(…)`), each the time its statement held the owner's lock at most.
 */
function lockHold(text: string) {
  const line = /duration: ([\d.]+) ms\s+(?:statement|execute [^:]*): select w_[0-9a-f]+\.apply\(/;
  const holds = text.split('\n').flatMap((raw) => {
    const m = line.exec(raw);
    return m ? [Number(m[1])] : [];
  });
  const sorted = ascending(holds);
  const at = (p: number) => quantile(sorted, p, 0);
  return { count: sorted.length, median: at(0.5), p90: at(0.9), mean: sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length) };
}

/**
 * Calls and mean times of the PL/pgSQL functions since the last `pg_stat_reset()`, most called
 * first. A backend reports its counts once a second at most, so the last second's calls may be
 * missing from the counts; the means are those of the calls reported.
 */
async function functionStats(client: Awaited<ReturnType<typeof openDatabase>>['admin']) {
  const { rows } = await client.query<{ name: string; calls: string; total: number; self: number }>(
    `select funcname as name, calls, total_time as total, self_time as self from pg_stat_user_functions where calls > 0 order by calls desc, funcname`,
  );
  return rows.map((r) => ({ name: r.name, calls: Number(r.calls), totalMs: r.total / Number(r.calls), selfMs: r.self / Number(r.calls) }));
}
