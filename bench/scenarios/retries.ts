/**
 * What Idempotency-Key, ETags and conditional requests cost (`npm run bench:retries`, the
 * last part of `npm run bench`; not part of `npm test`; figures in bench/README.md, each
 * run's report in bench/results/retries-<UTC start>.md):
 *
 *  1. The service as it was before them (BENCH_BASE, a commit) is exported with `git
 *     archive` into a temp folder and built there with this checkout's node_modules; this
 *     checkout is built too.
 *  2. One embedded PostgreSQL, one database for each, each migrated by its own code and
 *     seeded alike (bench/lib/seed.ts: a user with 10,000 tasks over 200 projects).
 *  3. Both services run as children (`node dist/src/main.js`, production, rate limits off)
 *     and take turns, BENCH_ROUNDS slices each, alternating which goes first: list tasks
 *     (page 1) and create task, with no new header. Then the current service alone: create
 *     with a fresh Idempotency-Key per request, and list with a matching If-None-Match.
 *  4. Statements per request, in-process (bench/lib/statements.ts) on the current code: create
 *     with and without a key, list with and without If-None-Match.
 *
 *  5. The same two, one request at a time, alternating request by request: median latencies.
 *
 * Env: BENCH_BASE (1da0a4c), BENCH_SECONDS (10 per row, split into rounds), BENCH_CONNECTIONS
 * (32), BENCH_ROUNDS (5), BENCH_SEQUENTIAL (1000 requests to each for the medians).
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { openDatabase, startDatabase } from '../lib/database.js';
import { f0, log, num, ROOT } from '../lib/env.js';
import { mergeLoads, runLoad, type LoadResult, type Script } from '../lib/load.js';
import { builtServiceArgs, buildService, SERVICE_ENV, startTarget } from '../lib/processes.js';
import { writeResult } from '../lib/report.js';
import { createTask, listFirstPage } from '../lib/scripts.js';
import { seedMainUser, type SeededUser } from '../lib/seed.js';
import { runScenario } from '../lib/session.js';
import { range, startCountingApp } from '../lib/statements.js';
import { ascending, quantile } from '../lib/stats.js';
import { takeTurns } from '../lib/turns.js';

const BASE = process.env.BENCH_BASE ?? '1da0a4c';
const SECONDS = num('BENCH_SECONDS', 10);
const CONNECTIONS = num('BENCH_CONNECTIONS', 32);
const ROUNDS = num('BENCH_ROUNDS', 5);
/** Requests to each target, one at a time, for the median latencies. */
const SEQUENTIAL = num('BENCH_SEQUENTIAL', 1000);

const ratio = (a: LoadResult, b: LoadResult) => a.rps / b.rps;

runScenario('retries', async (session) => {
  const baseDir = path.join(session.dir, 'base');
  await fs.mkdir(baseDir);
  execFileSync('sh', ['-c', `git archive ${BASE} | tar -x -C "${baseDir}"`], { cwd: ROOT });
  await fs.symlink(path.join(ROOT, 'node_modules'), path.join(baseDir, 'node_modules'));
  log(`building ${BASE} and this checkout`);
  buildService(baseDir);
  buildService(ROOT);

  const db = await startDatabase(session, { settings: { max_connections: '200' } });
  const users: Record<string, SeededUser> = {};
  const urls: Record<string, string> = {};
  for (const [name, cwd] of [['before', baseDir], ['after', ROOT]] as const) {
    // Each database gets the migrations of the code that serves it (the service migrates on start).
    const database = await openDatabase(session, db, `bench_${name}`, { migrate: name === 'after' });
    urls[name] = (await startTarget(session, { name: `service ${name}`, cwd, args: builtServiceArgs(), env: { ...SERVICE_ENV, DATABASE_URL: database.url } })).url;
    users[name] = await seedMainUser(database.admin);
    await database.q('vacuum analyze');
  }

  const list = (name: string): Script => listFirstPage(users[name]!.token);
  const create = (name: string, keyed = false): Script =>
    createTask(users[name]!.token, (c, i) => `bench ${c}-${i}`, keyed ? () => ({ 'Idempotency-Key': randomUUID() }) : undefined);

  const inTurns = async (scripts: Array<[string, Script]>) => {
    const slices = new Map<string, LoadResult[]>(scripts.map(([n]) => [n, []]));
    await takeTurns(scripts, ROUNDS, 'reverse', async ([name, script]) => {
      const url = name.startsWith('before') ? urls.before! : urls.after!;
      slices.get(name)!.push(await runLoad(url, script, { connections: CONNECTIONS, seconds: SECONDS / ROUNDS }));
    });
    return new Map([...slices].map(([n, s]) => [n, mergeLoads(s)]));
  };

  // Warm-up of both, not measured.
  for (const name of ['before', 'after']) await runLoad(urls[name]!, list(name), { connections: CONNECTIONS, seconds: 2 });
  const lists = await inTurns([['before list', list('before')], ['after list', list('after')]]);
  const creates = await inTurns([['before create', create('before')], ['after create', create('after')], ['after create keyed', create('after', true)]]);

  // One request at a time, alternating targets request by request: the median latency is
  // the per-request cost with the host's noise spread evenly over both.
  const sequential = async (method: 'GET' | 'POST', pathOf: string, bodyOf?: (i: number) => unknown) => {
    const times: Record<string, number[]> = { before: [], after: [] };
    for (let i = 0; i < SEQUENTIAL; i++) {
      for (const name of i % 2 ? ['before', 'after'] : ['after', 'before']) {
        const started = process.hrtime.bigint();
        const res = await fetch(urls[name]! + pathOf, {
          method,
          headers: { authorization: users[name]!.token, ...(bodyOf ? { 'content-type': 'application/json' } : {}) },
          body: bodyOf ? JSON.stringify(bodyOf(i)) : undefined,
        });
        await res.arrayBuffer();
        times[name]!.push(Number(process.hrtime.bigint() - started) / 1e6);
      }
    }
    const median = (xs: number[]) => quantile(ascending(xs), 0.5);
    return { before: median(times.before!), after: median(times.after!) };
  };
  const seqList = await sequential('GET', '/api/users/me/tasks?page=1');
  const seqCreate = await sequential('POST', '/api/users/me/tasks', (i) => ({ task: { label: `seq ${i}` } }));

  // A matching If-None-Match on the list: the page is not read.
  const first = await fetch(`${urls.after}/api/users/me/tasks?page=1`, { headers: { authorization: users.after!.token } });
  const etag = first.headers.get('etag')!;
  const notModified: Script = () => () => ({ method: 'GET', path: '/api/users/me/tasks?page=1', token: users.after!.token, headers: { 'If-None-Match': etag } });
  const lists304 = await runLoad(urls.after!, notModified, { connections: CONNECTIONS, seconds: SECONDS / ROUNDS * 2 });

  // Statements per request, in-process on the current code.
  const counting = await startCountingApp(db.urlFor('bench_after'));
  const token = users.after!.token;
  const counts = { create: [] as number[], keyed: [] as number[], list: [] as number[] };
  // Keyed creates last: the first one starts the background prune of expired keys.
  for (let i = 0; i < 5; i++) counts.list.push((await counting.request('GET', '/api/users/me/tasks?page=1', token)).sql.length);
  for (let i = 0; i < 5; i++) counts.create.push((await counting.request('POST', '/api/users/me/tasks', token, { task: { label: 'count' } })).sql.length);
  for (let i = 0; i < 5; i++) {
    // Statements of one keyed create (the counting app sends no headers of its own), the prune left out.
    const { sql } = await counting.request('POST', '/api/users/me/tasks', token, { task: { label: 'keyed' } }, { 'Idempotency-Key': randomUUID() });
    counts.keyed.push(sql.filter((line) => !line.includes('delete from idempotency_keys')).length);
  }
  await counting.close();

  const row = (name: string, r: LoadResult) => `| ${name} | ${f0(r.rps)} | ${r.p50} | ${r.p99} | ${r.non2xx} |`;
  const report = [
    `Run of ${new Date().toISOString()}: ${os.cpus().length} CPUs, ${CONNECTIONS} connections, ${SECONDS} s per row in ${ROUNDS} alternating slices; before = ${BASE}.`,
    '',
    '| Row | req/s | p50 ms | p99 ms | non-2xx |',
    '|---|---|---|---|---|',
    row('list tasks, before', lists.get('before list')!),
    row('list tasks, after (no header)', lists.get('after list')!),
    row('list tasks, after, If-None-Match → 304', lists304),
    row('create task, before', creates.get('before create')!),
    row('create task, after (no header)', creates.get('after create')!),
    row('create task, after, Idempotency-Key', creates.get('after create keyed')!),
    '',
    `After ÷ before, no header: list **${ratio(lists.get('after list')!, lists.get('before list')!).toFixed(3)}**, create **${ratio(creates.get('after create')!, creates.get('before create')!).toFixed(3)}**. ` +
      `Keyed create ÷ plain create: **${ratio(creates.get('after create keyed')!, creates.get('after create')!).toFixed(3)}**.`,
    `Median latency, one request at a time, ${SEQUENTIAL} each, alternating: list before ${seqList.before.toFixed(2)} ms, after ${seqList.after.toFixed(2)} ms (after ÷ before ${(seqList.after / seqList.before).toFixed(3)}); ` +
      `create before ${seqCreate.before.toFixed(2)} ms, after ${seqCreate.after.toFixed(2)} ms (${(seqCreate.after / seqCreate.before).toFixed(3)}).`,
    `Statements per request (in-process): create ${range(counts.create)}, create with a key ${range(counts.keyed)}, list ${range(counts.list)}.`,
  ].join('\n');
  log('\n' + report);
  writeResult(session, report);
});
