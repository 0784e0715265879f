/**
 * A write's database time, without HTTP: `npm run bench:write-db`. Each run's report goes to
 * bench/results/write-db-<UTC start>.md.
 *
 * The same task state changes (bench_main's 3,000 planned tasks, each flipped finished ⇄
 * planned) sent straight to PostgreSQL by this process, as the service's statement and as the
 * fewest floor's, both named prepared statements:
 *
 * - service: `select <apply>(…)`, the one call a write makes (src/writes/write.ts), with the
 *   arguments the service gives it for `PUT /api/tasks/{id}/state` without a key or If-Match.
 *   Its NOTIFY, a statement of its own after the answer and outside the lock, is not sent.
 * - fewest: the fewest floor's one statement (bench/floors/fewest-floor.ts `CHANGE_STATE`):
 *   the owner's lock, the update, the change log and its NOTIFY.
 *
 * 1. An embedded PostgreSQL (durability off, as the throughput scenario), database `bench`,
 *    migrated (which installs the write functions); bench_main seeded; `vacuum analyze`.
 * 2. One at a time: ROUNDS rounds, each target in turn (the first alternating), each slice
 *    WRITE_DB_CALLS calls on one connection after 200 unrecorded; `vacuum` before each slice.
 *    The client's time per call (round trip included, the same for both), median and mean.
 * 3. One user's writes at 32 connections (WRITE_DB_CONNECTIONS): the same turns, WRITE_DB_SECONDS each; writes per
 *    second. Every write of the user waits for the owner's lock: this is the rate at which the
 *    lock is passed on, with no HTTP, JSON or token work beside it.
 *
 * Env: WRITE_DB_CALLS (2,000), WRITE_DB_SECONDS (5), WRITE_DB_CONNECTIONS (32: 15 is three instances
 * of the service, each letting 5 of a user's writes run at once), BENCH_ROUNDS (5).
 */
import os from 'node:os';
import pg from 'pg';
import { writes } from '../../src/app/write-functions.js';
import { CHANGE_STATE } from '../floors/fewest-floor.js';
import { openDatabase, startDatabase } from '../lib/database.js';
import { log, num, utcMinute } from '../lib/env.js';
import { writeResult } from '../lib/report.js';
import { seedMainUser, taskIdsByOrder } from '../lib/seed.js';
import { runScenario } from '../lib/session.js';
import { ascending, quantile } from '../lib/stats.js';

const CALLS = num('WRITE_DB_CALLS', 2_000);
const SECONDS = num('WRITE_DB_SECONDS', 5);
const ROUNDS = num('BENCH_ROUNDS', 5);
const CONNECTIONS = num('WRITE_DB_CONNECTIONS', 32);

type Target = 'service' | 'fewest';
type State = 'planned' | 'finished';

runScenario('write-db', async (session) => {
  const db = await startDatabase(session);
  const { admin, url } = await openDatabase(session, db, 'bench');
  const main = await seedMainUser(admin);
  await admin.query('vacuum analyze');
  const tasks = await taskIdsByOrder(admin, main.id, 1, 3_000);
  const { rows: initial } = await admin.query<{ id: number; state: State }>('select id, state from tasks where id = any($1::bigint[])', [tasks]);
  const states = new Map(initial.map((r) => [Number(r.id), r.state]));

  const applyText = `select ${writes.apply}($1::bigint, $2::timestamptz, $3::json, $4::json, $5::text, $6::bigint, $7::text, $8::timestamptz, $9::boolean) as applied`;
  /** The next write of `target` on task `id`: its state flipped. */
  const statement = (target: Target, id: number): pg.QueryConfig => {
    const to: State = states.get(id) === 'planned' ? 'finished' : 'planned';
    states.set(id, to);
    const at = new Date(Math.floor(Date.now() / 1000) * 1000);
    if (target === 'fewest') return { name: `fewest_${to}`, text: CHANGE_STATE[to], values: [id, main.id, at, Math.floor(at.getTime() / 1000)] };
    // The user's day in UTC, as src/writes/write.ts gives it (a state change reads none of it).
    const next = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1));
    const day = JSON.stringify({ next: next.toISOString(), end: new Date(next.getTime() - 1000).toISOString() });
    const ops = JSON.stringify([{ op: 'tasks.changeState', input: { id, task: { state: to } }, if_match: null, status: 200 }]);
    return { name: 'service_apply', text: applyText, values: [main.id, at, day, ops, null, null, null, null, false] };
  };
  const check = (target: Target, rows: Array<Record<string, unknown>>) => {
    const ok = target === 'fewest' ? rows.length === 1 : rows[0]?.applied && !(rows[0].applied as { refusal?: unknown }).refusal;
    if (!ok) throw new Error(`${target}: the write was not made: ${JSON.stringify(rows).slice(0, 500)}`);
  };

  const clients = await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      session.defer(() => client.end());
      return client;
    }),
  );
  const [one] = clients as [pg.Client];

  const oneAtATime = async (target: Target, count: number) => {
    const times: number[] = [];
    for (let i = 0; i < count; i++) {
      const config = statement(target, tasks[i % tasks.length]!);
      const t0 = performance.now();
      check(target, (await one.query(config)).rows);
      times.push(performance.now() - t0);
    }
    return times;
  };
  const concurrent = async (target: Target, seconds: number) => {
    const until = performance.now() + seconds * 1000;
    let done = 0;
    await Promise.all(
      clients.map(async (client, c) => {
        const own = tasks.filter((_, i) => i % CONNECTIONS === c);
        for (let k = 0; performance.now() < until; k++) {
          check(target, (await client.query(statement(target, own[k % own.length]!))).rows);
          done++;
        }
      }),
    );
    return done / seconds;
  };

  const targets: Target[] = ['service', 'fewest'];
  const single = { service: [] as number[], fewest: [] as number[] };
  const singleRatios: number[] = [];
  const rates = { service: [] as number[], fewest: [] as number[] };
  const rateRatios: number[] = [];
  for (const target of targets) await oneAtATime(target, 200);
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? targets : [...targets].reverse();
    const medians: Partial<Record<Target, number>> = {};
    for (const target of order) {
      await admin.query('vacuum tasks, users, events');
      await oneAtATime(target, 200);
      const times = await oneAtATime(target, CALLS);
      single[target].push(...times);
      medians[target] = quantile(ascending(times), 0.5);
    }
    singleRatios.push(medians.service! / medians.fewest!);
    const perSecond: Partial<Record<Target, number>> = {};
    for (const target of order) {
      await admin.query('vacuum tasks, users, events');
      await concurrent(target, 1);
      perSecond[target] = await concurrent(target, SECONDS);
      rates[target].push(perSecond[target]!);
    }
    rateRatios.push(perSecond.service! / perSecond.fewest!);
    log(`round ${round + 1}: one at a time service ÷ fewest ${singleRatios.at(-1)!.toFixed(2)}; ${CONNECTIONS} connections ${perSecond.service!.toFixed(0)} / ${perSecond.fewest!.toFixed(0)} writes/s`);
  }

  const median = (xs: number[]) => quantile(ascending(xs), 0.5);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const spread = (xs: number[]) => `${median(xs).toFixed(2)} (${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})`;
  const text = [
    `### ${utcMinute(session.startedAt)} UTC — \`npm run bench:write-db\``,
    '',
    `Node ${process.version}, ${os.availableParallelism()} CPUs; load average before ${session.loadBefore.map((x) => x.toFixed(2)).join(' / ')}, after ${os.loadavg().map((x) => x.toFixed(2)).join(' / ')}. ` +
      `Task state changes of bench_main sent straight to PostgreSQL; ${ROUNDS} rounds, the targets in turns.`,
    '',
    `| target | one at a time: median / mean ms per call (${CALLS} a round) | ${CONNECTIONS} connections, one user: writes/s (median of rounds) |`,
    '|---|---:|---:|',
    ...targets.map((t) => `| ${t} | ${median(single[t]).toFixed(3)} / ${mean(single[t]).toFixed(3)} | ${median(rates[t]).toFixed(0)} |`),
    '',
    `Service ÷ fewest, median of the rounds (min–max): time per call one at a time **${spread(singleRatios)}**; writes per second at ${CONNECTIONS} connections **${spread(rateRatios)}**.`,
  ].join('\n');
  log('\n' + text);
  writeResult(session, text);
});
