/**
 * A batch of creates against single requests: `npm run bench:batch` (not part of `npm run
 * bench`, nor of `npm test`). Method in bench/README.md ("A batch against single requests");
 * each run's report goes to bench/results/batch-<UTC start>.md.
 *
 *  1. An embedded PostgreSQL with pg_stat_statements, database `bench` migrated by this
 *     checkout; one user, bench_batch, seeded in bulk SQL (1,000 tasks over 10 projects).
 *  2. `npm run build`, the built service as a child (`npm start`'s flags, production, warn
 *     logs, rate limits off), connecting as its own role; the user's first project started
 *     through the API (`PUT /api/projects/:id/state`, due a year ahead).
 *  3. A probe: `POST /api/batch` with one `tasks.create`. 404 (no such endpoint yet) skips the
 *     batch side with a message; any other answer than 200 with one 201 is reported and
 *     fails the run after the report; the singles are measured either way.
 *  4. A unit is BATCH_SIZE (100) tasks created in that started project, for the user, one of
 *     three ways: BATCH_SIZE single `POST /api/users/me/tasks` one at a time (one kept-alive
 *     connection); the same with BATCH_CONNECTIONS (32) in flight (as many kept-alive
 *     connections); one `POST /api/batch` carrying BATCH_SIZE `tasks.create` operations.
 *     Before every unit the tasks made since the seed are deleted (so each unit starts from the
 *     same project: its document, sent with every create's events, lists all its tasks) and
 *     pg_stat_statements is reset; a unit is timed from its first request's start to its last
 *     answer's end, then the tasks it made are counted in the database.
 *  5. BATCH_WARMUP units of each way unrecorded, then BATCH_ROUNDS rounds, the ways in turns
 *     (rotating which goes first), a wait for the shared machine to go quiet before each round.
 *  6. Per way: tasks per second (BATCH_SIZE ÷ the unit's time; median of the rounds, min–max,
 *     and all tasks ÷ all time), the unit's time, statements per task (pg_stat_statements calls
 *     of the service's role ÷ tasks), tasks counted and answered 201; the batch's tasks per
 *     second ÷ each single way's, per round (median, min–max).
 *
 * Env: BATCH_ROUNDS (20), BATCH_SIZE (100: a batch holds at most 100 operations),
 *      BATCH_CONNECTIONS (32), BATCH_WARMUP (3 units of each way), BENCH_QUIET_WAIT (60:
 *      seconds it may wait in all for other processes to go quiet), BENCH_OUT (also write
 *      the Markdown report there).
 */
import http from 'node:http';
import os from 'node:os';
import { createRoles, openDatabase, startDatabase, STATEMENT_STATS } from '../lib/database.js';
import { f0, f1, log, num, utcMinute } from '../lib/env.js';
import { request, statusOf } from '../lib/http.js';
import { quiesce, resetStatementStats, statementStats } from '../lib/pg-stats.js';
import { benchCpu, machineCpu } from '../lib/proc.js';
import { buildService, startBuiltService } from '../lib/processes.js';
import { quietWait } from '../lib/quiet.js';
import { writeResult } from '../lib/report.js';
import { seedUser } from '../lib/seed.js';
import { runScenario } from '../lib/session.js';
import { ascending } from '../lib/stats.js';
import { takeTurns } from '../lib/turns.js';

const ROUNDS = num('BATCH_ROUNDS', 20);
const SIZE = num('BATCH_SIZE', 100);
const CONNECTIONS = num('BATCH_CONNECTIONS', 32);
const WARMUP = num('BATCH_WARMUP', 3);
const ROLE = 'bench_service';

/** What one way of making SIZE tasks answered: how many 201s, and the first other answer or error. */
interface Answered {
  created: number;
  errors: number;
  firstFailure?: string;
}

interface Way {
  name: string;
  make(labelOf: (i: number) => string): Promise<Answered>;
}

/** One unit: SIZE tasks made one way. */
interface Unit {
  ms: number;
  answered: Answered;
  /** The tasks of the unit in the database afterwards (in the project, started). */
  counted: number;
  statements: number;
  otherJiffies: number;
  totalJiffies: number;
}

runScenario('batch', async (session) => {
  const { startedAt, loadBefore } = session;
  log(`data in ${session.dir}`);
  const db = await startDatabase(session, { settings: STATEMENT_STATS });
  const { admin, roleUrl } = await openDatabase(session, db, 'bench', { statementStats: true });
  await createRoles(admin.query.bind(admin) as typeof admin.query, [ROLE]);
  const pgVersion = (await admin.query<{ v: string }>(`select current_setting('server_version') as v`)).rows[0]!.v;

  const user = await seedUser(admin, 'bench_batch', 1_000, 10);
  await admin.query('vacuum analyze');
  const project = user.projects[0]!;

  buildService();
  const service = await startBuiltService(session, { name: 'service', role: ROLE, roleUrl });
  const farDue = Math.floor(Date.now() / 1000) + 365 * 86_400;
  const start = await request(service.url, 'PUT', `/api/projects/${project}/state`, user.token, { project: { state: 'started', due_at: farDue } });
  if (start.status !== 200) throw new Error(`starting project ${project} answered ${start.status}: ${start.text.slice(0, 300)}`);

  /** The tasks made since the seed (orders above its 1,000), deleted before every unit. */
  const reset = () => admin.query('delete from tasks where user_id = $1 and "order" > $2', [user.id, user.tasks]);
  const madeSinceSeed = async () =>
    Number((await admin.query<{ n: string }>(
      `select count(*) as n from tasks where user_id = $1 and "order" > $2 and project_id = $3 and state = 'started'`,
      [user.id, user.tasks, project],
    )).rows[0]!.n);

  const createBody = (label: string) => ({ task: { label, project_id: project } });
  const batchBody = (labelOf: (i: number) => string) => ({
    operations: Array.from({ length: SIZE }, (_, i) => ({ op: 'tasks.create', input: createBody(labelOf(i)) })),
  });
  // Kept-alive connections, closed by the client before the service's 5 s keep-alive timeout
  // can close them under a request.
  const agent = (sockets: number) => new http.Agent({ keepAlive: true, maxSockets: sockets, timeout: 4_000 });
  const oneAgent = agent(1);
  const manyAgent = agent(CONNECTIONS);
  const batchAgent = agent(1);
  session.defer(() => [oneAgent, manyAgent, batchAgent].forEach((a) => a.destroy()));

  /** Single creates, `inFlight` at a time on `via`'s connections. */
  const singles = async (labelOf: (i: number) => string, inFlight: number, via: http.Agent): Promise<Answered> => {
    const answered: Answered = { created: 0, errors: 0 };
    let next = 0;
    const worker = async () => {
      while (next < SIZE) {
        const i = next++;
        try {
          const status = await statusOf(service.url, { method: 'POST', path: '/api/users/me/tasks', token: user.token, body: createBody(labelOf(i)) }, via);
          if (status === 201) answered.created++;
          else answered.firstFailure ??= `${status}`;
        } catch (error) {
          answered.errors++;
          answered.firstFailure ??= String(error);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(inFlight, SIZE) }, worker));
    return answered;
  };
  const batch = async (labelOf: (i: number) => string): Promise<Answered> => {
    try {
      const res = await request(service.url, 'POST', '/api/batch', user.token, batchBody(labelOf), { agent: batchAgent });
      if (res.status !== 200) return { created: 0, errors: 0, firstFailure: `${res.status} ${res.text.slice(0, 300)}` };
      const data = (JSON.parse(res.text) as { data: Array<{ status: number }> }).data;
      const created = data.filter((d) => d.status === 201).length;
      return { created, errors: 0, ...(created === SIZE && data.length === SIZE ? {} : { firstFailure: `200 with ${data.length} answers, ${created} of them 201` }) };
    } catch (error) {
      return { created: 0, errors: 1, firstFailure: String(error) };
    }
  };

  // ---- does the batch endpoint answer? ------------------------------------------------------
  const probe = await request(service.url, 'POST', '/api/batch', user.token, { operations: [{ op: 'tasks.create', input: createBody('batch probe') }] });
  let batchNote: string;
  let batchFailed = false;
  const probeOk = probe.status === 200 && (() => {
    try {
      const data = (JSON.parse(probe.text) as { data?: Array<{ status: number }> }).data;
      return Array.isArray(data) && data.length === 1 && data[0]!.status === 201;
    } catch {
      return false;
    }
  })();
  if (probeOk) {
    batchNote = 'POST /api/batch answered the probe (one tasks.create) 200 with one 201.';
  } else if (probe.status === 404) {
    batchNote = `POST /api/batch answered 404 (${probe.text.slice(0, 200)}): the batch endpoint is not there, so the batch side is skipped; only the single requests were measured.`;
  } else {
    batchFailed = true;
    batchNote = `POST /api/batch answered the probe ${probe.status}: ${probe.text.slice(0, 300)}. The batch side is skipped and the run fails after its report.`;
  }
  log(batchNote);

  const ways: Way[] = [
    { name: `${SIZE} single requests, one at a time`, make: (labelOf) => singles(labelOf, 1, oneAgent) },
    { name: `${SIZE} single requests, ${CONNECTIONS} in flight`, make: (labelOf) => singles(labelOf, CONNECTIONS, manyAgent) },
    ...(probeOk ? [{ name: `one POST /api/batch of ${SIZE} tasks.create`, make: batch }] : []),
  ];

  const ourPids = [process.pid, db.pid!, service.pid];
  const waitQuiet = quietWait(ourPids, num('BENCH_QUIET_WAIT', 60));
  let made = 0;
  const unit = async (way: Way): Promise<Unit> => {
    await reset();
    await quiesce(admin, ROLE);
    await resetStatementStats(admin);
    const cpu0 = machineCpu();
    const ours0 = benchCpu(ourPids);
    const first = made;
    made += SIZE;
    const t0 = performance.now();
    const answered = await way.make((i) => `bench batch task ${first + i + 1}`);
    const ms = performance.now() - t0;
    const cpu1 = machineCpu();
    const ours1 = benchCpu(ourPids);
    await quiesce(admin, ROLE);
    const statements = (await statementStats(admin, ROLE)).reduce((a, s) => a + s.calls, 0);
    return {
      ms,
      answered,
      counted: await madeSinceSeed(),
      statements,
      otherJiffies: Math.max(0, cpu1.procs - cpu0.procs - (ours1 - ours0)),
      totalJiffies: cpu1.total - cpu0.total,
    };
  };

  for (const way of ways) for (let i = 0; i < WARMUP; i++) await unit(way);
  const units = ways.map(() => [] as Unit[]);
  let quietRound = -1;
  await takeTurns(ways, ROUNDS, 'rotate', async (way, index, round) => {
    if (round !== quietRound) {
      quietRound = round;
      await waitQuiet();
    }
    const u = await unit(way);
    units[index]!.push(u);
    log(
      `  round ${round + 1} ${way.name.padEnd(42)} ${f0(u.ms).padStart(5)} ms  ${f0((SIZE / u.ms) * 1000).padStart(5)} tasks/s  ` +
        `${f1(u.statements / SIZE)} statements/task  counted ${u.counted}  201s ${u.answered.created}${u.answered.firstFailure ? `  first failure: ${u.answered.firstFailure}` : ''}`,
    );
  });
  await reset();

  // ---- report ---------------------------------------------------------------------------
  const median = (xs: number[]) => {
    const s = ascending(xs);
    return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  };
  const spread = (xs: number[], digits = 0) => {
    const s = ascending(xs);
    return `${median(s).toFixed(digits)} (${s[0]!.toFixed(digits)}–${s[s.length - 1]!.toFixed(digits)})`;
  };
  const tasksPerSecond = (u: Unit) => (SIZE / u.ms) * 1000;
  const wayRows = ways.map((way, i) => {
    const us = units[i]!;
    const allMs = us.reduce((a, u) => a + u.ms, 0);
    const counted = us.reduce((a, u) => a + u.counted, 0);
    const created = us.reduce((a, u) => a + u.answered.created, 0);
    const errors = us.reduce((a, u) => a + u.answered.errors, 0);
    const failure = us.find((u) => u.answered.firstFailure)?.answered.firstFailure;
    const other = (us.reduce((a, u) => a + u.otherJiffies, 0) / Math.max(1, us.reduce((a, u) => a + u.totalJiffies, 0))) * 100;
    return (
      `| ${way.name} | **${spread(us.map(tasksPerSecond))}** | ${f0((SIZE * us.length * 1000) / allMs)} | ${spread(us.map((u) => u.ms), 1)} | ` +
      `${f1(us.reduce((a, u) => a + u.statements, 0) / (SIZE * us.length))} | ${counted} / ${created} of ${SIZE * us.length} | ${errors}${failure ? ` (first: ${failure.replace(/\|/g, '\\|').slice(0, 200)})` : ''} | ${f0(other)} |`
    );
  });
  const batchIndex = probeOk ? 2 : -1;
  const ratioRows = probeOk
    ? [0, 1].map((i) => {
        const ratios = units[batchIndex]!.map((b, round) => tasksPerSecond(b) / tasksPerSecond(units[i]!.at(round)!));
        return `| ${ways[batchIndex]!.name} ÷ ${ways[i]!.name} | **${spread(ratios, 2)}** |`;
      })
    : [];
  const failedUnits = units.flat().filter((u) => u.counted !== SIZE || u.answered.created !== SIZE);
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  const report = [
    `### A batch against single requests, ${utcMinute(startedAt)} UTC`,
    '',
    `Command: \`npm run bench:batch\` (BATCH_ROUNDS=${ROUNDS}, BATCH_SIZE=${SIZE}, BATCH_CONNECTIONS=${CONNECTIONS}, BATCH_WARMUP=${WARMUP}). ` +
      `Machine: ${os.availableParallelism()} CPUs (${cpu}), ${os.platform()} ${os.release()}; Node ${process.version}; PostgreSQL ${pgVersion} (embedded, fsync/synchronous_commit/full_page_writes off). ` +
      'PostgreSQL, the service and the client share these CPUs.',
    '',
    `A unit: ${SIZE} tasks created for one user (bench_batch) in its started project (100 tasks at the seed; the unit's tasks deleted before the next unit), one of the ways below. ` +
      `${WARMUP} unrecorded units of each way, then ${ROUNDS} rounds, the ways in turns (rotating which goes first). Tasks/s = ${SIZE} ÷ the unit's time (first request's start to last answer's end), median of the rounds (min–max); "all" = every task ÷ all the units' time.`,
    '',
    batchNote,
    '',
    '| way | tasks/s, median (min–max) | tasks/s, all | unit ms, median (min–max) | SQL statements per task | tasks in the database / answered 201, of | errors | other CPU % |',
    '|---|---:|---:|---:|---:|---:|---|---:|',
    ...wayRows,
    '',
    ...(probeOk
      ? ['The batch\'s tasks per second ÷ the single requests\', per round:', '', '| ratio | median (min–max) |', '|---|---:|', ...ratioRows, '']
      : []),
    `Units whose tasks in the database or 201s were not ${SIZE}: ${failedUnits.length === 0 ? 'none' : failedUnits.length}. Service log lines at warn or worse: ${service.logLines}.`,
    `Load average (1/5/15 min) before the run: ${loadBefore.map((x) => x.toFixed(2)).join(' / ')}; after: ${os.loadavg().map((x) => x.toFixed(2)).join(' / ')}. ` +
      `Whole run: ${f0((Date.now() - startedAt.getTime()) / 1000)} s, of which ${f0(waitQuiet.waitedMs() / 1000)} s waiting for other processes to go quiet.`,
  ].join('\n');
  log('\n' + report);
  writeResult(session, report, { file: process.env.BENCH_OUT });
  if (batchFailed) throw new Error(`POST /api/batch answered ${probe.status}; see the report`);
  if (failedUnits.length > 0) throw new Error(`${failedUnits.length} units did not make ${SIZE} tasks; see the report`);
});
