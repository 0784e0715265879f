/**
 * What metrics cost (issue #15): `npx tsx bench/scenarios/metrics.ts` (not part of `npm run
 * bench`). Two services on one embedded PostgreSQL, the same build, one with METRICS_PORT set
 * and one without; autocannon lists the first page of a 1,000-task user on each in turn, in
 * alternating slices (off, on, on, off, …), so that the ratio is fair on a shared host.
 * A scrape of the metrics server now and then, as Prometheus would. Besides throughput it
 * reports each service's CPU time per request (from /proc, Linux), which other load on a
 * shared host disturbs less. Each run's report goes to bench/results/metrics-<UTC start>.md.
 *
 * Env: BENCH_SECONDS (40: per target, in all), BENCH_CONNECTIONS (32), BENCH_ROUNDS (8).
 */
import { freePort } from '../../test/helpers/net.js';
import { openDatabase, startDatabase } from '../lib/database.js';
import { num, utcMinute } from '../lib/env.js';
import { mergeLoads, runLoad, type LoadResult } from '../lib/load.js';
import { cpuSeconds } from '../lib/proc.js';
import { SOURCE_SERVICE_ARGS, startTarget, type Target } from '../lib/processes.js';
import { writeResult } from '../lib/report.js';
import { listFirstPage } from '../lib/scripts.js';
import { seedUser } from '../lib/seed.js';
import { runScenario } from '../lib/session.js';
import { takeTurns } from '../lib/turns.js';

const SECONDS = num('BENCH_SECONDS', 40);
const CONNECTIONS = num('BENCH_CONNECTIONS', 32);
const ROUNDS = num('BENCH_ROUNDS', 8);

runScenario('metrics', async (session) => {
  const db = await startDatabase(session);
  const { admin, url } = await openDatabase(session, db, 'bench');
  const user = await seedUser(admin, 'bench_metrics', 1_000, 20);

  const metricsPort = await freePort();
  const start = (name: string, env: Record<string, string>) =>
    startTarget(session, {
      name,
      args: SOURCE_SERVICE_ARGS,
      env: { ...env, NODE_ENV: 'production', LOG_LEVEL: 'warn', DATABASE_URL: url, DATABASE_POOL_SIZE: '10', RATE_LIMIT_PER_MINUTE: '0' },
    });
  const off = await start('metrics off', {});
  const on = await start('metrics on', { METRICS_PORT: String(metricsPort) });
  const targets: Array<{ target: Target; slices: LoadResult[]; /** CPU seconds the process used during its slices. */ cpu: number }> = [off, on].map((target) => ({ target, slices: [], cpu: 0 }));
  const list = listFirstPage(user.token);
  for (const { target } of targets) await runLoad(target.url, list, { connections: CONNECTIONS, seconds: 3 }); // warm-up

  const slice = SECONDS / ROUNDS;
  let scrapes = 0;
  const scraper = setInterval(() => {
    void fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text()).then(() => scrapes++, () => undefined);
  }, 5_000);
  await takeTurns(targets, ROUNDS, 'reverse', async (t) => {
    const cpu = cpuSeconds(t.target.pid);
    t.slices.push(await runLoad(t.target.url, list, { connections: CONNECTIONS, seconds: slice }));
    t.cpu += cpuSeconds(t.target.pid) - cpu;
  });
  clearInterval(scraper);

  const lines: string[] = [];
  const say = (line: string) => {
    console.log(line);
    lines.push(line);
  };
  const [a, b] = targets.map((t) => ({ t, r: mergeLoads(t.slices) })) as [{ t: (typeof targets)[0]; r: LoadResult }, { t: (typeof targets)[0]; r: LoadResult }];
  for (const { t, r } of [a, b]) {
    const cpuMs = (1000 * t.cpu) / r.completed;
    say(`${t.target.name}: ${r.rps.toFixed(1)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms, ${cpuMs.toFixed(3)} ms CPU/request, non-2xx ${r.non2xx}, errors ${r.errors}`);
  }
  const perSlice = a.t.slices.map((s, i) => (b.t.slices[i]!.rps / s.rps).toFixed(3));
  say(`on/off throughput: ${(b.r.rps / a.r.rps).toFixed(3)} (per round: ${perSlice.join(', ')}); ${scrapes} scrapes`);
  say(`on/off CPU per request: ${((b.t.cpu / b.r.completed) / (a.t.cpu / a.r.completed)).toFixed(3)}`);
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const samples = text.split('\n').filter((l) => l.startsWith('planning_http_requests_total') || l.startsWith('planning_db_statements_per_request_sum'));
  console.log(samples.join('\n'));
  writeResult(
    session,
    [
      `### Metrics on and off, ${utcMinute(session.startedAt)} UTC — \`npx tsx bench/scenarios/metrics.ts\``,
      '',
      `BENCH_SECONDS=${SECONDS} per target in ${ROUNDS} alternating slices, ${CONNECTIONS} connections; list tasks, page 1 of 1,000 tasks.`,
      '',
      ...lines.map((l) => `- ${l}`),
      '',
      'The metrics server\'s counters at the end:',
      '',
      '```',
      ...samples,
      '```',
    ].join('\n'),
  );
});
