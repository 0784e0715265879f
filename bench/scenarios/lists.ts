/**
 * Filtered task lists (API-CONTRACT.md §12, §13): `npm run bench:lists` or
 * `npx tsx bench/scenarios/lists.ts` (about 2 minutes on 2 cores, more when it waits for a busy machine to calm down; not part of `npm run bench`).
 * Method and latest figures in bench/README.md "Filtered lists"; each run's report goes to
 * bench/results/lists-<UTC start>.md, with every plan whole.
 *
 *  1. An embedded PostgreSQL in a temp folder (bench/lib/database.ts), database `bench`
 *     migrated by this checkout's code.
 *  2. Three users (bench/lib/list-seed.ts), seeded with bulk SQL (`insert … select
 *     generate_series`): 1,000, 10,000 and
 *     100,000 tasks. Each has ~100 projects per 10,000 tasks (10 at least) holding 70 % of the
 *     tasks, plus one started project with exactly 50 tasks, all listed; 12 tasks planned today
 *     (in the user's zone, Europe/Paris); the rest by a fixed scatter of the order: 80 %
 *     finished long ago (15 to 715 days), 3 % finished within the list's 14 days, 3 %
 *     abandoned, 8 % newed, 3 % started, 3 % planned on an earlier day. One label in 4,999
 *     holds the word `Zeppelin`. The project's 50 and today's 12 are the same at every size:
 *     only the user's other tasks grow. The three users share one table, so each size is
 *     measured among other users' rows, and the six requests of 5a can alternate in one run.
 *     Then `vacuum analyze`, and `vacuum tasks` until every page is all-visible (see
 *     `vacuumUntilVisible`).
 *  3. Each request's list statement, as the service sends it, from the in-process app
 *     (bench/lib/statements.ts), and the answers checked against counts made in SQL.
 *  4. The built service (`node dist/src/main.js`, production, warn logs, rate limits off) as
 *     a child, as the other scenarios start it; 3 s of warm-up on every request measured.
 *  5. Latency, one request at a time on a kept-alive connection per request kind:
 *     a. `project_id=<the 50-task project>` and `planned_on=today` at the three sizes, the six
 *        alternating request by request, LISTS_REQUESTS (300) each after 20 unrecorded;
 *        median, p95, and the ratio 100k / 1k (target ≤ 1.5);
 *     b. at 100k, `page_size=200` against pages 1–4 of `page_size=50` one after the other,
 *        the two alternating, LISTS_PAGE_ROUNDS (200) each;
 *     c. at 100k, the lists whose count (`links.last`) is not small: no filter, state=started,
 *        state=finished, project_id=none, q=zeppelin, sort=label, sort=-plannedAt,
 *        alternating, LISTS_COUNT_REQUESTS (300) each.
 *  6. EXPLAIN (ANALYZE, BUFFERS) of each statement of 5a–5c on the bench database: the
 *     statement text the service sent; the unfiltered list, which the service prepares, as a
 *     prepared statement run 6 times first (so that the plan shown is the one its connections
 *     settle on, generic or custom). Times are the median of 3 runs; "count" is the time of
 *     the statement's InitPlans (the total behind `links.last`).
 *
 * Env: LISTS_REQUESTS (300), LISTS_PAGE_ROUNDS (200), LISTS_COUNT_REQUESTS (300),
 *      BENCH_QUIET_WAIT (120: seconds it may wait in all for other processes to go quiet),
 *      BENCH_OUT (also write the report there).
 *
 * "Today" is the seed's day in Europe/Paris: a run that crosses its midnight fails its checks
 * (or, past them, measures an empty planned_on=today).
 */
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import os from 'node:os';
import pg from 'pg';
import { daysAgo, userDay } from '../../src/core/user-day.js';
import { FINISHED_LISTED_DAYS } from '../../src/tasks/list-tasks.js';
import { createRoles, openDatabase, startDatabase } from '../lib/database.js';
import { f0, f1, log, num, ROOT, utcMinute } from '../lib/env.js';
import { request, statusOf } from '../lib/http.js';
import { benchCpu, machineCpu } from '../lib/proc.js';
import { buildService, startBuiltService, type Target } from '../lib/processes.js';
import { quietWait } from '../lib/quiet.js';
import { writeResult } from '../lib/report.js';
import { PLANNED_TODAY, PROJECT_TASKS, RARE_WORD, seedListUser, vacuumUntilVisible, ZONE, type ListUser } from '../lib/list-seed.js';
import { runScenario } from '../lib/session.js';
import { startCountingApp } from '../lib/statements.js';
import { ascending, quantile } from '../lib/stats.js';

const REQUESTS = num('LISTS_REQUESTS', 300);
const PAGE_ROUNDS = num('LISTS_PAGE_ROUNDS', 200);
const COUNT_REQUESTS = num('LISTS_COUNT_REQUESTS', 300);
const WARM = 20;
const SIZES = [
  { label: '1k', tasks: 1_000 },
  { label: '10k', tasks: 10_000 },
  { label: '100k', tasks: 100_000 },
] as const;
const TASKS_PATH = '/api/users/me/tasks';

/** A request kind that is measured: its path, and its user's token. */
interface Probe {
  key: string;
  label: string;
  path: string;
  token: string;
  user: ListUser;
}

/** What the machine's other processes used during `run`, as a share of the machine. */
async function othersDuring<T>(ourPids: number[], run: () => Promise<T>): Promise<{ result: T; otherPercent: number }> {
  const c0 = machineCpu();
  const o0 = benchCpu(ourPids);
  const result = await run();
  const c1 = machineCpu();
  const otherPercent = ((c1.procs - c0.procs - (benchCpu(ourPids) - o0)) / Math.max(1, c1.total - c0.total)) * 100;
  return { result, otherPercent: Math.max(0, otherPercent) };
}

/**
 * One request at a time: every probe once per round, the first of each round moving on by one
 * (A B C, B C A, …), `warm` rounds unrecorded. Each probe has its own kept-alive connection.
 */
async function alternate(base: string, probes: Probe[], rounds: number, warm = WARM): Promise<{ times: number[][]; failed: string[] }> {
  const agents = probes.map(() => new http.Agent({ keepAlive: true, maxSockets: 1 }));
  const times = probes.map(() => [] as number[]);
  const failed: string[] = [];
  try {
    for (let i = 0; i < rounds + warm; i++) {
      for (let k = 0; k < probes.length; k++) {
        const j = (k + i) % probes.length;
        const probe = probes[j]!;
        const t0 = performance.now();
        const status = await statusOf(base, { method: 'GET', path: probe.path, token: probe.token }, agents[j]!);
        const ms = performance.now() - t0;
        if (status !== 200) failed.push(`${probe.label}: ${status}`);
        if (i >= warm) times[j]!.push(ms);
      }
    }
  } finally {
    for (const agent of agents) agent.destroy();
  }
  return { times, failed };
}

const median = (values: number[]) => quantile(ascending(values), 0.5);
const p95 = (values: number[]) => quantile(ascending(values), 0.95);
const ms2 = (n: number) => n.toFixed(2);

interface PlanTimes {
  /** Median of 3 runs, ms. */
  execution: number;
  planning: number;
  /** The InitPlans' time: the count behind `links.last`. */
  count: number;
  /** Shared buffers hit + read of the whole statement, and of its count. */
  buffers: number;
  countBuffers: number;
  /** The plan as text (EXPLAIN (ANALYZE, BUFFERS)), one more run. */
  text: string;
  /** Whether the plan is the prepared statement's generic one. */
  generic?: boolean;
}

type PlanNode = Record<string, unknown> & { Plans?: PlanNode[] };

/** The time and buffers of the outermost InitPlans (the statement's scalar subqueries: its count). */
function initPlans(node: PlanNode): { ms: number; buffers: number } {
  if (typeof node['Subplan Name'] === 'string' && (node['Subplan Name'] as string).startsWith('InitPlan')) {
    return { ms: (node['Actual Total Time'] as number) * ((node['Actual Loops'] as number) || 1), buffers: buffersOf(node) };
  }
  let ms = 0;
  let buffers = 0;
  for (const child of node.Plans ?? []) {
    const sub = initPlans(child);
    ms += sub.ms;
    buffers += sub.buffers;
  }
  return { ms, buffers };
}

const buffersOf = (node: PlanNode) => ((node['Shared Hit Blocks'] as number) ?? 0) + ((node['Shared Read Blocks'] as number) ?? 0);

/**
 * EXPLAIN (ANALYZE, BUFFERS) of `statement` (an `explain`-able text) 3 times in JSON for the
 * figures, once more in text for the plan.
 */
async function explain(q: pg.Client['query'], statement: string): Promise<PlanTimes> {
  const runs: Array<{ execution: number; planning: number; count: number; buffers: number; countBuffers: number }> = [];
  for (let i = 0; i < 3; i++) {
    const { rows } = await q(`explain (analyze, buffers, format json) ${statement}`);
    const doc = (rows[0] as Record<string, Array<{ Plan: PlanNode; 'Execution Time': number; 'Planning Time': number }>>)['QUERY PLAN']![0]!;
    const count = initPlans(doc.Plan);
    runs.push({ execution: doc['Execution Time'], planning: doc['Planning Time'] ?? 0, count: count.ms, buffers: buffersOf(doc.Plan), countBuffers: count.buffers });
  }
  runs.sort((a, b) => a.execution - b.execution);
  const mid = runs[1]!;
  const { rows } = await q(`explain (analyze, buffers) ${statement}`);
  const text = rows.map((r) => (r as Record<string, string>)['QUERY PLAN']).join('\n');
  return { ...mid, text };
}

/**
 * What this process sends PostgreSQL through `pg` while `recording` is on: the text of each
 * message and its values (a prepared statement's; none when the ORM wrote the values into the
 * text). The in-process app's ORM and the service's build use the same `pg` code, so this is
 * the statement the service sends for the same request.
 */
interface Sent {
  text: string;
  values?: unknown[];
}
const sent: Sent[] = [];
let recording = false;
{
  const original = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  (pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown }).query = function (this: pg.Client, ...args: unknown[]) {
    if (recording) {
      const [config, values] = args;
      if (typeof config === 'string') sent.push({ text: config, values: Array.isArray(values) ? values : undefined });
      else if (config && typeof config === 'object' && typeof (config as { text?: unknown }).text === 'string') {
        const c = config as { text: string; values?: unknown[] };
        sent.push({ text: c.text, values: c.values ?? (Array.isArray(values) ? values : undefined) });
      }
    }
    return original.apply(this, args);
  };
}

/** The message of a list request that reads the page and its total. */
function listStatement(messages: Sent[]): Sent {
  const statement = messages.find((m) => m.text.trim().startsWith('select c.total'));
  if (!statement) throw new Error(`no list statement among ${JSON.stringify(messages.map((m) => m.text.slice(0, 80)))}`);
  return { text: statement.text.trim(), values: statement.values?.length ? statement.values : undefined };
}

const sqlLiteral = (value: unknown) =>
  typeof value === 'number' ? String(value) : `'${(value instanceof Date ? value.toISOString() : String(value)).replace(/'/g, "''")}'`;

runScenario('lists', async (session) => {
  const { startedAt, loadBefore } = session;
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src', 'package.json', 'tsconfig.build.json'], { cwd: ROOT, encoding: 'utf8' }).trim();
  log(`data in ${session.dir}; commit ${commit}${dirty ? ` with uncommitted changes to what the service is built from:\n${dirty}` : ''}`);
  const db = await startDatabase(session);
  const { admin, q, url: adminUrl, roleUrl } = await openDatabase(session, db, 'bench');
  await createRoles(q, ['bench_service']);
  const pgVersion = (await q<{ v: string }>(`select current_setting('server_version') as v`)).rows[0]!.v;

  // ---- seed ----------------------------------------------------------------------------------
  let t = Date.now();
  const now = new Date();
  const today = userDay(now, ZONE);
  const users: ListUser[] = [];
  for (const { label, tasks } of SIZES) users.push(await seedListUser(admin, `lists_${label}`, label, tasks, today.start, now));
  const seedSeconds = (Date.now() - t) / 1000;
  t = Date.now();
  const vacuumNote = await vacuumUntilVisible(admin);
  log(`seeded ${users.length} users, ${SIZES.reduce((a, s) => a + s.tasks, 0)} tasks in ${f1(seedSeconds)} s; ${vacuumNote} (${f1((Date.now() - t) / 1000)} s)`);

  // The counts the answers must show, from the rows themselves.
  const finishedSince = daysAgo(today, FINISHED_LISTED_DAYS);
  const listed = `state <> 'abandoned' and (state <> 'finished' or finished_at >= '${finishedSince.toISOString()}')`;
  const countOf = async (userId: number, where: string) =>
    Number((await q<{ n: string }>(`select count(*) as n from tasks where user_id = ${userId} and ${listed} and ${where}`)).rows[0]!.n);
  const shape: string[] = [];
  for (const user of users) {
    const { rows } = await q<{ open: string; finished_old: string; abandoned: string; loose: string; planned_ever: string }>(
      `select count(*) filter (where state not in ('abandoned', 'finished')) as open,
              count(*) filter (where state = 'finished' and finished_at < $2) as finished_old,
              count(*) filter (where state = 'abandoned') as abandoned,
              count(*) filter (where project_id is null) as loose,
              count(*) filter (where planned_at is not null) as planned_ever
         from tasks where user_id = $1`,
      [user.id, finishedSince],
    );
    const r = rows[0]!;
    const inProject = await countOf(user.id, `project_id = ${user.project50}`);
    const plannedToday = await countOf(user.id, `planned_at >= '${today.start.toISOString()}' and planned_at < '${today.next.toISOString()}'`);
    if (inProject !== PROJECT_TASKS || plannedToday !== PLANNED_TODAY) throw new Error(`${user.username}: ${inProject} listed in the project, ${plannedToday} planned today`);
    const all = await countOf(user.id, 'true');
    shape.push(
      `${user.label}: ${user.tasks} tasks, ${user.projectCount} projects, ${all} listed (open ${r.open}), ` +
        `${r.finished_old} finished before the 14-day window, ${r.abandoned} abandoned, ${r.loose} in no project, ${r.planned_ever} with a plannedAt, ` +
        `${inProject} in the 50-task project, ${plannedToday} planned today`,
    );
  }
  log(shape.join('\n'));
  const big = users[users.length - 1]!;

  // ---- the requests ----------------------------------------------------------------------------
  const growthProbes: Probe[] = users.flatMap((user) => [
    { key: `project ${user.label}`, label: `project_id=<50-task project> (${user.label})`, path: `${TASKS_PATH}?project_id=${user.project50}`, token: user.token, user },
    { key: `today ${user.label}`, label: `planned_on=today (${user.label})`, path: `${TASKS_PATH}?planned_on=today`, token: user.token, user },
  ]);
  const countCases: Array<{ label: string; query: string; where: string }> = [
    { label: 'no filter', query: '', where: 'true' },
    { label: 'state=started', query: 'state=started', where: `state = 'started'` },
    { label: 'state=finished', query: 'state=finished', where: `state = 'finished'` },
    { label: 'project_id=none', query: 'project_id=none', where: 'project_id is null' },
    { label: `q=${RARE_WORD.toLowerCase()}`, query: `q=${RARE_WORD.toLowerCase()}`, where: `lower(label) like '%${RARE_WORD.toLowerCase()}%'` },
    { label: 'sort=label', query: 'sort=label', where: 'true' },
    { label: 'sort=-plannedAt', query: 'sort=-plannedAt', where: 'true' },
  ];
  const countProbes: Probe[] = countCases.map((c) => ({ key: `count ${c.label}`, label: c.label, path: `${TASKS_PATH}${c.query ? `?${c.query}` : ''}`, token: big.token, user: big }));
  const pageProbes: Probe[] = [
    { key: 'size 200', label: 'page_size=200', path: `${TASKS_PATH}?page_size=200`, token: big.token, user: big },
    ...[1, 2, 3, 4].map((page) => ({ key: `size 50 p${page}`, label: `page_size=50&page=${page}`, path: `${TASKS_PATH}?page_size=50&page=${page}`, token: big.token, user: big })),
  ];

  // Each request's list statement (in-process, the same code and database), and its answer checked.
  const statements = new Map<string, Sent>();
  const expected = new Map<string, { items: number; last: number }>();
  for (const probe of growthProbes) expected.set(probe.key, { items: probe.key.startsWith('project') ? PROJECT_TASKS : PLANNED_TODAY, last: 1 });
  for (const [i, c] of countCases.entries()) {
    const n = await countOf(big.id, c.where);
    expected.set(countProbes[i]!.key, { items: Math.min(50, n), last: Math.max(1, Math.ceil(n / 50)) });
  }
  const allListed = await countOf(big.id, 'true');
  expected.set('size 200', { items: Math.min(200, allListed), last: Math.ceil(allListed / 200) });
  for (const page of [1, 2, 3, 4]) expected.set(`size 50 p${page}`, { items: Math.min(50, Math.max(0, allListed - (page - 1) * 50)), last: Math.ceil(allListed / 50) });
  const checks: string[] = [];
  const statementCounts = new Set<number>();
  {
    const app = await startCountingApp(adminUrl);
    try {
      const pageIds: Record<string, number[]> = {};
      for (const probe of [...growthProbes, ...countProbes, ...pageProbes]) {
        sent.length = 0;
        recording = true;
        const res = await app.request('GET', probe.path, probe.token).finally(() => {
          recording = false;
        });
        if (res.status !== 200) throw new Error(`${probe.label}: ${res.status} ${res.text.slice(0, 300)}`);
        const body = JSON.parse(res.text) as { data: Array<{ id: number }>; links: { last: string } };
        const last = Number(new URL(body.links.last).searchParams.get('page'));
        const want = expected.get(probe.key)!;
        const ok = body.data.length === want.items && last === want.last;
        checks.push(`${probe.label}: ${body.data.length} items, last page ${last}${ok ? '' : ` — EXPECTED ${want.items} items, last ${want.last}`}`);
        if (!ok) throw new Error(`wrong answer: ${checks[checks.length - 1]}`);
        pageIds[probe.key] = body.data.map((d) => d.id);
        statements.set(probe.key, listStatement(sent));
        statementCounts.add(res.sql.length);
      }
      const fours = [1, 2, 3, 4].flatMap((page) => pageIds[`size 50 p${page}`]!);
      if (fours.join() !== pageIds['size 200']!.join()) throw new Error('page_size=200 is not pages 1–4 of page_size=50');
      checks.push('page_size=200: the same tasks as pages 1–4 of page_size=50, in the same order');
    } finally {
      await app.close();
    }
  }
  log(`answers checked against SQL counts:\n  ${checks.join('\n  ')}`);

  // ---- build, start --------------------------------------------------------------------------
  buildService();
  const service: Target = await startBuiltService(session, { name: 'service', role: 'bench_service', roleUrl });
  const ourPids = [process.pid, db.pid!, service.pid];
  const waitQuiet = quietWait(ourPids, num('BENCH_QUIET_WAIT', 120));
  // Warm-up: every request kind, 3 s in all, not recorded.
  {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const until = Date.now() + 3_000;
    const probes = [...growthProbes, ...countProbes, ...pageProbes];
    for (let i = 0; Date.now() < until; i++) {
      const probe = probes[i % probes.length]!;
      await statusOf(service.url, { method: 'GET', path: probe.path, token: probe.token }, agent);
    }
    agent.destroy();
  }

  // ---- 5a: the two filters at three sizes ------------------------------------------------------------
  await waitQuiet();
  const growth = await othersDuring(ourPids, () => alternate(service.url, growthProbes, REQUESTS));
  const growthStats = new Map(growthProbes.map((p, j) => [p.key, { median: median(growth.result.times[j]!), p95: p95(growth.result.times[j]!) }]));
  for (const p of growthProbes) log(`${p.label}: median ${ms2(growthStats.get(p.key)!.median)} ms, p95 ${ms2(growthStats.get(p.key)!.p95)} ms`);

  // ---- 5b: one page of 200 against four of 50, at 100k -------------------------------------------
  await waitQuiet();
  const pages = await othersDuring(ourPids, async () => {
    const agent200 = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const agent50 = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const one: number[] = [];
    const four: number[] = [];
    const each50: number[] = [];
    const failed: string[] = [];
    const get = async (probe: Probe, agent: http.Agent) => {
      const t0 = performance.now();
      const status = await statusOf(service.url, { method: 'GET', path: probe.path, token: probe.token }, agent);
      if (status !== 200) failed.push(`${probe.label}: ${status}`);
      return performance.now() - t0;
    };
    for (let i = 0; i < PAGE_ROUNDS + WARM; i++) {
      const runOne = async () => {
        const ms = await get(pageProbes[0]!, agent200);
        if (i >= WARM) one.push(ms);
      };
      const runFour = async () => {
        let sum = 0;
        for (const probe of pageProbes.slice(1)) {
          const ms = await get(probe, agent50);
          sum += ms;
          if (i >= WARM) each50.push(ms);
        }
        if (i >= WARM) four.push(sum);
      };
      if (i % 2 === 0) {
        await runOne();
        await runFour();
      } else {
        await runFour();
        await runOne();
      }
    }
    agent200.destroy();
    agent50.destroy();
    return { one, four, each50, failed };
  });
  const bytes200 = (await request(service.url, 'GET', pageProbes[0]!.path, big.token)).text.length;
  const bytes50 = (await Promise.all(pageProbes.slice(1).map((p) => request(service.url, 'GET', p.path, big.token)))).reduce((a, r) => a + r.text.length, 0);
  log(`page_size=200: median ${ms2(median(pages.result.one))} ms; pages 1–4 of 50: median ${ms2(median(pages.result.four))} ms (each ${ms2(median(pages.result.each50))} ms)`);

  // ---- 5c: the counts at 100k -----------------------------------------------------------------------
  await waitQuiet();
  const counted = await othersDuring(ourPids, () => alternate(service.url, countProbes, COUNT_REQUESTS));
  const countStats = new Map(countProbes.map((p, j) => [p.key, { median: median(counted.result.times[j]!), p95: p95(counted.result.times[j]!) }]));
  for (const p of countProbes) log(`${p.label} (100k): median ${ms2(countStats.get(p.key)!.median)} ms, p95 ${ms2(countStats.get(p.key)!.p95)} ms`);

  // ---- 6: EXPLAIN (ANALYZE, BUFFERS) ----------------------------------------------------------------
  const plans = new Map<string, PlanTimes>();
  for (const probe of [...growthProbes, ...countProbes, ...pageProbes.slice(0, 2), pageProbes[4]!]) {
    const { text, values } = statements.get(probe.key)!;
    if (!values) {
      plans.set(probe.key, await explain(q, text));
      continue;
    }
    // Prepared by the service (the unfiltered list by order): the same, with its values.
    await q(`prepare bench_list as ${text}`);
    const execute = `execute bench_list(${values.map(sqlLiteral).join(', ')})`;
    for (let i = 0; i < 6; i++) await q(execute);
    const plan = await explain(q, execute);
    plans.set(probe.key, { ...plan, generic: /\$\d/.test(plan.text) });
    await q('deallocate bench_list');
  }

  // ---- report ------------------------------------------------------------------------------------
  const mark = (ok: boolean) => (ok ? '✓' : '✗');
  const growthRows = (['project', 'today'] as const).map((kind) => {
    const of = (label: string) => growthStats.get(`${kind} ${label}`)!;
    const planOf = (label: string) => plans.get(`${kind} ${label}`)!;
    const ratio = of('100k').median / of('1k').median;
    const ratio95 = of('100k').p95 / of('1k').p95;
    const name = kind === 'project' ? '`project_id=<50-task project>`' : '`planned_on=today`';
    return {
      kind,
      ratio,
      line:
        `| ${name} | ${SIZES.map((s) => `${ms2(of(s.label).median)} / ${ms2(of(s.label).p95)}`).join(' | ')} | **${ratio.toFixed(2)} ${mark(ratio <= 1.5)}** | ${ratio95.toFixed(2)} | ` +
        `${SIZES.map((s) => ms2(planOf(s.label).execution)).join(' / ')} |`,
    };
  });
  const countRows = countCases.map((c, j) => {
    const probe = countProbes[j]!;
    const s = countStats.get(probe.key)!;
    const p = plans.get(probe.key)!;
    const want = expected.get(probe.key)!;
    return `| \`${c.label}\` | ${ms2(s.median)} / ${ms2(s.p95)} | ${ms2(p.execution)} | ${ms2(p.count)} | ${p.countBuffers} / ${p.buffers} | ${ms2(p.planning)} | ${want.last} |`;
  });
  const machine = `${os.availableParallelism()} CPUs (nproc; ${os.cpus()[0]?.model ?? 'unknown CPU'}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.platform()} ${os.release()}`;
  const planSection = (title: string, key: string) => {
    const p = plans.get(key)!;
    return [
      `#### ${title}`,
      '',
      `Execution ${ms2(p.execution)} ms (count ${ms2(p.count)} ms), planning ${ms2(p.planning)} ms, median of 3${p.generic === undefined ? '' : `; prepared, ${p.generic ? 'generic' : 'custom'} plan after 6 runs`}.`,
      '',
      '```',
      p.text,
      '```',
      '',
    ];
  };
  const report = [
    `### Filtered lists, ${utcMinute(startedAt)} UTC — \`npx tsx bench/scenarios/lists.ts\``,
    '',
    `Commit ${commit}${dirty ? ` with uncommitted changes to what the service is built from (\`git status --porcelain -- src package.json tsconfig.build.json\`: ${dirty.split('\n').join('; ')})` : ' (src/ as committed)'}. ` +
      `Machine: ${machine}; Node ${process.version}; PostgreSQL ${pgVersion} (embedded, fsync/synchronous_commit/full_page_writes off, default planner settings). ` +
      `PostgreSQL, the built service (\`node dist/src/main.js\`, production, LOG_LEVEL=warn, rate limits off) and this client share these CPUs; loopback only.`,
    '',
    `Seed (${f1(seedSeconds)} s; then ${vacuumNote}), users in ${ZONE}, today ${today.start.toISOString()} – ${today.next.toISOString()}, the 14-day window from ${finishedSince.toISOString()}:`,
    '',
    ...shape.map((s) => `- ${s}`),
    '',
    `Answers checked against counts made in SQL: ${checks.join('; ')}. SQL statements per request (in-process, the token's lookup included): ${[...statementCounts].join(' or ')}.`,
    '',
    `#### Latency against the user's size (${REQUESTS} requests each, one at a time, the six alternating request by request; other processes used ${f0(growth.otherPercent)} % of the machine meanwhile)`,
    '',
    '| request | 1k median / p95 ms | 10k | 100k | 100k ÷ 1k, median (≤ 1.5) | 100k ÷ 1k, p95 | EXPLAIN ms 1k / 10k / 100k |',
    '|---|---:|---:|---:|---:|---:|---:|',
    ...growthRows.map((r) => r.line),
    '',
    `Non-200 answers: ${growth.result.failed.length === 0 ? 'none' : growth.result.failed.slice(0, 5).join('; ')}.`,
    '',
    `#### One page of 200 against four of 50, 100k (${PAGE_ROUNDS} rounds, the two alternating; other processes ${f0(pages.otherPercent)} %)`,
    '',
    '| request | median ms | p95 ms | bytes | EXPLAIN ms |',
    '|---|---:|---:|---:|---:|',
    `| \`page_size=200\`, one request | ${ms2(median(pages.result.one))} | ${ms2(p95(pages.result.one))} | ${bytes200} | ${ms2(plans.get('size 200')!.execution)} |`,
    `| \`page_size=50\`, pages 1–4 one after the other (sum) | ${ms2(median(pages.result.four))} | ${ms2(p95(pages.result.four))} | ${bytes50} | ${ms2(plans.get('size 50 p1')!.execution)} (p.1), ${ms2(plans.get('size 50 p4')!.execution)} (p.4) |`,
    `| one request of those four | ${ms2(median(pages.result.each50))} | ${ms2(p95(pages.result.each50))} | | |`,
    '',
    `Four pages of 50 ÷ one of 200 (medians): **${(median(pages.result.four) / median(pages.result.one)).toFixed(2)}**. Non-200 answers: ${pages.result.failed.length === 0 ? 'none' : pages.result.failed.slice(0, 5).join('; ')}.`,
    '',
    `#### The count behind \`links.last\`, 100k (${COUNT_REQUESTS} requests each, alternating; other processes ${f0(counted.otherPercent)} %)`,
    '',
    '| request | HTTP median / p95 ms | statement ms (EXPLAIN ANALYZE) | of which the count | buffers, count / statement | planning ms | last page |',
    '|---|---:|---:|---:|---:|---:|---:|',
    ...countRows,
    '',
    `Non-200 answers: ${counted.result.failed.length === 0 ? 'none' : counted.result.failed.slice(0, 5).join('; ')}.`,
    '',
    `Targets: 100k ÷ 1k ≤ 1.5 on the median — ${growthRows.map((r) => `${r.kind === 'project' ? 'project_id' : 'planned_on=today'} ${r.ratio.toFixed(2)} ${r.ratio <= 1.5 ? 'met' : '**not met**'}`).join(', ')}.`,
    '',
    `Load average (1/5/15 min) before the run: ${loadBefore.map((x) => x.toFixed(2)).join(' / ')}; after: ${os.loadavg().map((x) => x.toFixed(2)).join(' / ')}. ` +
      `Whole run: ${f0((Date.now() - startedAt.getTime()) / 1000)} s, of which ${f0(waitQuiet.waitedMs() / 1000)} s waiting for other processes to go quiet. Service log lines at warn or worse: ${service.logLines}.`,
    '',
    '#### Plans (EXPLAIN (ANALYZE, BUFFERS), the statement the service sent)',
    '',
    ...growthProbes.flatMap((p) => planSection(p.label, p.key)),
    ...countProbes.flatMap((p) => planSection(`${p.label} (100k)`, p.key)),
    ...planSection('page_size=200 (100k)', 'size 200'),
    ...planSection('page_size=50, page 1 (100k)', 'size 50 p1'),
    ...planSection('page_size=50, page 4 (100k)', 'size 50 p4'),
    '#### Statements',
    '',
    ...[...growthProbes.filter((p) => p.user === big), ...countProbes, pageProbes[0]!].flatMap((p) => {
      const { text, values } = statements.get(p.key)!;
      return [`${p.label}${values ? ` (prepared; values ${values.map(sqlLiteral).join(', ')})` : ''}:`, '', '```sql', text, '```', ''];
    }),
  ].join('\n');
  log('\n' + report);
  writeResult(session, report, { file: process.env.BENCH_OUT });
});
