/**
 * Change-log bench: `npm run bench:events` (also the second part of `npm run bench`).
 * Each run's report goes to bench/results/events-<UTC start>.md.
 *
 *  1. An embedded PostgreSQL in a temp folder with pg_stat_statements; 100 users seeded by
 *     SQL, each with 20 tasks and a known token.
 *  2. The service as a child process (`node --import tsx src/main.ts`, LOG_LEVEL=warn).
 *  3. Its RSS at rest, then with 1,000 idle event streams open (10 per user, the per-token
 *     limit): the difference per stream.
 *  4. A mixed write workload (task creations and state changes over the 100 users, 16 in
 *     flight) in turns with and without the 1,000 streams open (EVENTS_ROUNDS slices each),
 *     for the cost of live delivery on the writes.
 *  5. Delivery latency of every task creation's event to every stream of its user: from the
 *     moment the write's request was sent (an upper bound of commit → receipt) and from the
 *     moment its answer arrived (a lower bound), p50 and p99.
 *  6. The change log's share of the writes' database time: the append statement's total
 *     execution time ÷ that of every statement of the service's role (pg_stat_statements).
 *
 * Env: EVENTS_SECONDS (10: seconds of writes in each of the two setups), EVENTS_ROUNDS (5),
 *      EVENTS_STREAMS (1000), EVENTS_USERS (100), BENCH_OUT (append the report to this file).
 */
import http from 'node:http';
import os from 'node:os';
import { mulberry32 } from '../../test/helpers/prng.js';
import { openDatabase, startDatabase, STATEMENT_STATS } from '../lib/database.js';
import { num, sleep, utcMinute } from '../lib/env.js';
import { request } from '../lib/http.js';
import { resetStatementStats, statementStats } from '../lib/pg-stats.js';
import { memory } from '../lib/proc.js';
import { SERVICE_ENV, SOURCE_SERVICE_ARGS, startTarget } from '../lib/processes.js';
import { writeResult } from '../lib/report.js';
import { seedUser, type SeededUser } from '../lib/seed.js';
import { followEvents } from '../lib/sse.js';
import { runScenario } from '../lib/session.js';
import { ascending, quantile } from '../lib/stats.js';

const SECONDS = num('EVENTS_SECONDS', 10);
const ROUNDS = num('EVENTS_ROUNDS', 5);
const STREAMS = num('EVENTS_STREAMS', 1000);
const USERS = num('EVENTS_USERS', 100);
const IN_FLIGHT = 16;

const agent = new http.Agent({ keepAlive: true, maxSockets: IN_FLIGHT * 2 });

/** Times of the task creations, by `<user id>:<task id>:<state>` of the document their event carries. */
const sentAt = new Map<string, number>();
const answeredAt = new Map<string, number>();
const delays: { fromSend: number[]; fromAnswer: number[] } = { fromSend: [], fromAnswer: [] };
let measuring = false;

interface OpenStream {
  close(): void;
}

async function openStream(base: string, user: SeededUser): Promise<OpenStream> {
  const close = await followEvents(base, user.token, (data, now) => {
    if (!measuring) return;
    const event = JSON.parse(data) as { data: { id: number; attributes?: { state?: string } } };
    const key = `${user.id}:${event.data.id}:${event.data.attributes?.state}`;
    const sent = sentAt.get(key);
    const answered = answeredAt.get(key);
    if (sent !== undefined) delays.fromSend.push(now - sent);
    if (answered !== undefined) delays.fromAnswer.push(Math.max(0, now - answered));
  });
  return { close };
}

/** p-th percentile (0–100) of the values, by index ⌊p/100 × n⌋ of the sorted values. */
const percentile = (values: number[], p: number) => quantile(ascending(values), p / 100);

/** The mixed write workload for `ms`: creations and state changes of random users' tasks. */
type BenchUser = SeededUser & { taskIds: number[] };

async function writes(base: string, users: BenchUser[], ms: number, seed: number): Promise<{ done: number; failed: number }> {
  const random = mulberry32(seed);
  const end = performance.now() + ms;
  let done = 0;
  let failed = 0;
  const worker = async () => {
    while (performance.now() < end) {
      const user = users[Math.floor(random() * users.length)]!;
      const create = random() < 0.5;
      const started = performance.now();
      if (create) {
        const res = await request(base, 'POST', '/api/users/me/tasks', user.token, { task: { label: 'bench' } }, { agent });
        const id = res.status === 201 ? (JSON.parse(res.text) as { data: { id: number } }).data.id : undefined;
        if (id === undefined) failed++;
        else {
          done++;
          sentAt.set(`${user.id}:${id}:started`, started);
          answeredAt.set(`${user.id}:${id}:started`, performance.now());
        }
      } else {
        const taskId = user.taskIds[Math.floor(random() * user.taskIds.length)]!;
        const state = random() < 0.5 ? 'planned' : 'abandoned';
        const res = await request(base, 'PUT', `/api/tasks/${taskId}/state`, user.token, { task: { state } }, { agent });
        // A refused move (422) is a write that ran, without an event.
        if (res.status === 200 || res.status === 422) done++;
        else failed++;
      }
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  return { done, failed };
}

runScenario('events', async (session) => {
  session.defer(() => agent.destroy());
  const db = await startDatabase(session, { settings: { max_connections: '200', ...STATEMENT_STATS } });
  const { admin, url } = await openDatabase(session, db, 'bench', { statementStats: true });
  const users: BenchUser[] = [];
  for (let i = 0; i < USERS; i++) {
    const user = await seedUser(admin, `events_${i}`, 20, 2);
    const ids = (await admin.query<{ id: number }>('select id from tasks where user_id = $1', [user.id])).rows.map((r) => r.id);
    users.push({ ...user, taskIds: ids });
  }

  // The service connects as the superuser, as this client does: its statements are the role's.
  const service = await startTarget(session, { name: 'service', args: SOURCE_SERVICE_ARGS, env: { ...SERVICE_ENV, DATABASE_URL: url } });
  const base = service.url;
  // Warm up the paths the bench uses.
  await writes(base, users, 2_000, 1);
  await sleep(500);
  const restMb = memory(service.pid).rssMb;

  const streams: OpenStream[] = [];
  const openAll = async () => {
    for (let i = 0; i < STREAMS; i++) streams.push(await openStream(base, users[i % users.length]!));
  };
  await openAll();
  await sleep(2_000);
  const openMb = memory(service.pid).rssMb;

  // Turns: with the streams open, then without, ROUNDS times.
  const slice = (SECONDS * 1000) / ROUNDS;
  const totals = { with: { done: 0, failed: 0 }, without: { done: 0, failed: 0 } };
  await resetStatementStats(admin);
  for (let round = 0; round < ROUNDS; round++) {
    measuring = true;
    const withStreams = await writes(base, users, slice, 100 + round);
    measuring = false;
    totals.with.done += withStreams.done;
    totals.with.failed += withStreams.failed;
    for (const s of streams.splice(0)) s.close();
    await sleep(300);
    const without = await writes(base, users, slice, 200 + round);
    totals.without.done += without.done;
    totals.without.failed += without.failed;
    if (round < ROUNDS - 1) await openAll();
  }
  const stats = await statementStats(admin);
  const all = stats.reduce((n, s) => n + s.totalMs, 0);
  const log = stats.filter((s) => s.query.includes('insert into events')).reduce((n, s) => n + s.totalMs, 0);

  const f = (n: number) => n.toFixed(1);
  const report = [
    `### Change log (${utcMinute(new Date())} UTC)`,
    '',
    `Command: \`npm run bench:events\` (EVENTS_SECONDS=${SECONDS}, EVENTS_ROUNDS=${ROUNDS}, ${STREAMS} streams over ${USERS} users, ${IN_FLIGHT} writes in flight); ${os.cpus().length} CPUs shared by PostgreSQL, the service and this client.`,
    '',
    '| measure | value |',
    '|---|---:|',
    `| service RSS at rest / with ${STREAMS} idle streams | ${f(restMb)} MB / ${f(openMb)} MB |`,
    `| memory per idle stream | ${f(((openMb - restMb) * 1024) / STREAMS)} KB |`,
    `| writes/s without streams / with ${STREAMS} streams | ${f(totals.without.done / SECONDS)} / ${f(totals.with.done / SECONDS)} |`,
    `| writes with streams ÷ without | ${(totals.with.done / Math.max(1, totals.without.done)).toFixed(2)} |`,
    `| failed writes (with / without) | ${totals.with.failed} / ${totals.without.failed} |`,
    `| deliveries measured | ${delays.fromSend.length} |`,
    `| delivery p50 / p99, from the write's request | ${f(percentile(delays.fromSend, 50))} ms / ${f(percentile(delays.fromSend, 99))} ms |`,
    `| delivery p50 / p99, from the write's answer | ${f(percentile(delays.fromAnswer, 50))} ms / ${f(percentile(delays.fromAnswer, 99))} ms |`,
    `| the log's append statement, share of the service's DB time | ${f((100 * log) / Math.max(1e-9, all))} % |`,
  ].join('\n');
  console.log(report);
  writeResult(session, report, { file: process.env.BENCH_OUT, append: true });
});
