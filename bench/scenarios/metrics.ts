/**
 * What metrics cost (issue #15): `npx tsx bench/metrics.ts` (not part of `npm run bench`).
 * Two services on one embedded PostgreSQL, the same build, one with METRICS_PORT set and one
 * without; autocannon lists the first page of a 1,000-task user on each in turn, in
 * alternating slices (off, on, on, off, …), so that the ratio is fair on a shared host.
 * A scrape of the metrics server now and then, as Prometheus would. Besides throughput it
 * reports each service's CPU time per request (from /proc, Linux), which other load on a
 * shared host disturbs less.
 *
 * Env: BENCH_SECONDS (40: per target, in all), BENCH_CONNECTIONS (32), BENCH_ROUNDS (8).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { openOrm } from '../../src/db/database.js';
import { startEmbeddedDatabase } from '../../src/db/embedded.js';
import { freePort } from '../../test/helpers/net.js';
import { mergeLoads, runLoad, type LoadResult, type Script } from '../lib/load.js';
import { seedUser } from '../lib/seed.js';

const num = (name: string, fallback: number) => (process.env[name] ? Number(process.env[name]) : fallback);
const SECONDS = num('BENCH_SECONDS', 40);
const CONNECTIONS = num('BENCH_CONNECTIONS', 32);
const ROUNDS = num('BENCH_ROUNDS', 8);
const ROOT = path.resolve(import.meta.dirname, '../..');

interface Target {
  name: string;
  url: string;
  child: ChildProcess;
  slices: LoadResult[];
  /** CPU seconds the process used during its slices. */
  cpu: number;
}

/** User + system CPU seconds of a process so far (Linux). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
}

async function startTarget(name: string, databaseUrl: string, env: Record<string, string>): Promise<Target> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      ...env,
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
      PORT: String(port),
      HOST: '127.0.0.1',
      DATABASE_URL: databaseUrl,
      DATABASE_POOL_SIZE: '10',
      RATE_LIMIT_PER_MINUTE: '0',
    },
  });
  const url = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + 60_000; ; ) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}`);
    if (await fetch(`${url}/readyz`).then((r) => r.ok, () => false)) break;
    if (Date.now() > deadline) throw new Error(`${name} did not start`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { name, url, child, slices: [], cpu: 0 };
}

async function main() {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'planning-bench-metrics-'));
  await fs.chmod(dir, 0o755);
  const db = await startEmbeddedDatabase({ dataDir: dir, settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' } });
  const targets: Target[] = [];
  try {
    await db.ensureDatabase('bench');
    const url = db.urlFor('bench');
    await (await openOrm(url, { migrate: true })).close(true);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    const user = await seedUser(admin, 'bench_metrics', 1_000, 20);
    await admin.end();

    const metricsPort = await freePort();
    const off = await startTarget('metrics off', url, {});
    const on = await startTarget('metrics on', url, { METRICS_PORT: String(metricsPort) });
    targets.push(off, on);
    const list: Script = () => () => ({ method: 'GET', path: '/api/users/me/tasks?page=1', token: user.token });
    for (const target of targets) await runLoad(target.url, list, { connections: CONNECTIONS, seconds: 3 }); // warm-up

    const slice = SECONDS / ROUNDS;
    let scrapes = 0;
    const scraper = setInterval(() => {
      void fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text()).then(() => scrapes++, () => undefined);
    }, 5_000);
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? [off, on] : [on, off];
      for (const target of order) {
        const cpu = cpuSeconds(target.child.pid!);
        target.slices.push(await runLoad(target.url, list, { connections: CONNECTIONS, seconds: slice }));
        target.cpu += cpuSeconds(target.child.pid!) - cpu;
      }
    }
    clearInterval(scraper);

    const [a, b] = targets.map((t) => ({ t, r: mergeLoads(t.slices) }));
    for (const { t, r } of [a!, b!]) {
      const cpuMs = (1000 * t.cpu) / r.completed;
      console.log(`${t.name}: ${r.rps.toFixed(1)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms, ${cpuMs.toFixed(3)} ms CPU/request, non-2xx ${r.non2xx}, errors ${r.errors}`);
    }
    const perSlice = off.slices.map((s, i) => (on.slices[i]!.rps / s.rps).toFixed(3));
    console.log(`on/off throughput: ${(b!.r.rps / a!.r.rps).toFixed(3)} (per round: ${perSlice.join(', ')}); ${scrapes} scrapes`);
    console.log(`on/off CPU per request: ${((on.cpu / b!.r.completed) / (off.cpu / a!.r.completed)).toFixed(3)}`);
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    console.log(text.split('\n').filter((l) => l.startsWith('planning_http_requests_total') || l.startsWith('planning_db_statements_per_request_sum')).join('\n'));
  } finally {
    for (const t of targets) t.child.kill('SIGTERM');
    await Promise.all(targets.map((t) => new Promise((r) => (t.child.exitCode !== null ? r(null) : t.child.once('exit', r)))));
    await db.stop().catch(() => undefined);
    await fs.rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
