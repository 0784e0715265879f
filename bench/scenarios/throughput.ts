/**
 * The main run: the service against the floors, `npm run bench` (its first part; not part of
 * `npm test`). Method and latest figures in bench/README.md; each run's report goes to
 * bench/results/throughput-<UTC start>.md.
 *
 *  1. An embedded PostgreSQL in a temp folder, with pg_stat_statements loaded; database
 *     `bench`, migrated with openOrm.
 *  2. Bulk SQL seed: bench_main (10,000 tasks over 200 projects), 50 other users (1,000
 *     tasks over 10 projects each), bench_in_project (1,000 tasks over 10 projects, the first
 *     started), growth users with 1k, 10k and 100k tasks; every user has a real scrypt
 *     password hash and a known token (its SHA-256 in access_tokens).
 *  3. SQL statements per request, in-process: createApp on openOrm(..., { onQuery }).
 *  4. The service built; as a child (`node dist/src/main.js`, NODE_ENV=production,
 *     LOG_LEVEL=warn), a second one with the rate limiter on, and the mirror floor
 *     (bench/floors/floor-server.ts); each connects as its own PostgreSQL role, so
 *     pg_stat_statements tells their statements apart.
 *  5. The mirror floor's JSON is checked byte-for-byte against the service's; the fewest floor
 *     (bench/floors/fewest-floor.ts) is started too and checked on every endpoint, change log
 *     included (bench/floors/floor-check.ts; BENCH_CHECK_ONLY=1 stops here).
 *  6. autocannon scenarios at a fixed connection count; per row: req/s, p50/p99, non-2xx,
 *     statements per request (in-process and under load), DB time per request, peak RSS and
 *     PSS, and the CPU other processes took meanwhile. Every scenario runs the service and the
 *     fewest floor in turns (BENCH_ROUNDS slices each; the mirror floor too where it answers,
 *     and the rate-limited service on list), so that their ratios are fair on a shared host.
 *     Then idle latency: one request at a time, the targets alternating request by request.
 *  7. Growth: list and reorder for one user at 1k, 10k and 100k tasks, with EXPLAIN ANALYZE
 *     of the list queries.
 *
 * Env: BENCH_SECONDS (10), BENCH_GROWTH_SECONDS (6), BENCH_CONNECTIONS (32), BENCH_ROUNDS (5),
 *      BENCH_IDLE_REQUESTS (300), BENCH_CHECK_ONLY, BENCH_ONLY (comma-separated beginnings of
 *      the compared rows' names: only those, and no idle latency, growth or EXPLAIN; `idle`
 *      adds the idle-latency rows),
 *      BENCH_QUIET_WAIT (240: seconds it may wait in all for other processes to go quiet),
 *      BENCH_OUT (also write the Markdown report to this file), BENCH_DEBUG (statements per row).
 */
import http from 'node:http';
import os from 'node:os';
import { checkFloor } from '../floors/floor-check.js';
import { createRoles, openDatabase, startDatabase, STATEMENT_STATS } from '../lib/database.js';
import { f0, f1, log, num, utcMinute } from '../lib/env.js';
import { request, statusOf } from '../lib/http.js';
import { runLoad, type BenchRequest, type Script } from '../lib/load.js';
import { meter, rowOf, rowTable, type Row, type Slice } from '../lib/measure.js';
import { memory, peakResettable } from '../lib/proc.js';
import { buildService, startBuiltService, startFloor, type Target } from '../lib/processes.js';
import { quietWait } from '../lib/quiet.js';
import { writeResult } from '../lib/report.js';
import { listFirstPage } from '../lib/scripts.js';
import { taskIdsByOrder } from '../lib/seed.js';
import { runScenario } from '../lib/session.js';
import { range, startCountingApp, type CountingApp } from '../lib/statements.js';
import { ascending, quantile } from '../lib/stats.js';
import { taskPageStatement } from '../../src/tasks/task.store.js';
import { takeTurns } from '../lib/turns.js';
import { listProjects, listTasks, MIX, PAGE, reorderIn, scriptsOf, seedWorld } from '../lib/workload.js';

const SECONDS = num('BENCH_SECONDS', 10);
const GROWTH_SECONDS = num('BENCH_GROWTH_SECONDS', 6);
const CONNECTIONS = num('BENCH_CONNECTIONS', 32);
/** Targets compared with each other take turns in this many slices of BENCH_SECONDS / ROUNDS each. */
const ROUNDS = num('BENCH_ROUNDS', 5);
/** Requests per target in the idle-latency rows (one at a time). */
const IDLE_REQUESTS = num('BENCH_IDLE_REQUESTS', 300);
/** BENCH_ONLY: beginnings of the compared rows' names (`BENCH_ONLY="create task in,start"`); unset, every row. */
const ONLY = process.env.BENCH_ONLY?.split(',').map((name) => name.trim().toLowerCase()).filter(Boolean);
/**
 * Statements per request of the fewest floor, by design (bench/floors/fewest-floor.ts): the token,
 * then one statement, or for the writes that must read after the owner's lock, begin, lock,
 * write and commit sent together (2 round trips in all).
 */
const FEWEST_STATEMENTS: Record<string, string> = {
  'list tasks': '2',
  'list projects': '2',
  'get task': '2',
  'change task state': '2',
  'create task': '5 (2 trips)',
  'create task in a project': '5 (2 trips)',
  'reorder task': '5 (2 trips)',
  'start/pause project': '5 (2 trips)',
  // 35 + 20 + 15 reads of 2, 10 state changes of 2, 10 creates and 10 reorders of 5.
  'mixed 70% reads': '2.6 avg',
};
/** The Host header of the byte-for-byte checks (the answers' links carry it). */
const CHECK_HOST = 'bench.example:8080';
const raw = (base: string, method: string, pathname: string, token: string, body?: unknown) => request(base, method, pathname, token, body, { host: CHECK_HOST });

runScenario('throughput', async (session) => {
  const { startedAt, loadBefore } = session;
  log(`data in ${session.dir}`);
  const db = await startDatabase(session, {
    settings: { max_connections: '200', ...STATEMENT_STATS, 'pg_stat_statements.max': '5000' },
  });
  const { admin, q, url: adminUrl, roleUrl } = await openDatabase(session, db, 'bench', { statementStats: true });
  await createRoles(q, ['bench_service', 'bench_service_rl', 'bench_floor', 'bench_fewest']);
  const pgVersion = (await q<{ v: string }>(`select current_setting('server_version') as v`)).rows[0]!.v;

  // ---- seed -------------------------------------------------------------------------------
  let t = Date.now();
  const world = await seedWorld(admin);
  const { main: mainUser, others, growth: growthUsers, inProject, resetInProject, totalTasks, plannedPool, middle, mainPages, farDue, loadTaskStates, loadProjectStates } = world;
  log(`seeded ${world.users} users, ${totalTasks} tasks in ${((Date.now() - t) / 1000).toFixed(1)} s`);

  // ---- request scripts ----------------------------------------------------------------------
  const { createMain, changeState: changeStateOf, changeStateSpread, createSpread, createInProject, getTask, startPause, mixed } = scriptsOf(world, CONNECTIONS);

  // ---- statements per request, in-process --------------------------------------------
  t = Date.now();
  const counts: Record<string, number[]> = {};
  const count = async (app: CountingApp, key: string, r: BenchRequest) => {
    const res = await app.request(r.method, r.path, r.token, r.body);
    if (res.status >= 300) throw new Error(`${key}: ${r.method} ${r.path} answered ${res.status} ${res.text.slice(0, 200)}`);
    (counts[key] ??= []).push(res.sql.length);
    return res;
  };
  const sqlOf: Record<string, string[]> = {};
  {
    const app = await startCountingApp(adminUrl);
    for (const page of [1, 2, 100, mainPages, mainPages + 1]) {
      const res = await count(app, 'list tasks', { method: 'GET', path: `/api/users/me/tasks?page=${page}`, token: mainUser.token });
      sqlOf[page === 1 ? 'list tasks, page 1' : 'list tasks'] ??= res.sql;
    }
    for (let page = 1; page <= 8; page++) await count(app, 'list projects', { method: 'GET', path: `/api/users/me/projects?page=${page}`, token: mainUser.token });
    for (const id of middle.slice(0, 3)) await count(app, 'get task', { method: 'GET', path: `/api/tasks/${id}`, token: mainUser.token });
    for (let i = 0; i < 3; i++) {
      const res = await count(app, 'create task', { method: 'POST', path: '/api/users/me/tasks', token: mainUser.token, body: { task: { label: `count ${i}` } } });
      sqlOf['create task'] ??= res.sql;
    }
    for (let i = 0; i < 3; i++) {
      const body = { task: { label: `count ${i}`, project_id: inProject.project } };
      const res = await count(app, 'create task in a project', { method: 'POST', path: '/api/users/me/tasks', token: inProject.user.token, body });
      sqlOf['create task in a project'] ??= res.sql;
    }
    for (const id of plannedPool.slice(0, 2)) {
      for (const state of ['finished', 'planned']) {
        await count(app, 'change task state', { method: 'PUT', path: `/api/tasks/${id}/state`, token: mainUser.token, body: { task: { state } } });
      }
    }
    for (let i = 0; i < 3; i++) {
      await count(app, 'reorder task', { method: 'PUT', path: `/api/tasks/${middle[i * 50]}/order`, token: mainUser.token, body: { task: { order: 5_100 - i * 60 } } });
    }
    const spare = others[others.length - 1]!;
    for (let i = 0; i < 2; i++) {
      await count(app, 'start project', { method: 'PUT', path: `/api/projects/${spare.projects[1]}/state`, token: spare.token, body: { project: { state: 'started', due_at: farDue } } });
      await count(app, 'pause project', { method: 'PUT', path: `/api/projects/${spare.projects[1]}/state`, token: spare.token, body: { project: { state: 'paused' } } });
    }
    for (const [label, user] of growthUsers) {
      const pages = Math.ceil(user.tasks / PAGE);
      await count(app, `list tasks p.1 (${label})`, { method: 'GET', path: '/api/users/me/tasks?page=1', token: user.token });
      await count(app, `list tasks (${label})`, { method: 'GET', path: `/api/users/me/tasks?page=${pages}`, token: user.token });
      const mid = Math.floor(user.tasks / 2);
      const ids = await taskIdsByOrder(admin, user.id, mid - 99, mid + 100);
      for (let i = 0; i < 2; i++) {
        await count(app, `reorder task (${label})`, { method: 'PUT', path: `/api/tasks/${ids[i]}/order`, token: user.token, body: { task: { order: mid + 100 - i } } });
      }
    }
    await app.close();
    const limited = await startCountingApp(adminUrl, { authPerMinute: 0, perMinute: 1_000_000_000 });
    for (const page of [1, 2, 3]) {
      const res = await count(limited, 'list tasks, rate limiter on', { method: 'GET', path: `/api/users/me/tasks?page=${page}`, token: mainUser.token });
      sqlOf['list tasks, rate limiter on'] ??= res.sql;
    }
    await limited.close();
  }
  const avg = (key: string) => counts[key]!.reduce((a, b) => a + b, 0) / counts[key]!.length;
  const mixedStatements =
    (MIX.listTasks * avg('list tasks') + MIX.listProjects * avg('list projects') + MIX.getTask * avg('get task') +
      MIX.create * avg('create task') + MIX.changeState * avg('change task state') + MIX.reorder * avg('reorder task')) / 100;
  const statementsOf = (scenario: string): string => {
    if (scenario === 'start/pause project') return `${range(counts['start project']!)} / ${range(counts['pause project']!)}`;
    if (scenario === 'mixed 70% reads') return `${f1(mixedStatements)} avg`;
    return counts[scenario] ? range(counts[scenario]) : '—';
  };
  log(`statements counted in-process in ${((Date.now() - t) / 1000).toFixed(1)} s: ${JSON.stringify(Object.fromEntries(Object.entries(counts).map(([k, v]) => [k, range(v)])))}`);


  // ---- build, start, check the floors -----------------------------------------------------
  buildService();
  const service = await startBuiltService(session, { name: 'service', role: 'bench_service', roleUrl });
  const serviceRl = await startBuiltService(session, { name: 'service+rl', role: 'bench_service_rl', roleUrl, env: { RATE_LIMIT_PER_MINUTE: '1000000000' } });
  const floor = await startFloor(session, { name: 'floor', role: 'bench_floor', file: 'floor-server.ts', roleUrl });

  const equivalence: string[] = [];
  for (const page of [1, 2, 100, mainPages, mainPages + 1]) {
    const path_ = `/api/users/me/tasks?page=${page}`;
    const [s, fl] = await Promise.all([raw(service.url, 'GET', path_, mainUser.token), raw(floor.url, 'GET', path_, mainUser.token)]);
    const same = s.status === fl.status && s.text === fl.text;
    equivalence.push(`list page ${page}: ${same ? `identical (${s.text.length} bytes)` : 'DIFFERENT'}`);
    if (!same) log(`floor differs on ${path_}:\n service ${s.status} ${s.text.slice(0, 400)}\n floor   ${fl.status} ${fl.text.slice(0, 400)}`);
  }
  {
    const made = await raw(floor.url, 'POST', '/api/users/me/tasks', mainUser.token, { task: { label: 'floor equivalence check' } });
    const id = JSON.parse(made.text).data.id as number;
    const seen = await raw(service.url, 'GET', `/api/tasks/${id}`, mainUser.token);
    const same = made.status === 201 && seen.status === 200 && made.text === seen.text;
    equivalence.push(`create: floor's 201 body ${same ? 'identical to' : 'DIFFERENT from'} the service's GET /api/tasks/${id}`);
    if (!same) log(`floor create differs:\n floor   ${made.text}\n service ${seen.text}`);
  }
  log(`floor equivalence: ${equivalence.join('; ')}`);
  const fewest = await startFloor(session, { name: 'fewest', role: 'bench_fewest', file: 'fewest-floor.ts', roleUrl });
  const spare = others[others.length - 1]!;
  const fewestCheck = await checkFloor({
    serviceUrl: service.url,
    floorUrl: fewest.url,
    databaseUrl: adminUrl,
    raw,
    main: mainUser,
    spare,
    mainPages,
    plannedTask: plannedPool[plannedPool.length - 1]!,
    middle,
    farDue,
    inProject,
  });
  log(`fewest floor check (${fewestCheck.ok ? 'all identical' : 'DIFFERENCES'}):\n  ${fewestCheck.lines.join('\n  ')}`);
  if (process.env.BENCH_CHECK_ONLY) return;

  // Warm-up (JIT, pools, caches), not reported.
  for (const target of [service, serviceRl, floor, fewest]) {
    await runLoad(target.url, listTasks(mainUser, mainPages), { connections: CONNECTIONS, seconds: 3 });
    target.peakMb = memory(target.pid).hwmMb;
  }
  const startupPeak = { service: service.peakMb, floor: floor.peakMb, fewest: fewest.peakMb };

  // ---- scenarios ----------------------------------------------------------------------------
  const ourPids = [process.pid, db.pid!, service.pid, serviceRl.pid, floor.pid, fewest.pid];
  const waitQuiet = quietWait(ourPids, num('BENCH_QUIET_WAIT', 240));
  const { measure } = meter({ client: admin, connections: CONNECTIONS, quiet: waitQuiet, ourPids });
  const rows: Row[] = [];
  const record = (table: 'main' | 'growth', target: Target, name: string, slices: Slice[], statements: string): Row => {
    const row = rowOf(table, target, name, slices, statements);
    rows.push(row);
    return row;
  };
  const scenario = async (table: 'main' | 'growth', target: Target, name: string, script: Script, seconds: number, statements: string) =>
    record(table, target, name, [await measure(target, script, seconds)], statements);
  /**
   * Targets in turns, ROUNDS slices each (rotating which goes first), each slice after a
   * 1 s unrecorded warm-up: all see the same machine, so on a shared host their ratio
   * holds even when the absolute figures move.
   */
  const inTurns = async (name: string, script: () => Script, targets: Array<[Target, string, string]>, before?: () => Promise<void>) => {
    const slices = targets.map(() => [] as Slice[]);
    await takeTurns(targets, ROUNDS, 'rotate', async ([target], i) => {
      await before?.();
      slices[i]!.push(await measure(target, script(), SECONDS / ROUNDS, 1));
    });
    return targets.map(([target, label, statements], i) => record('main', target, label || name, slices[i]!, statements));
  };
  const few = (scenario: string): string => FEWEST_STATEMENTS[scenario] ?? '—';
  /** Every scenario: the service and the fewest floor in turns, and the mirror floor where it answers. */
  const compared: Array<{ scenario: string; service: Row; fewest: Row; mirror?: Row }> = [];
  const compare = async (name: string, script: () => Script, key: string, options: { mirror?: boolean; before?: () => Promise<void>; extra?: Array<[Target, string, string]> } = {}) => {
    if (ONLY && !ONLY.some((prefix) => name.startsWith(prefix))) return [];
    const targets: Array<[Target, string, string]> = [
      [service, '', statementsOf(key)],
      [fewest, '', few(key)],
      ...(options.mirror ? [[floor, '', statementsOf(key)] as [Target, string, string]] : []), // the mirror sends the service's statements
      ...(options.extra ?? []),
    ];
    const out = await inTurns(name, script, targets, options.before);
    compared.push({ scenario: name, service: out[0]!, fewest: out[1]!, mirror: options.mirror ? out[2] : undefined });
    return out;
  };

  const [sList, , fList, rlList] = (await compare('list tasks', () => listTasks(mainUser, mainPages), 'list tasks', {
    mirror: true,
    extra: [[serviceRl, 'list tasks, rate limiter on', statementsOf('list tasks, rate limiter on')]],
  })) as Array<Row | undefined>;
  await compare('list projects', () => listProjects(mainUser, 8), 'list projects');
  await compare('get task', () => getTask, 'get task');
  await compare('change task state', () => (c) => changeStateOf(c), 'change task state', { before: loadTaskStates });
  await compare('change task state, 50 users', () => changeStateSpread, 'change task state', { before: loadTaskStates });
  await compare('reorder task (middle of 10k)', () => reorderIn(mainUser, middle, 4_901), 'reorder task', { before: async () => undefined });
  await compare('start/pause project', () => startPause, 'start/pause project', { before: loadProjectStates });
  const [sCreate, , fCreate] = (await compare('create task', () => createMain, 'create task', { mirror: true })) as Array<Row | undefined>;
  await compare('create task, 50 users', () => createSpread, 'create task', { mirror: true });
  // One user, every connection: the owner's lock serialises them; the project's document (every
  // task id of it) is the second event of each, so the project is reset before every slice.
  await compare('create task in a project, one user', () => createInProject, 'create task in a project', { before: resetInProject });
  await compare('mixed 70% reads', () => mixed, 'mixed 70% reads', { before: loadTaskStates });

  // ---- idle latency: one request at a time, the targets alternating request by request ----
  const idleRows: Array<{ scenario: string; results: Array<{ target: Target; median: number; p90: number }> }> = [];
  const idle = async (name: string, script: Script, targets: Target[]) => {
    await loadTaskStates();
    await waitQuiet();
    const next = script(0);
    const agents = targets.map(() => new http.Agent({ keepAlive: true, maxSockets: 1 }));
    const times = targets.map(() => [] as number[]);
    let failed = 0;
    for (let i = 0; i < IDLE_REQUESTS + 20; i++) {
      for (let k = 0; k < targets.length; k++) {
        const j = (k + i) % targets.length;
        const r = next();
        const t0 = performance.now();
        const status = await statusOf(targets[j]!.url, r, agents[j]!);
        const ms = performance.now() - t0;
        if (status >= 300) failed++;
        if (i >= 20) times[j]!.push(ms);
      }
    }
    for (const a of agents) a.destroy();
    const results = targets.map((target, j) => {
      const sorted = ascending(times[j]!);
      return { target, median: quantile(sorted, 0.5), p90: quantile(sorted, 0.9) };
    });
    idleRows.push({ scenario: name, results });
    log(`idle ${name}: ${results.map((r) => `${r.target.name} median ${r.median.toFixed(2)} ms p90 ${r.p90.toFixed(2)} ms`).join(', ')}${failed ? `  NON-2xx ${failed}` : ''}`);
  };
  // BENCH_ONLY runs the compared rows it names, nothing after them; `idle` names these rows.
  if (!ONLY || ONLY.includes('idle')) {
    await idle('change task state', (c) => changeStateOf(c), [service, fewest]);
    await idle('create task', createMain, [service, fewest, floor]);
    await idle('list tasks', listTasks(mainUser, mainPages), [service, fewest, floor]);
    await idle('list projects', listProjects(mainUser, 8), [service, fewest]);
  }

  for (const [label, user] of ONLY ? [] : growthUsers) {
    const pages = Math.ceil(user.tasks / PAGE);
    const mid = Math.floor(user.tasks / 2);
    const ids = await taskIdsByOrder(admin, user.id, mid - 99, mid + 100);
    await scenario('growth', service, `list tasks p.1 (${label})`, listFirstPage(user.token), GROWTH_SECONDS, statementsOf(`list tasks p.1 (${label})`));
    await scenario('growth', service, `list tasks (${label})`, listTasks(user, pages), GROWTH_SECONDS, statementsOf(`list tasks (${label})`));
    await scenario('growth', service, `reorder task (${label})`, reorderIn(user, ids, mid - 99), GROWTH_SECONDS, statementsOf(`reorder task (${label})`));
  }

  // ---- EXPLAIN ANALYZE of the list queries, per size -----------------------------------
  const explainRows: string[] = [];
  const toPg = (s: string) => {
    let n = 0;
    return s.replace(/\?/g, () => `$${++n}`);
  };
  const cutoff = new Date(Math.floor(Date.now() / 86_400_000) * 86_400_000 - 14 * 86_400_000);
  const explainMs = async (sql: string, params: unknown[]) => {
    const times: number[] = [];
    let plan = '';
    for (let i = 0; i < 3; i++) {
      const { rows: r } = await q(`explain (analyze, format json) ${toPg(sql)}`, params);
      const doc = (r[0] as Record<string, any>)['QUERY PLAN'][0];
      times.push(doc['Execution Time'] as number);
      const top = doc.Plan;
      const inner = top.Plans?.[0];
      plan = `${top['Node Type']}${inner ? ` ← ${inner['Node Type']}${inner['Index Name'] ? ` (${inner['Index Name']})` : ''}` : ''}`;
    }
    times.sort((a, b) => a - b);
    return { ms: times[1]!, plan };
  };
  for (const [label, user] of ONLY ? [] : growthUsers) {
    const pages = Math.ceil(user.tasks / PAGE);
    // The list's own statement, made by the service's code for this user and page.
    const page = (offset: number) => {
      const statement = taskPageStatement(user.id, { finishedSince: cutoff }, PAGE, offset);
      return explainMs(statement.sql, statement.params);
    };
    const first = await page(0);
    const last = await page((pages - 1) * PAGE);
    explainRows.push(`| ${label} | ${first.ms.toFixed(2)} | ${last.ms.toFixed(2)} | ${last.plan} |`);
  }

  // ---- report ---------------------------------------------------------------------------
  const serviceEnd = memory(service.pid);
  for (const target of [service, serviceRl, floor, fewest]) target.peakMb = Math.max(target.peakMb, memory(target.pid).hwmMb);
  const table = (which: 'main' | 'growth') => rowTable(rows.filter((r) => r.table === which));
  const failures = rows.filter((r) => r.load.non2xx > 0 || r.load.errors > 0);
  const sameIds = (a: Row, b: Row) => a.queryIds.size === b.queryIds.size && [...a.queryIds].every((id) => b.queryIds.has(id));
  const ratioList = sList && fList ? (sList.load.rps / fList.load.rps).toFixed(2) : '—';
  const ratioCreate = sCreate && fCreate ? (sCreate.load.rps / fCreate.load.rps).toFixed(2) : '—';
  const sameIdsOf = (a?: Row, b?: Row) => (a && b ? (sameIds(a, b) ? 'yes' : 'no') : '—');
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  /** A target in no row (BENCH_ONLY) was never sampled. */
  const pss = (target: Target) => (target.pssPeakMb > 0 ? `${f0(target.pssPeakMb)} MB` : '— (in no row)');
  // Issue #15: every scenario against the fewest floor (and the mirror floor where it answers).
  const throughputTarget: Record<string, number> = {
    'list tasks': 1.0, 'list projects': 0.8, 'change task state': 0.8, 'change task state, 50 users': 0.8,
    'create task': 0.8, 'create task, 50 users': 0.8, 'mixed 70% reads': 0.8,
  };
  const mark = (ratio: number, limit: number, atLeast: boolean) => `${ratio.toFixed(2)} ${(atLeast ? ratio >= limit : ratio <= limit) ? '✓' : '✗'}`;
  const fewestTable = [
    '| scenario | service req/s | fewest req/s | service ÷ fewest | target | service ÷ mirror | p99 ms service / fewest | p99 ratio (≤ 1.5) | peak PSS MB service / fewest | PSS ratio (≤ 1.3) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...compared.map(({ scenario, service: sv, fewest: fw, mirror }) => {
      const goal = throughputTarget[scenario];
      return `| ${scenario} | ${f0(sv.load.rps)} | ${f0(fw.load.rps)} | ${goal === undefined ? (sv.load.rps / fw.load.rps).toFixed(2) : `**${mark(sv.load.rps / fw.load.rps, goal, true)}**`} | ${goal === undefined ? '—' : `≥ ${goal.toFixed(1)}`} | ` +
        `${mirror ? (sv.load.rps / mirror.load.rps).toFixed(2) : '—'} | ${sv.load.p99} / ${fw.load.p99} | ${mark(sv.load.p99 / Math.max(1, fw.load.p99), 1.5, false)} | ` +
        `${f0(sv.pssMb)} / ${f0(fw.pssMb)} | ${mark(sv.pssMb / fw.pssMb, 1.3, false)} |`;
    }),
  ];
  const idleTable = [
    '| request (one at a time) | service median / p90 ms | fewest median / p90 ms | mirror median / p90 ms | service ÷ fewest, median (≤ 2) | p90 |',
    '|---|---:|---:|---:|---:|---:|',
    ...idleRows.map(({ scenario, results }) => {
      const [sv, fw, mirror] = results as [(typeof results)[0], (typeof results)[0], (typeof results)[0] | undefined];
      const pair = (r?: (typeof results)[0]) => (r ? `${r.median.toFixed(2)} / ${r.p90.toFixed(2)}` : '—');
      return `| ${scenario} | ${pair(sv)} | ${pair(fw)} | ${pair(mirror)} | **${mark(sv.median / fw.median, 2, false)}** | ${(sv.p90 / fw.p90).toFixed(2)} |`;
    }),
  ];
  const report = [
    `### ${utcMinute(startedAt)} UTC`,
    '',
    `Command: \`npm run bench\` (BENCH_SECONDS=${SECONDS}, BENCH_GROWTH_SECONDS=${GROWTH_SECONDS}, BENCH_CONNECTIONS=${CONNECTIONS}, BENCH_ROUNDS=${ROUNDS}` +
      `${ONLY ? `, BENCH_ONLY=${ONLY.join(',')}: only those rows${ONLY.includes('idle') ? ' and the idle latency' : ', no idle latency'}, no growth or EXPLAIN` : ''}). ` +
      `Machine: ${os.availableParallelism()} CPUs (nproc; ${cpu}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.platform()} ${os.release()}; ` +
      `Node ${process.version}; PostgreSQL ${pgVersion} (embedded, fsync/synchronous_commit/full_page_writes off, pg_stat_statements on). ` +
      `PostgreSQL, the service, the floor and autocannon all share these CPUs. ${CONNECTIONS} connections, ${SECONDS} s per row, ${GROWTH_SECONDS} s per growth row.`,
    '',
    `Seed: ${totalTasks} tasks (bench_main 10,000 over 200 projects: 3,000 planned, 300 finished 30 days ago, 200 abandoned; 50 users × 1,000 over 10 projects; bench_in_project 1,000 over 10 projects, the first started; growth users 1k/10k/100k).`,
    '',
    `Mirror floor check: ${equivalence.join('; ')}. Same statements as the service (pg_stat_statements query ids; a note, not a condition: the service's statements change as its write path does): list ${sameIdsOf(sList, fList)}, create ${sameIdsOf(sCreate, fCreate)}.`,
    '',
    `Fewest floor check (bench/floors/floor-check.ts; ${fewestCheck.ok ? 'all identical' : '**DIFFERENCES**'}): ${fewestCheck.lines.join('; ')}.`,
    '',
    `Against the fewest floor (targets of "Writes as fast as reads"; ${ROUNDS} slices per target in turns; ✓ met, ✗ not met):`,
    '',
    ...fewestTable,
    '',
    ...(idleRows.length === 0 ? [] : [
      `Idle latency: ${IDLE_REQUESTS} requests per target, one at a time, the targets alternating request by request (after 20 unrecorded each):`,
      '',
      ...idleTable,
      '',
    ]),
    'Every row:',
    '',
    ...table('main'),
    '',
    ...(sList || sCreate
      ? [
          `**Mirror floor ratio** (service req/s ÷ mirror floor req/s): list tasks **${ratioList}**, create task **${ratioCreate}**. ` +
            (sList && rlList
              ? `List tasks p99 at ${CONNECTIONS} connections: **${sList.load.p99} ms** (target < 50 ms). ` +
                `Rate limiter on costs ${f0((1 - rlList.load.rps / sList.load.rps) * 100)} % of list throughput.`
              : ''),
          '',
        ]
      : []),
    ...(ONLY ? [] : [
      'Growth (one user, service):',
      '',
      ...table('growth'),
      '',
      'EXPLAIN ANALYZE of the list statement (page and total in one; median of 3, ms):',
      '',
      '| tasks | page 1 | last page | plan (last page) |',
      '|---|---:|---:|---|',
      ...explainRows,
      '',
    ]),
    `Peak RSS (VmHWM${peakResettable() ? ', reset per row' : ''}): service ${f0(service.peakMb)} MB (RSS ${f0(service.readyMb)} MB once ready, peak ${f0(startupPeak.service)} MB after warm-up, RSS ${f0(serviceEnd.rssMb)} MB at the end), ` +
      `service with rate limiter ${f0(serviceRl.peakMb)} MB, mirror floor ${f0(floor.peakMb)} MB (RSS ${f0(floor.readyMb)} MB once ready, peak ${f0(startupPeak.floor)} MB after warm-up), ` +
      `fewest floor ${f0(fewest.peakMb)} MB (RSS ${f0(fewest.readyMb)} MB once ready, peak ${f0(startupPeak.fewest)} MB after warm-up). ` +
      `Peak PSS of the process tree, sampled every second during the rows: service ${pss(service)}, service with rate limiter ${pss(serviceRl)}, mirror floor ${pss(floor)}, fewest floor ${pss(fewest)}.`,
    `Service log lines at warn or worse: ${service.logLines + serviceRl.logLines}. ` +
      `Rows with non-2xx or errors: ${failures.length === 0 ? 'none' : failures.map((r) => `${r.target} ${r.scenario}: ${JSON.stringify(r.load.statuses)} ${r.load.firstFailure ?? ''}`).join('; ')}.`,
    `Load average (1/5/15 min) before the run: ${loadBefore.map((x) => x.toFixed(2)).join(' / ')}; after: ${os.loadavg().map((x) => x.toFixed(2)).join(' / ')}. ` +
      `"other CPU %" is the share of the whole machine used during the row by processes outside the bench (other people's test runs); rows where it is high were slowed by them. Hypervisor steal over the run: ${f1(rows.reduce((a, r) => a + r.stealPercent, 0) / Math.max(1, rows.length))} % on average.`,
    `Whole run: ${f0((Date.now() - startedAt.getTime()) / 1000)} s, of which ${f0(waitQuiet.waitedMs() / 1000)} s waiting for other processes to go quiet.`,
  ].join('\n');
  log('\n' + report);
  log('\nSQL of one list-tasks request, page 2 (in-process log):\n' + sqlOf['list tasks']!.map((s) => '  ' + s).join('\n'));
  log('SQL of one create-task request:\n' + sqlOf['create task']!.map((s) => '  ' + s).join('\n'));
  log('SQL of one create-task request in a project:\n' + sqlOf['create task in a project']!.map((s) => '  ' + s).join('\n'));
  log('SQL of one list-tasks request with the rate limiter on:\n' + sqlOf['list tasks, rate limiter on']!.map((s) => '  ' + s).join('\n'));
  writeResult(session, report, { file: process.env.BENCH_OUT });
});
