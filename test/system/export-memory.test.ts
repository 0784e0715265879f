/**
 * The account's export streams with constant memory (API-CONTRACT.md §16), on /api and on
 * /trpc: a user with 100,000 tasks is exported through the service run as a process, as `npm start` runs it
 * but with its old generation capped (OLD_SPACE_MB), whose resident memory (VmRSS of /proc/<pid>/status) is sampled before, throughout and after
 * the export. The document is about 26 MB of JSON, and the tasks as JavaScript objects several
 * times that: an export held whole on its way out would grow the process by far more than the
 * bound here. What grows is V8's young generation reaching its cap; the heap in use after a
 * full collection did not move (0.3 MB over a 100,000-task export, measured in process).
 */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, expect, it } from 'vitest';
import { SERVICE_NODE_FLAGS } from '../../bench/lib/service-flags.js';
import { EXPORT_PAGE_SIZE } from '../../src/users/export-account.js';
import { call, registerUser } from '../helpers/http.js';
import { spawnService, stopServices, type SpawnedService } from '../helpers/spawn-service.js';
import { createTestDatabase } from '../helpers/test-app.js';

const TASKS = 100_000;
const PROJECTS = 20;
/** The account exported first, to warm the service up. */
const WARM_UP_TASKS = 20 * EXPORT_PAGE_SIZE;
/** Growth of the service's resident memory allowed at the peak of the export. */
const MAX_RSS_GROWTH_BYTES = 30 * 1024 * 1024;
/**
 * The service's old generation is capped: an export streams in 32 to 40 MB of it, and one held
 * whole before it is sent (the same document joined into one string, tried once) ends the process
 * out of memory at this cap. Uncapped, V8 grows its heap lazily by what the machine's speed
 * decides (+24 to +29 MB alone, +53 MB in a loaded run): the RSS bound below measured that, not the export.
 */
const OLD_SPACE_MB = 64;
/** A generous bound on the export's time, on a slow shared machine (it takes a few seconds). */
const MAX_EXPORT_MS = 60_000;

let service: SpawnedService | undefined;
afterAll(async () => {
  await stopServices([service]);
});

/** The resident memory of a process, in bytes. */
function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  if (!kib) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(kib[1]) * 1024;
}

/** `n` tasks of the user in plain SQL, in every state, a tenth of them in its projects, orders after its last. */
async function seedTasks(db: pg.Client, userId: number, projectIds: number[], n: number): Promise<void> {
  await db.query(
    `insert into tasks (user_id, project_id, label, "order", planned_count, state, started_at, planned_at, finished_at, abandoned_at, created_at)
     select $1,
            case when g % 10 = 0 and cardinality($2::bigint[]) > 0 then ($2::bigint[])[1 + (g / 10) % cardinality($2::bigint[])] end,
            'Task ' || g,
            u.next_task_order - 1 + g,
            case when g % 5 in (2, 3) then 1 else 0 end,
            (array['newed', 'started', 'planned', 'finished', 'abandoned'])[1 + g % 5],
            case when g % 5 in (1, 2, 3) then now() - interval '400 days' end,
            case when g % 5 in (2, 3) then now() - interval '399 days' end,
            case when g % 5 = 3 then now() - interval '398 days' end,
            case when g % 5 = 4 then now() - interval '300 days' end,
            now() - interval '500 days'
       from generate_series(1, $3::int) g, users u
      where u.id = $1`,
    [userId, `{${projectIds.join(',')}}`, n],
  );
  // The order the user's next task takes (src/db/migrations/…_user_counters.ts).
  await db.query('update users set next_task_order = next_task_order + $2 where id = $1', [userId, n]);
  // What autovacuum does after a bulk insert: without statistics the planner takes the user's
  // tasks for a few and sorts all those after the page's key, on every page.
  await db.query('analyze tasks');
}

/** Reads a streamed answer to its end, sampling the service's memory as it comes; the text and the highest sample. */
async function exportWhileSampling(url: string, token: string, pid: number, path = '/api/users/me/export'): Promise<{ status: number; headers: Headers; text: string; peak: number; ms: number }> {
  let peak = rssOf(pid);
  const sampler = setInterval(() => (peak = Math.max(peak, rssOf(pid))), 20);
  const started = performance.now();
  try {
    const res = await fetch(`${url}${path}`, { headers: { Authorization: token } });
    const decoder = new TextDecoder();
    const parts: string[] = [];
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      parts.push(decoder.decode(chunk, { stream: true }));
      peak = Math.max(peak, rssOf(pid));
    }
    parts.push(decoder.decode());
    const ms = performance.now() - started;
    return { status: res.status, headers: res.headers, text: parts.join(''), peak: Math.max(peak, rssOf(pid)), ms };
  } finally {
    clearInterval(sampler);
  }
}

const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);

it(`exports ${TASKS.toLocaleString('en')} tasks in seconds, the service's memory growing by less than ${MAX_RSS_GROWTH_BYTES / 1024 / 1024} MB (twice that on /trpc)`, async () => {
  const databaseUrl = await createTestDatabase();
  // As `npm start` runs it: NODE_ENV=production, V8's young generation capped as in production
  // (without the cap V8 grows it towards 130 MB under this allocation rate, garbage that is
  // never live: the heap in use after a full collection stays where it was); and OLD_SPACE_MB.
  service = await spawnService({
    DATABASE_URL: databaseUrl,
    WEB_CONCURRENCY: '1',
    NODE_ENV: 'production',
    NODE_OPTIONS: [...SERVICE_NODE_FLAGS, `--max-old-space-size=${OLD_SPACE_MB}`].join(' '),
  });
  const pid = service.child.pid!;
  const big = await registerUser(service.url, 'exporter');
  const small = await registerUser(service.url, 'warm_up');

  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const projectIds: number[] = [];
    for (let i = 1; i <= PROJECTS; i++) {
      const res = await call(service.url, 'POST', '/api/users/me/projects', { token: big.token, body: { project: { name: `project-${i}` } } });
      expect(res.status, res.text).toBe(201);
      projectIds.push(res.body.data.id);
    }
    await seedTasks(db, big.id, projectIds, TASKS);
    await seedTasks(db, small.id, [], WARM_UP_TASKS);
  } finally {
    await db.end();
  }

  // Warm-up: the export's code loaded and compiled, its buffers, pool connection and young
  // generation grown to its cap, on an account of a fifth of the size (an export that held what
  // it sends would need five times as much again for the big one).
  for (let i = 0; i < 3; i++) {
    const warm = await exportWhileSampling(service.url, small.token, pid);
    expect(warm.status).toBe(200);
    expect(JSON.parse(warm.text).tasks).toHaveLength(WARM_UP_TASKS);
  }

  const before = rssOf(pid);
  const { status, headers, text, peak, ms } = await exportWhileSampling(service.url, big.token, pid);
  const after = rssOf(pid);
  console.log(
    `export of ${TASKS} tasks: ${(text.length / 1024 / 1024).toFixed(1)} MB in ${(ms / 1000).toFixed(2)} s; ` +
      `service RSS ${mb(before)} MB before, ${mb(peak)} MB at the peak (+${mb(peak - before)} MB), ${mb(after)} MB after (+${mb(after - before)} MB)`,
  );

  expect(status).toBe(200);
  expect(headers.get('content-disposition')).toBe('attachment; filename="export.json"');
  const document = JSON.parse(text) as { user: { id: number }; projects: unknown[]; tasks: Array<{ id: number; attributes: { state: string } }>; webhooks: unknown[] };
  expect(document.user.id).toBe(big.id);
  expect(document.projects).toHaveLength(PROJECTS);
  expect(document.tasks).toHaveLength(TASKS);
  // Each once, in order of id, every state among them.
  expect(document.tasks.every((task, i) => i === 0 || task.id > document.tasks[i - 1]!.id)).toBe(true);
  expect(new Set(document.tasks.map((task) => task.attributes.state))).toEqual(new Set(['newed', 'started', 'planned', 'finished', 'abandoned']));
  expect(document.webhooks).toEqual([]);

  expect(peak - before).toBeLessThan(MAX_RSS_GROWTH_BYTES);
  expect(ms).toBeLessThan(MAX_EXPORT_MS);

  // The same on /trpc (users.export called alone, as the typed client calls it): the same
  // document inside tRPC's envelope, streamed too (whole, each such export grew the process by
  // about 160 MB). Measured once the process has settled at this size of export (the first
  // exports of a size grow V8's heap towards its cap whatever the door: +20 to +50 MB measured,
  // then under 1 MB an export on either door).
  await exportWhileSampling(service.url, big.token, pid);
  const trpcBefore = rssOf(pid);
  const viaTrpc = await exportWhileSampling(service.url, big.token, pid, '/trpc/users.export');
  console.log(`the same on /trpc: ${(viaTrpc.ms / 1000).toFixed(2)} s; service RSS ${mb(trpcBefore)} MB before, ${mb(viaTrpc.peak)} MB at the peak (+${mb(viaTrpc.peak - trpcBefore)} MB)`);
  expect(viaTrpc.status).toBe(200);
  expect(viaTrpc.headers.get('content-type')).toBe('application/json; charset=utf-8');
  expect(JSON.parse(viaTrpc.text)).toEqual({ result: { data: { json: document } } });
  // Twice the REST bound: the heap may still be growing towards its cap here, more on a busy
  // machine whose collector runs late (+52 MB seen once in a loaded CI run, +9 to +18 MB
  // alone); the document built whole grows it by about 160 MB.
  expect(viaTrpc.peak - trpcBefore).toBeLessThan(2 * MAX_RSS_GROWTH_BYTES);
  expect(viaTrpc.ms).toBeLessThan(MAX_EXPORT_MS);
}, 240_000);
