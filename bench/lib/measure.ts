/**
 * One measured stretch of load on one target (a slice), and the row several slices make:
 * throughput and latency (autocannon), statements and DB time per request (pg_stat_statements
 * of the target's role), peak RSS (VmHWM, reset per slice) and peak PSS of its process tree
 * (sampled every second), and the share of the machine other processes and the hypervisor
 * took meanwhile.
 */
import type pg from 'pg';
import { f0, f1, log, sleep } from './env.js';
import { mergeLoads, runLoad, type LoadResult, type Script } from './load.js';
import { quiesce, resetStatementStats, statementStats, totals } from './pg-stats.js';
import { benchCpu, machineCpu, memory, resetPeak, treePssMb } from './proc.js';
import type { Target } from './processes.js';
import type { QuietWait } from './quiet.js';

export interface Slice {
  load: LoadResult;
  calls: number;
  requests: number;
  ms: number;
  ids: Set<string>;
  peakMb: number;
  pssMb: number;
  otherJiffies: number;
  stealJiffies: number;
  totalJiffies: number;
}

export interface Row {
  /** Which of the report's tables the row goes to. */
  table: string;
  target: string;
  scenario: string;
  load: LoadResult;
  /** In-process count (exact). */
  statements: string;
  /** pg_stat_statements calls of the target's role ÷ calls of its token lookup (one per request). */
  statementsUnderLoad: number;
  dbMsPerRequest: number;
  peakMb: number;
  /** Peak PSS of the target's process tree during the row (sampled every second). */
  pssMb: number;
  queryIds: Set<string>;
  /** Share of the machine's CPU used by processes outside the bench during the row. */
  otherCpuPercent: number;
  /** Share of the machine's CPU taken by the hypervisor for other guests during the row. */
  stealPercent: number;
}

export interface Meter {
  /**
   * One slice: waits for the target's statements to end and for the machine to be quiet,
   * runs `warmUpSeconds` of unrecorded load first if asked (after another target's turn:
   * pools, JIT, GC heap), then `seconds` of measured load.
   */
  measure(target: Target, script: Script, seconds: number, warmUpSeconds?: number): Promise<Slice>;
}

/**
 * `client`: a superuser client on the bench database; `ourPids`: the bench's own processes
 * (their CPU is not "other"); BENCH_DEBUG prints every statement of every slice.
 */
export function meter(options: { client: pg.Client; connections: number; quiet: QuietWait; ourPids: number[] }): Meter {
  const { client, connections, quiet, ourPids } = options;
  return {
    async measure(target, script, seconds, warmUpSeconds = 0) {
      await quiesce(client, target.role);
      await quiet();
      if (warmUpSeconds > 0) await runLoad(target.url, script, { connections, seconds: warmUpSeconds });
      // A request between two statements looks idle in pg_stat_activity: give those a moment.
      await sleep(500);
      await quiesce(client, target.role);
      await resetStatementStats(client);
      resetPeak(target);
      const cpu0 = machineCpu();
      const ours0 = benchCpu(ourPids);
      let pssMb = treePssMb(target.pid);
      const sampler = setInterval(() => {
        pssMb = Math.max(pssMb, treePssMb(target.pid));
      }, 1_000);
      const load = await runLoad(target.url, script, { connections, seconds }).finally(() => clearInterval(sampler));
      pssMb = Math.max(pssMb, treePssMb(target.pid));
      target.pssPeakMb = Math.max(target.pssPeakMb, pssMb);
      const cpu1 = machineCpu();
      const ours1 = benchCpu(ourPids);
      await sleep(500);
      await quiesce(client, target.role);
      const stats = await statementStats(client, target.role);
      if (process.env.BENCH_DEBUG) {
        for (const x of stats) log(`    ${target.role} ${x.queryid} calls ${x.calls} ${x.totalMs.toFixed(0)} ms  ${x.query.replace(/\s+/g, ' ').slice(0, 160)}`);
      }
      const sum = totals(stats);
      const peakMb = memory(target.pid).hwmMb;
      target.peakMb = Math.max(target.peakMb, peakMb);
      return {
        load,
        calls: sum.calls,
        requests: sum.requests,
        ms: sum.ms,
        ids: sum.ids,
        peakMb,
        pssMb,
        otherJiffies: Math.max(0, cpu1.procs - cpu0.procs - (ours1 - ours0)),
        stealJiffies: cpu1.steal - cpu0.steal,
        totalJiffies: cpu1.total - cpu0.total,
      };
    },
  };
}

/** The row of a target's slices of one scenario (percentiles over all their responses), logged as one line. */
export function rowOf(table: string, target: Target, name: string, slices: Slice[], statements: string): Row {
  const sum = (f: (s: Slice) => number) => slices.reduce((a, s) => a + f(s), 0);
  const load = mergeLoads(slices.map((s) => s.load));
  const row: Row = {
    table,
    target: target.name,
    scenario: name,
    load,
    statements,
    statementsUnderLoad: sum((s) => s.calls) / Math.max(1, sum((s) => s.requests)),
    dbMsPerRequest: sum((s) => s.ms) / Math.max(1, sum((s) => s.requests)),
    peakMb: Math.max(...slices.map((s) => s.peakMb)),
    pssMb: Math.max(...slices.map((s) => s.pssMb)),
    queryIds: new Set(slices.flatMap((s) => [...s.ids])),
    otherCpuPercent: (sum((s) => s.otherJiffies) / Math.max(1, sum((s) => s.totalJiffies))) * 100,
    stealPercent: (sum((s) => s.stealJiffies) / Math.max(1, sum((s) => s.totalJiffies))) * 100,
  };
  log(
    `${target.name.padEnd(10)} ${name.padEnd(30)} ${f0(load.rps).padStart(6)} req/s  p50 ${load.p50} ms  p99 ${load.p99} ms  ` +
      `non-2xx ${load.non2xx}  errors ${load.errors}  SQL/req ${statements} (load ${f1(row.statementsUnderLoad)})  ` +
      `DB ${row.dbMsPerRequest.toFixed(2)} ms/req  peak ${f0(row.peakMb)} MB  PSS ${f0(row.pssMb)} MB  other CPU ${f0(row.otherCpuPercent)} %  steal ${f0(row.stealPercent)} %` +
      (slices.length > 1 ? `  (${slices.length} slices)` : '') +
      (load.firstFailure ? `  first failure: ${load.firstFailure}` : ''),
  );
  return row;
}

/** Rows as a Markdown table. */
export function rowTable(rows: Row[]): string[] {
  return [
    '| target | scenario | req/s | p50 ms | p99 ms | non-2xx | errors | SQL/req (in-process) | SQL/req (under load) | DB ms/req | peak RSS MB | peak PSS MB | other CPU % |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.target} | ${r.scenario} | ${f0(r.load.rps)} | ${r.load.p50} | ${r.load.p99} | ${r.load.non2xx} | ${r.load.errors} | ${r.statements} | ${f1(r.statementsUnderLoad)} | ${r.dbMsPerRequest.toFixed(2)} | ${f0(r.peakMb)} | ${f0(r.pssMb)} | ${f0(r.otherCpuPercent)} |`,
    ),
  ];
}
