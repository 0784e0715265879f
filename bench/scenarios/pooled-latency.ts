/**
 * Live-event latency through the pooler: `npx tsx bench/scenarios/pooled-latency.ts` (about
 * 30 seconds). Each run's report goes to bench/results/pooled-latency-<UTC start>.md.
 *
 *  1. PostgreSQL 15 and PgBouncer in transaction mode (Debian's packages, started as the
 *     pooled tests start them: test/helpers/pooled-database.ts), with docs/operations.md's
 *     pgbouncer.ini settings ("Several instances behind HAProxy").
 *  2. Two instances of the service (A and B) from the sources, DATABASE_URL through PgBouncer,
 *     DATABASE_DIRECT_URL (LISTEN) to PostgreSQL.
 *  3. POOLED_USERS users, each with one stream open on B; a background load of task creations
 *     on A (POOLED_IN_FLIGHT in flight, random users) for POOLED_SECONDS.
 *  4. Latency of each write's event on B: from the moment the write's request was sent on A (an
 *     upper bound of commit → receipt), and from the moment A's answer arrived (a lower bound),
 *     p50 and p99.
 *
 * Env: POOLED_SECONDS (15), POOLED_USERS (20), POOLED_IN_FLIGHT (8), BENCH_OUT.
 */
import http from 'node:http';
import os from 'node:os';
import { bouncerSettings, readDeployment } from '../../test/helpers/deployment.js';
import { mulberry32 } from '../../test/helpers/prng.js';
import { startPooledDatabase } from '../../test/helpers/pooled-database.js';
import { f1, num, utcMinute } from '../lib/env.js';
import { followEvents } from '../lib/sse.js';
import { request } from '../lib/http.js';
import { SERVICE_ENV, SOURCE_SERVICE_ARGS, startTarget } from '../lib/processes.js';
import { writeResult } from '../lib/report.js';
import { runScenario } from '../lib/session.js';
import { ascending, quantile } from '../lib/stats.js';

const SECONDS = num('POOLED_SECONDS', 15);
const USERS = num('POOLED_USERS', 20);
const IN_FLIGHT = num('POOLED_IN_FLIGHT', 8);

const agent = new http.Agent({ keepAlive: true, maxSockets: IN_FLIGHT * 2 });

/** Times of each task creation, by `<user>:<task id>`. */
const sentAt = new Map<string, number>();
const answeredAt = new Map<string, number>();
const fromSend: number[] = [];
const fromAnswer: number[] = [];
/** Events received before their write's answer was read: matched once it is. */
const early = new Map<string, number>();

function follow(base: string, user: number, token: string): Promise<() => void> {
  return followEvents(base, token, (data, now) => {
    const event = JSON.parse(data) as { type: string; data: { id: number } };
    if (event.type !== 'task.created') return;
    const key = `${user}:${event.data.id}`;
    if (answeredAt.has(key)) record(key, now);
    else early.set(key, now);
  });
}

function record(key: string, receivedAt: number): void {
  fromSend.push(receivedAt - sentAt.get(key)!);
  fromAnswer.push(Math.max(0, receivedAt - answeredAt.get(key)!));
}

runScenario('pooled-latency', async (session) => {
  session.defer(() => agent.destroy());
  const pooled = await startPooledDatabase({ bouncer: bouncerSettings(readDeployment().ini) });
  session.defer(() => pooled.stop());
  const database = await pooled.createDatabase('bench');
  const env = {
    ...SERVICE_ENV,
    DATABASE_URL: database.pooledUrl,
    DATABASE_DIRECT_URL: database.directUrl,
    DATABASE_POOL_SIZE: '10',
  };
  const [a, b] = await Promise.all([
    startTarget(session, { name: 'A', args: SOURCE_SERVICE_ARGS, env }),
    startTarget(session, { name: 'B', args: SOURCE_SERVICE_ARGS, env }),
  ]);
  const tokens: string[] = [];
  for (let u = 0; u < USERS; u++) {
    const res = await request(a.url, 'POST', '/api/users', '', { user: { username: `pooled_${u}`, password: 'password1' } });
    if (res.status !== 201) throw new Error(`register: ${res.status} ${res.text}`);
    tokens.push((JSON.parse(res.text) as { meta: { token: string } }).meta.token);
  }
  const closers = await Promise.all(tokens.map((token, u) => follow(b.url, u, token)));
  session.defer(() => closers.forEach((close) => close()));

  const random = mulberry32(7);
  let done = 0;
  let failed = 0;
  const write = async (end: number, measured: boolean) => {
    while (performance.now() < end) {
      const u = Math.floor(random() * USERS);
      const started = performance.now();
      const res = await request(a.url, 'POST', '/api/users/me/tasks', tokens[u]!, { task: { label: 'latency' } }, { agent });
      if (res.status !== 201) {
        failed++;
        continue;
      }
      if (!measured) continue;
      done++;
      const key = `${u}:${(JSON.parse(res.text) as { data: { id: number } }).data.id}`;
      sentAt.set(key, started);
      answeredAt.set(key, performance.now());
      const receivedAt = early.get(key);
      if (receivedAt !== undefined) {
        early.delete(key);
        record(key, receivedAt);
      }
    }
  };
  // Warm-up (2 s, not measured), then the measured load.
  const warm = performance.now() + 2_000;
  await Promise.all(Array.from({ length: IN_FLIGHT }, () => write(warm, false)));
  const end = performance.now() + SECONDS * 1000;
  await Promise.all(Array.from({ length: IN_FLIGHT }, () => write(end, true)));
  // The last events' delivery.
  const deadline = performance.now() + 5_000;
  while (fromSend.length < done && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));

  const p = (values: number[], q: number) => quantile(ascending(values), q);
  const report = [
    `### Live events through the pooler (${utcMinute(new Date())} UTC)`,
    '',
    `Command: \`npx tsx bench/scenarios/pooled-latency.ts\` (POOLED_SECONDS=${SECONDS}, ${USERS} users, ${IN_FLIGHT} writes in flight on A, one stream per user on B); ` +
      `PostgreSQL 15 and PgBouncer 1.18 (transaction mode, docs/operations.md's pgbouncer.ini), two instances from the sources; ${os.cpus().length} CPUs shared by all of them and this client.`,
    '',
    '| measure | value |',
    '|---|---:|',
    `| writes/s on A (201) | ${f1(done / SECONDS)} |`,
    `| failed writes | ${failed} |`,
    `| events received on B / writes measured | ${fromSend.length} / ${done} |`,
    `| delivery p50 / p99, from the write's request on A | ${f1(p(fromSend, 0.5))} ms / ${f1(p(fromSend, 0.99))} ms |`,
    `| delivery p50 / p99, from the write's answer on A | ${f1(p(fromAnswer, 0.5))} ms / ${f1(p(fromAnswer, 0.99))} ms |`,
  ].join('\n');
  console.log(report);
  if (fromSend.length < done) throw new Error(`${done - fromSend.length} events never reached B`);
  writeResult(session, report, { file: process.env.BENCH_OUT, append: true });
});
