/**
 * A V8 CPU profile (`node --cpu-prof`) read for a report: self time by frame and by where the
 * frame's code lives (a package of node_modules, Node's internals, the service's src/ folder,
 * V8 builtins, GC, idle), over the samples of a time window. Used by `bench/scenarios/profile.ts`
 * and `bench/scenarios/webhooks.ts`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  /** µs, on the clock of process.hrtime (CLOCK_MONOTONIC) on Linux. */
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** The one `.cpuprofile` written in `dir`. */
export function readProfile(dir: string): CpuProfile {
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error(`no .cpuprofile in ${dir}`);
  return JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as CpuProfile;
}

/** Where a frame's self time goes: a package, Node's internals, the service's src/ folder, V8, GC… */
export function bucketOf(frame: ProfileNode['callFrame']): string {
  const { url, functionName } = frame;
  if (!url) {
    if (['(garbage collector)', '(idle)', '(program)', '(root)'].includes(functionName)) return functionName;
    return '(V8 builtins and native, no script)';
  }
  const modules = url.lastIndexOf('/node_modules/');
  if (modules >= 0) {
    const rest = url.slice(modules + '/node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith('node:')) return 'node: internals';
  const src = /\/dist\/src\/([^/]+)\//.exec(url) ?? /\/dist\/src\/()/.exec(url);
  if (src) return `service src/${src[1]}`;
  return `other: ${url.slice(0, 60)}`;
}

export function frameName(frame: ProfileNode['callFrame']): string {
  const { url, functionName, lineNumber } = frame;
  const where = url ? `${url.replace(/^.*\/node_modules\//, '').replace(/^.*\/dist\//, '').replace(/^file:\/\//, '')}:${lineNumber + 1}` : '';
  return `${functionName || '(anonymous)'}${where ? ` ${where}` : ''}`;
}

export interface Aggregate {
  frames: Map<string, { ms: number; bucket: string }>;
  buckets: Map<string, number>;
  /** ms of samples in the window. */
  total: number;
  /** ms of them not idle. */
  busy: number;
  kept: number;
}

/** Self time (ms) by frame and by bucket, over the samples taken in [from, to] (µs, the profile's clock). */
export function aggregate(profile: CpuProfile, from: number, to: number): Aggregate {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const frames = new Map<string, { ms: number; bucket: string }>();
  const buckets = new Map<string, number>();
  let t = profile.startTime;
  let total = 0;
  let kept = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i]!;
    if (t < from || t > to) continue;
    // A sample stands for the time until the next one.
    const ms = (profile.timeDeltas[i + 1] ?? profile.timeDeltas[i]!) / 1000;
    const node = byId.get(profile.samples[i]!)!;
    const key = frameName(node.callFrame);
    const bucket = bucketOf(node.callFrame);
    const entry = frames.get(key) ?? { ms: 0, bucket };
    entry.ms += ms;
    frames.set(key, entry);
    buckets.set(bucket, (buckets.get(bucket) ?? 0) + ms);
    total += ms;
    kept++;
  }
  return { frames, buckets, total, busy: total - (buckets.get('(idle)') ?? 0), kept };
}

/** Markdown tables of an aggregate: buckets, then the top frames, each with ms per `unit` (e.g. per delivery) when given. */
export function profileTables(agg: Aggregate, options: { top?: number; per?: { count: number; unit: string } } = {}): string[] {
  const { top = 20, per } = options;
  const busyPct = (ms: number, bucket: string) => (bucket === '(idle)' ? '—' : ((ms / Math.max(1e-9, agg.busy)) * 100).toFixed(1));
  const perCol = (ms: number) => (per ? ` ${((ms * 1000) / Math.max(1, per.count)).toFixed(0)} |` : '');
  const perHead = per ? ` µs per ${per.unit} |` : '';
  const perSep = per ? '---:|' : '';
  return [
    `| self time by package | ms | % of busy |${perHead}`,
    `|---|---:|---:|${perSep}`,
    ...[...agg.buckets].sort((a, b) => b[1] - a[1]).map(([b, ms]) => `| ${b} | ${ms.toFixed(0)} | ${busyPct(ms, b)} |${perCol(ms)}`),
    '',
    `| top ${top} frames by self time | package | ms | % of busy |${perHead}`,
    `|---|---|---:|---:|${perSep}`,
    ...[...agg.frames]
      .filter(([, e]) => e.bucket !== '(idle)')
      .sort((a, b) => b[1].ms - a[1].ms)
      .slice(0, top)
      .map(([f, e]) => `| \`${f.replace(/\|/g, '\\|')}\` | ${e.bucket} | ${e.ms.toFixed(0)} | ${busyPct(e.ms, e.bucket)} |${perCol(e.ms)}`),
  ];
}
