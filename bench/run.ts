/**
 * Load bench: `npm run bench`. Embedded PostgreSQL in a temp folder, bulk-seeded data, the
 * built service (`node dist/src/main.js`, NODE_ENV=production) and the bare floor server
 * (bench/floor-server.ts) as child processes, autocannon against each. Prints a Markdown
 * table; see bench/README.md. Env: BENCH_SECONDS (8), BENCH_CONNECTIONS (32).
 */
import { execSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { openOrm } from '../src/db/database.js';
import { startEmbeddedDatabase } from '../src/db/embedded.js';
import { hashAccessToken } from '../src/users/credentials.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const GROWTH_SECONDS = Number(process.env.BENCH_GROWTH_SECONDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const ROOT = path.resolve(import.meta.dirname, '..');

/** SQL statements per request, as asserted by test/query-count.test.ts. */
const STATEMENTS: Record<string, string> = {
  'list tasks': '3',
  'list projects': '4',
  'create task': '6',
  'change task state': '5',
  'reorder task': '7',
  'start/pause project': '9 / 8',
  'mixed 70% reads': '—',
  'get task': '2',
};

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

async function waitReady(url: string, child: ChildProcess, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`child exited with ${child.exitCode}`);
    try {
      const r = await fetch(url + '/readyz');
      if (r.ok) return;
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} not ready`);
}

function memOf(pid: number): { hwm: number; rss: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { hwm: kb('VmHWM') / 1024, rss: kb('VmRSS') / 1024 };
}

interface Row {
  target: string;
  scenario: string;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  statements: string;
  rssMb: number;
}
const rows: Row[] = [];

type Req = { method: string; path: string; body?: string; headers?: Record<string, string> };

async function load(
  target: string,
  scenario: string,
  url: string,
  pid: number,
  token: string,
  next: (i: number) => Req,
  seconds = SECONDS,
): Promise<Row> {
  let i = 0;
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: seconds,
    headers: { authorization: token, 'content-type': 'application/json' },
    requests: [
      {
        setupRequest: (req: any) => {
          const r = next(i++);
          return { ...req, method: r.method, path: r.path, body: r.body, headers: { ...req.headers, ...r.headers } };
        },
      },
    ],
  });
  const row: Row = {
    target,
    scenario,
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    statements: STATEMENTS[scenario.replace(/ \(.*\)$/, '')] ?? '',
    rssMb: memOf(pid).rss,
  };
  rows.push(row);
  console.log(
    `${target.padEnd(8)} ${scenario.padEnd(34)} ${row.rps.toFixed(0).padStart(7)} req/s  p50 ${row.p50} ms  p99 ${row.p99} ms  non2xx ${row.non2xx}  errors ${row.errors}  rss ${row.rssMb.toFixed(0)} MB`,
  );
  return row;
}

async function main() {
  const started = Date.now();
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'planning-bench-'));
  await fs.chmod(dir, 0o755);
  console.log(`data in ${dir}`);
  const db = await startEmbeddedDatabase({
    dataDir: dir,
    settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', max_connections: '200' },
  });
  const children: ChildProcess[] = [];
  const cleanup = async () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
    await db.stop().catch(() => undefined);
    await fs.rm(dir, { recursive: true, force: true }).catch(() => undefined);
  };
  try {
    await db.ensureDatabase('bench');
    const databaseUrl = db.urlFor('bench');
    const orm = await openOrm(databaseUrl, { migrate: true });
    await orm.close(true);

    // ---- seed -------------------------------------------------------------------------
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    const q = (text: string, params: unknown[] = []) => client.query(text, params);
    const newUser = async (name: string, tasks: number, projects: number, planned = 0) => {
      const { rows: u } = await q(
        `insert into users (username, password_hash, created_at) values ($1, 'scrypt$1024$8$x$x', now()) returning id`,
        [name],
      );
      const id = u[0].id as number;
      if (projects > 0) {
        await q(
          `insert into projects (user_id, name, slug, created_at)
           select $1, 'Project ' || g, 'project ' || g, now() from generate_series(1, $2::int) g`,
          [id, projects],
        );
      }
      await q(
        `with p as (select array_agg(id order by id) ids from projects where user_id = $1)
         insert into tasks (user_id, project_id, label, "order", planned_count, state, started_at, planned_at, created_at)
         select $1, case when cardinality(p.ids) is null then null else p.ids[1 + (g % cardinality(p.ids))] end,
                'Task ' || g, g,
                case when g <= $3 then 1 else 0 end,
                case when g <= $3 then 'planned' else 'newed' end,
                case when g <= $3 then now() else null end,
                case when g <= $3 then now() else null end,
                now()
         from generate_series(1, $2::int) g, p`,
        [id, tasks, planned],
      );
      const token = randomBytes(32).toString('base64url');
      await q(
        `insert into access_tokens (user_id, token_hash, created_at, expires_at) values ($1, $2, now(), now() + interval '10 years')`,
        [id, hashAccessToken(token)],
      );
      return { id, token };
    };
    const seedStart = Date.now();
    const main = await newUser('bench_main', 10_000, 200, 3_000);
    for (let u = 0; u < 50; u++) await newUser(`bench_other_${u}`, 1_000, 10);
    const g1k = await newUser('bench_1k', 1_000, 20);
    const g100k = await newUser('bench_100k', 100_000, 200);
    await q('analyze');
    const taskIds = async (userId: number, from: number, to: number) =>
      (await q('select id from tasks where user_id = $1 and "order" between $2 and $3 order by "order"', [userId, from, to])).rows.map(
        (r) => r.id as number,
      );
    const plannedPool = await taskIds(main.id, 1, 3_000);
    const middle = await taskIds(main.id, 4_900, 5_100);
    const [oneProject] = (await q('select id from projects where user_id = $1 order by id limit 1', [main.id])).rows;
    console.log(`seeded in ${((Date.now() - seedStart) / 1000).toFixed(1)} s`);

    // ---- build and start the service and the floor ------------------------------------
    execSync('npm run build', { cwd: ROOT, stdio: 'inherit' });
    const servicePort = await freePort();
    const service = spawn(process.execPath, ['dist/src/main.js'], {
      cwd: ROOT,
      stdio: ['ignore', 'inherit', 'inherit'],
      env: {
        ...process.env,
        NODE_ENV: 'production',
        DATABASE_URL: databaseUrl,
        PORT: String(servicePort),
        HOST: '127.0.0.1',
        RATE_LIMIT_PER_MINUTE: '0',
        RATE_LIMIT_AUTH_PER_MINUTE: '0',
        LOG_LEVEL: 'warn',
      },
    });
    children.push(service);
    const floorPort = await freePort();
    const floor = spawn(process.execPath, ['--import', 'tsx', 'bench/floor-server.ts'], {
      cwd: ROOT,
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, NODE_ENV: 'production', DATABASE_URL: databaseUrl, PORT: String(floorPort), HOST: '127.0.0.1' },
    });
    children.push(floor);
    const serviceUrl = `http://127.0.0.1:${servicePort}`;
    const floorUrl = `http://127.0.0.1:${floorPort}`;
    await Promise.all([waitReady(serviceUrl, service), waitReady(floorUrl, floor)]);
    const spid = service.pid!;
    const fpid = floor.pid!;

    const pages = (n: number) => Math.ceil(n / 50);
    const listTasks = (n: number) => (i: number): Req => ({ method: 'GET', path: `/api/users/me/tasks?page=${1 + (i % pages(n))}` });
    const createTask = (i: number): Req => ({ method: 'POST', path: '/api/users/me/tasks', body: JSON.stringify({ task: { label: `bench ${i}` } }) });
    const changeState = (i: number): Req => {
      const id = plannedPool[i % plannedPool.length]!;
      const round = Math.floor(i / plannedPool.length);
      return { method: 'PUT', path: `/api/tasks/${id}/state`, body: JSON.stringify({ task: { state: round % 2 === 0 ? 'finished' : 'planned' } }) };
    };
    const reorder = (ids: number[], base: number) => (i: number): Req => ({
      method: 'PUT',
      path: `/api/tasks/${ids[(i * 7) % ids.length]}/order`,
      body: JSON.stringify({ task: { order: base + ((i * 37) % 200) } }),
    });
    const farDue = Math.floor(Date.now() / 1000) + 365 * 86_400;
    const startPause = (i: number): Req => ({
      method: 'PUT',
      path: `/api/projects/${oneProject.id}/state`,
      body: JSON.stringify({ project: i % 2 === 0 ? { state: 'started', due_at: farDue } : { state: 'paused' } }),
    });
    const mixed = (i: number): Req => {
      const r = (i * 7919) % 100;
      if (r < 35) return listTasks(10_000)(i);
      if (r < 55) return { method: 'GET', path: `/api/users/me/projects?page=${1 + (i % 8)}` };
      if (r < 70) return { method: 'GET', path: `/api/tasks/${middle[i % middle.length]}` };
      if (r < 80) return createTask(i);
      if (r < 90) return changeState(i);
      return reorder(middle, 4_900)(i);
    };

    // Warm-up (JIT, pools), not reported.
    await autocannon({ url: serviceUrl + '/api/users/me/tasks', connections: 8, duration: 2, headers: { authorization: main.token } });
    await autocannon({ url: floorUrl + '/api/users/me/tasks', connections: 8, duration: 2, headers: { authorization: main.token } });

    const sList = await load('service', 'list tasks', serviceUrl, spid, main.token, listTasks(10_000));
    const fList = await load('floor', 'list tasks', floorUrl, fpid, main.token, listTasks(10_000));
    const sCreate = await load('service', 'create task', serviceUrl, spid, main.token, createTask);
    const fCreate = await load('floor', 'create task', floorUrl, fpid, main.token, createTask);
    await load('service', 'list projects', serviceUrl, spid, main.token, (i) => ({ method: 'GET', path: `/api/users/me/projects?page=${1 + (i % 8)}` }));
    await load('service', 'change task state', serviceUrl, spid, main.token, changeState);
    await load('service', 'reorder task (middle of 10k)', serviceUrl, spid, main.token, reorder(middle, 4_900));
    await load('service', 'start/pause project', serviceUrl, spid, main.token, startPause);
    await load('service', 'mixed 70% reads', serviceUrl, spid, main.token, mixed);

    // Growth: one user with 1k, 10k and 100k tasks.
    const growth: Array<[string, { id: number; token: string }, number]> = [
      ['1k', g1k, 1_000],
      ['10k', main, 10_000],
      ['100k', g100k, 100_000],
    ];
    for (const [label, user, n] of growth) {
      const mid = Math.floor(n / 2);
      const ids = await taskIds(user.id, mid - 100, mid + 100);
      await load('service', `list tasks (${label})`, serviceUrl, spid, user.token, listTasks(n), GROWTH_SECONDS);
      await load('service', `reorder task (${label})`, serviceUrl, spid, user.token, reorder(ids, mid - 100), GROWTH_SECONDS);
    }
    const serviceMem = memOf(spid);
    const floorMem = memOf(fpid);
    await client.end();

    // ---- report -----------------------------------------------------------------------
    const lines = [
      `| target | scenario | req/s | p50 ms | p99 ms | non-2xx | errors | SQL/req | RSS MB |`,
      `|---|---|---:|---:|---:|---:|---:|---:|---:|`,
      ...rows.map(
        (r) =>
          `| ${r.target} | ${r.scenario} | ${r.rps.toFixed(0)} | ${r.p50} | ${r.p99} | ${r.non2xx} | ${r.errors} | ${r.statements} | ${r.rssMb.toFixed(0)} |`,
      ),
    ];
    const ratioList = sList.rps / fList.rps;
    const ratioCreate = sCreate.rps / fCreate.rps;
    console.log('\n' + lines.join('\n'));
    console.log(`\nservice / floor: list tasks ${ratioList.toFixed(2)}, create task ${ratioCreate.toFixed(2)} (target >= 0.5)`);
    console.log(`list tasks p99 at ${CONNECTIONS} connections: ${sList.p99} ms (target < 50 ms)`);
    console.log(`peak RSS (VmHWM): service ${serviceMem.hwm.toFixed(0)} MB, floor ${floorMem.hwm.toFixed(0)} MB`);
    console.log(
      `machine: ${os.cpus().length} CPUs (${os.cpus()[0]?.model}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version}, ${new Date().toISOString()}`,
    );
    console.log(`whole run: ${((Date.now() - started) / 1000).toFixed(0)} s`);
  } finally {
    await cleanup();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
