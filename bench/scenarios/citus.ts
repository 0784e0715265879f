/**
 * The service on Citus, verified and measured against a single PostgreSQL: `npm run
 * bench:citus` with CITUS_DATABASE_URL naming a database of a Citus coordinator that the run
 * may use (not part of `npm test` nor of `npm run bench`: CI has no Citus). Method and figures
 * in bench/README.md ("Citus"); each run's report goes to bench/results/citus-<UTC start>.md.
 *
 *  1. The coordinator is checked (the citus extension, active workers), then laid out by the
 *     project's own steps: `npm run migrate` and `npm run citus:distribute` (which skips what
 *     is already distributed) with DATABASE_URL on it. The single-node reference is an
 *     embedded PostgreSQL (bench/lib/database.ts) with the coordinator's durability settings,
 *     migrated by this checkout, pg_stat_statements loaded.
 *  2. **Smoke.** The built service on each (`npm start`'s flags, production, LOG_LEVEL=debug,
 *     rate limits off, WEBHOOK_ALLOW_PRIVATE_URLS=1), every line of its log kept. The same
 *     script on both, as new users: every REST route with valid and refused inputs, a few
 *     procedures on the tRPC door, event streams by ticket, by token and on tRPC each with a
 *     live event after a write, a webhook to a closed port of the loopback (its attempts
 *     recorded as failed), batches, keyed retries (the same answer), conditional requests
 *     (412, 304). Housekeeping runs once at start: a job it skipped is logged at debug.
 *     Asserts: no answer ≥ 500, every step as the contract expects, the same statuses on
 *     both, the live events arrive, no housekeeping job skipped; failures are listed with the
 *     service's log lines for them (matched by X-Request-Id).
 *  3. **Costs.** Both services again at LOG_LEVEL=warn; the Citus one with
 *     `citus.enable_stat_counters` on in its sessions when the coordinator allows it. New
 *     users on each: one for GET /api/users/me and task creation, one with 20 tasks whose
 *     states flip (started ⇄ newed), one with 200 tasks (the first page of 50 is listed; its
 *     200 events are the feed, read from the 10th newest), one that creates tasks in projects
 *     (a new project every 20 tasks), one with a project of 20 tasks started and paused in
 *     turns (the start is timed; the pause, which makes its tasks newed again, is not).
 *     Sequential latency: CITUS_REQUESTS requests of each operation to each target, one at a
 *     time on a kept-alive connection, in CITUS_ROUNDS rounds in which the targets take turns
 *     (forward, then backward), a wait for the shared machine to go quiet before each round.
 *     Then CITUS_COUNTED more of each, one at a time with 50 ms after each answer, with the
 *     statements each sent: pg_stat_statements on the single node (the service's own role);
 *     on the coordinator, Citus's counters of single-shard and multi-shard executions, and
 *     pg_stat_statements when the coordinator loads it.
 *
 * Env: CITUS_DATABASE_URL (required), CITUS_REQUESTS (300 per operation and target),
 * CITUS_ROUNDS (6), CITUS_WARMUP (20), CITUS_COUNTED (20), CITUS_SMOKE_ONLY=1 (the smoke alone, about
 * a minute), BENCH_QUIET_WAIT (120 s in all), BENCH_OUT (also write the Markdown report there).
 */
import http from 'node:http';
import os from 'node:os';
import type pg from 'pg';
import {
  localPostmasterPid, nodeUrl, NotACoordinator, npmRun, openCoordinator, redact, shardExecutions, STAT_COUNTERS_ENV, statCountersAvailable,
  statementStatsReadable, tableLayout, type Coordinator, type ShardExecutions,
} from '../lib/citus.js';
import { createRoles, openDatabase, startDatabase, STATEMENT_STATS } from '../lib/database.js';
import { f0, f1, log, num, sleep, utcMinute } from '../lib/env.js';
import { request, statusOf } from '../lib/http.js';
import type { BenchRequest } from '../lib/load.js';
import { statementStats } from '../lib/pg-stats.js';
import { builtServiceArgs, buildService, SERVICE_ENV, startTarget, stopChild, type Target } from '../lib/processes.js';
import { quietWait } from '../lib/quiet.js';
import { writeResult } from '../lib/report.js';
import { runScenario } from '../lib/session.js';
import { openSse, SmokeRun, type Answer, type Step } from '../lib/smoke.js';
import { ascending, quantile } from '../lib/stats.js';
import { takeTurns } from '../lib/turns.js';

const CITUS_URL = process.env.CITUS_DATABASE_URL;
const REQUESTS = num('CITUS_REQUESTS', 300);
const ROUNDS = num('CITUS_ROUNDS', 6);
const WARMUP = num('CITUS_WARMUP', 20);
const COUNTED = num('CITUS_COUNTED', 20);
/** Only the smoke (for a quick look at what fails on Citus). */
const SMOKE_ONLY = process.env.CITUS_SMOKE_ONLY === '1';
const SINGLE_ROLE = 'bench_single';
const PASSWORD = 'correct horse battery staple';
const DAY = 86_400;

if (!CITUS_URL) {
  process.stderr.write(
    'bench:citus needs CITUS_DATABASE_URL: a database of a Citus coordinator that this run may use\n' +
      '(it runs `npm run migrate` and `npm run citus:distribute` on it and creates users in it), e.g.\n' +
      '  CITUS_DATABASE_URL=postgres://user@coordinator:5432/planning_bench npm run bench:citus\n',
  );
  process.exit(2);
}

/** One line of a service's log, as pino wrote it. */
interface LogLine {
  level: number;
  msg: string;
  reqId?: string;
  err?: { message?: string; type?: string; code?: string; where?: string };
  raw: string;
}

interface ServiceLog {
  lines: LogLine[];
  onLine(line: string): void;
}

/** Keeps the lines at warn or worse, and housekeeping's, of a service's log. */
function serviceLog(): ServiceLog {
  const lines: LogLine[] = [];
  return {
    lines,
    onLine(text) {
      let parsed: { level?: number; msg?: string; reqId?: string; err?: LogLine['err'] };
      try {
        parsed = JSON.parse(text) as typeof parsed;
      } catch {
        lines.push({ level: 50, msg: text.slice(0, 500), raw: text.slice(0, 2000) });
        return;
      }
      const level = parsed.level ?? 30;
      if (level >= 40 || /housekeeping/.test(parsed.msg ?? '')) {
        lines.push({ level, msg: parsed.msg ?? '', reqId: parsed.reqId, err: parsed.err, raw: text.slice(0, 2000) });
      }
    },
  };
}

const idOf = (a: Answer): number | undefined => a.json?.data?.id;
const farDue = () => Math.floor(Date.now() / 1000) + 7 * DAY;
const trpcInput = (input: unknown) => `?input=${encodeURIComponent(JSON.stringify({ json: input }))}`;

/**
 * The smoke: the same steps, in the same order, on any target; `tag` makes its users and
 * request ids its own. The expected statuses are the contract's (API-CONTRACT.md).
 */
async function smoke(base: string, tag: string, stamp: string): Promise<SmokeRun> {
  const run = new SmokeRun(base, tag);
  const name = `smoke_${tag}_${stamp}`;
  const other = `smoke_${tag}_${stamp}_other`;

  // ---- users and tokens (§3) ----
  let r = await run.call('register', 201, 'POST', '/api/users', { body: { user: { username: name, password: PASSWORD } } });
  let token: string = r.json?.meta?.token ?? '';
  const otherToken: string = (await run.call('register a second user', 201, 'POST', '/api/users', { body: { user: { username: other, password: PASSWORD } } })).json?.meta?.token ?? '';
  await run.call('register: username taken (other case)', 422, 'POST', '/api/users', { body: { user: { username: name.toUpperCase(), password: PASSWORD } } });
  await run.call('register: invalid username', 422, 'POST', '/api/users', { body: { user: { username: 'Not Valid!', password: PASSWORD } } });
  await run.call('register: password too short', 422, 'POST', '/api/users', { body: { user: { username: `${name}_x`, password: 'short' } } });
  r = await run.call('authorize', 201, 'POST', '/api/users/authorizations', { body: { username: name, password: PASSWORD } });
  token = r.json?.meta?.token ?? token;
  await run.call('authorize: wrong password', 401, 'POST', '/api/users/authorizations', { body: { username: name, password: 'wrong password' } });
  await run.call('authorize: unknown user', 401, 'POST', '/api/users/authorizations', { body: { username: `${name}_nobody`, password: PASSWORD } });
  await run.call('me', 200, 'GET', '/api/users/me', { token });
  await run.call('me: Bearer form', 200, 'GET', '/api/users/me', { headers: { authorization: `Bearer ${token}` } });
  await run.call('me: no token', 401, 'GET', '/api/users/me');
  await run.call('me: unknown token', 401, 'GET', '/api/users/me', { token: 'A'.repeat(54) });
  await run.call('update me: time zone', 200, 'PATCH', '/api/users/me', { token, body: { user: { time_zone: 'Europe/Paris' } } });
  await run.call('update me: unknown time zone', 422, 'PATCH', '/api/users/me', { token, body: { user: { time_zone: 'Mars/Olympus_Mons' } } });
  await run.call('malformed JSON', 400, 'POST', '/api/users/me/projects', { token, rawBody: '{"project":' });

  // ---- projects (§4, §6) ----
  const project = (label: string, body: unknown, expected = 201) => run.call(label, expected, 'POST', '/api/users/me/projects', { token, body });
  const p1 = idOf(await project('create project', { project: { name: 'alpha' } }));
  const p2 = idOf(await project('create a second project', { project: { name: 'beta' } }));
  const p3 = idOf(await project('create a third project', { project: { name: 'gamma' } }));
  const p4 = idOf(await project('create a fourth project', { project: { name: 'delta' } }));
  const p5 = idOf(await project('create a fifth project', { project: { name: 'epsilon' } }));
  await project('create project: name taken', { project: { name: 'alpha' } }, 422);
  await project('create project: name missing', { project: {} }, 422);
  await run.call('list projects', 200, 'GET', '/api/users/me/projects', { token });
  await run.call('list projects: filtered and sorted', 200, 'GET', '/api/users/me/projects?state=newed&q=al&sort=-name&page_size=5', { token });
  await run.call('list projects: unknown state', 400, 'GET', '/api/users/me/projects?state=bogus', { token });
  const gotP1 = await run.call('get project', 200, 'GET', `/api/projects/${p1}`, { token });
  await run.call('get project: none such', 404, 'GET', '/api/projects/999999999', { token });
  await run.call("get project: another user's", 404, 'GET', `/api/projects/${p1}`, { token: otherToken });
  await run.call('update project', 200, 'PATCH', `/api/projects/${p1}`, { token, body: { project: { name: 'alpha2', description: 'the first' } } });
  await run.call('update project: name taken', 422, 'PATCH', `/api/projects/${p1}`, { token, body: { project: { name: 'beta' } } });

  // ---- tasks (§5) ----
  const task = (label: string, body: unknown, expected = 201) => run.call(label, expected, 'POST', '/api/users/me/tasks', { token, body });
  const t: Array<number | undefined> = [];
  for (let i = 0; i < 5; i++) t.push(idOf(await task(`create task ${i + 1}`, { task: { label: `task ${i + 1}` } })));
  const tp = idOf(await task('create task in a project', { task: { label: 'in a project', project_id: p1 } }));
  await task('create task planned', { task: { label: 'planned', planned_at: Math.floor(Date.now() / 1000) + DAY } });
  await task('create task: label missing', { task: {} }, 422);
  await task('create task: label too long', { task: { label: 'x'.repeat(1001) } }, 422);
  await task('create task: project none such', { task: { label: 'nowhere', project_id: 999999999 } }, 422);

  // ---- project states (§4) ----
  const state = (label: string, id: number | undefined, body: unknown, expected = 200, headers?: Record<string, string>) =>
    run.call(label, expected, 'PUT', `/api/projects/${id}/state`, { token, body: { project: body }, headers });
  await state('start project', p1, { state: 'started', due_at: farDue() });
  await state('start a second project', p2, { state: 'started', due_at: farDue() });
  await state('pause project', p2, { state: 'paused' });
  await state('restart project', p2, { state: 'started', due_at: farDue() });
  await state('finish project', p2, { state: 'finished' });
  await state('start project: due_at missing', p3, { state: 'started' }, 422);
  await state('start project: due_at in the past', p3, { state: 'started', due_at: Math.floor(Date.now() / 1000) - 2 * DAY }, 422);
  await state('start a third project', p3, { state: 'started', due_at: farDue() });
  await state('start a fourth project', p4, { state: 'started', due_at: farDue() });
  await state('start project: 3 already started', p5, { state: 'started', due_at: farDue() }, 422);
  await state('pause project: due_at given', p4, { state: 'paused', due_at: farDue() }, 422);
  await state('project state: unknown state', p4, { state: 'flying' }, 422);
  await state('project state: newed to finished', p5, { state: 'finished' }, 422);
  await state('project state: newed to paused', p5, { state: 'paused' }, 422);
  await state('project state: none such', 999999999, { state: 'paused' }, 404);

  // ---- task edits, states and order ----
  await run.call('get task', 200, 'GET', `/api/tasks/${t[0]}`, { token });
  await run.call('get task: none such', 404, 'GET', '/api/tasks/999999999', { token });
  await run.call("get task: another user's", 404, 'GET', `/api/tasks/${t[0]}`, { token: otherToken });
  await run.call('update task: label', 200, 'PATCH', `/api/tasks/${t[0]}`, { token, body: { task: { label: 'renamed' } } });
  await run.call('update task: into a project', 200, 'PATCH', `/api/tasks/${t[1]}`, { token, body: { task: { project_id: p1 } } });
  await run.call('update task: out of its project', 200, 'PATCH', `/api/tasks/${t[1]}`, { token, body: { task: { project_id: null } } });
  await run.call("update task: another user's", 404, 'PATCH', `/api/tasks/${t[1]}`, { token: otherToken, body: { task: { label: 'not mine' } } });
  const taskState = (label: string, id: number | undefined, body: unknown, expected = 200) =>
    run.call(label, expected, 'PUT', `/api/tasks/${id}/state`, { token, body: { task: body } });
  await taskState('plan task', t[2], { state: 'planned' });
  await taskState('finish task', t[2], { state: 'finished' });
  await taskState('task state: finished to newed', t[2], { state: 'newed' }, 422);
  await taskState('cancel task', t[3], { state: 'newed' });
  await taskState('start task', t[3], { state: 'started' });
  await taskState('abandon task', tp, { state: 'abandoned' });
  await taskState('task state: state missing', t[3], {}, 422);
  await taskState('task state: other member', t[3], { state: 'planned', label: 'x' }, 422);
  const order = (label: string, id: number | undefined, to: number, expected = 200) =>
    run.call(label, expected, 'PUT', `/api/tasks/${id}/order`, { token, body: { task: { order: to } } });
  await order('reorder task up', t[4], 1);
  await order('reorder task down, clamped', t[0], 99);
  await order('reorder task in place', t[0], 99);
  await order('reorder task: order 0', t[0], 0, 422);
  await run.call('list tasks', 200, 'GET', '/api/users/me/tasks', { token });
  await run.call('list tasks: filtered', 200, 'GET', `/api/users/me/tasks?state=newed,started&project_id=${p1}&q=task&sort=-order&page_size=2&page=2`, { token });
  await run.call('list tasks: planned on a day', 200, 'GET', '/api/users/me/tasks?planned_on=2026-11-27', { token });
  await run.call('list tasks: page_size too large', 400, 'GET', '/api/users/me/tasks?page_size=1000', { token });

  // ---- keyed retries (§11) ----
  const key = { 'Idempotency-Key': `smoke-key-${tag}-${stamp}` };
  const first = await run.call('keyed create', 201, 'POST', '/api/users/me/tasks', { token, body: { task: { label: 'keyed' } }, headers: key });
  const again = await run.call('keyed create, retried', 201, 'POST', '/api/users/me/tasks', { token, body: { task: { label: 'keyed' } }, headers: key });
  run.check(
    'keyed retry: the same answer, replayed',
    again.text === first.text && again.headers.get('idempotent-replayed') === 'true',
    `replayed=${again.headers.get('idempotent-replayed')}, same body: ${again.text === first.text}`,
  );
  await run.call('keyed create: key reused for another body', 422, 'POST', '/api/users/me/tasks', { token, body: { task: { label: 'another' } }, headers: key });
  const keyedState = { 'Idempotency-Key': `smoke-state-${tag}-${stamp}` };
  const s1 = await run.call('keyed state change', 200, 'PUT', `/api/tasks/${t[4]}/state`, { token, body: { task: { state: 'planned' } }, headers: keyedState });
  const s2 = await run.call('keyed state change, retried', 200, 'PUT', `/api/tasks/${t[4]}/state`, { token, body: { task: { state: 'planned' } }, headers: keyedState });
  run.check('keyed state change retry: the same answer', s1.text === s2.text, 'a different body');

  // ---- conditional requests (§11) ----
  const g = await run.call('get task for its ETag', 200, 'GET', `/api/tasks/${t[3]}`, { token });
  const etag = g.headers.get('etag') ?? '"none"';
  const patched = await run.call('update task, If-Match current', 200, 'PATCH', `/api/tasks/${t[3]}`, { token, body: { task: { label: 'if-match' } }, headers: { 'If-Match': etag } });
  await run.call('update task, If-Match stale', 412, 'PATCH', `/api/tasks/${t[3]}`, { token, body: { task: { label: 'stale' } }, headers: { 'If-Match': etag } });
  await run.call('task state, If-Match stale', 412, 'PUT', `/api/tasks/${t[3]}/state`, { token, body: { task: { state: 'planned' } }, headers: { 'If-Match': etag } });
  await run.call('get task, If-None-Match current', 304, 'GET', `/api/tasks/${t[3]}`, { token, headers: { 'If-None-Match': patched.headers.get('etag') ?? '"none"' } });
  await run.call('get task, If-None-Match stale', 200, 'GET', `/api/tasks/${t[3]}`, { token, headers: { 'If-None-Match': etag } });
  const list = await run.call('list tasks for its ETag', 200, 'GET', '/api/users/me/tasks', { token });
  await run.call('list tasks, If-None-Match current', 304, 'GET', '/api/users/me/tasks', { token, headers: { 'If-None-Match': list.headers.get('etag') ?? '"none"' } });
  const gotP4 = await run.call('get project for its ETag', 200, 'GET', `/api/projects/${p4}`, { token });
  await state('pause project, If-Match current', p4, { state: 'paused' }, 200, { 'If-Match': gotP4.headers.get('etag') ?? '"none"' });
  const keyedProject = { 'Idempotency-Key': `smoke-project-${tag}-${stamp}` };
  const restartBody = { state: 'started', due_at: farDue() };
  const k1 = await state('keyed project restart', p4, restartBody, 200, keyedProject);
  const k2 = await state('keyed project restart, retried', p4, restartBody, 200, keyedProject);
  run.check('keyed project restart retry: the same answer', k1.status === 200 && k1.text === k2.text, `statuses ${k1.status}, ${k2.status}`);
  await run.call('delete project, If-Match stale', 412, 'DELETE', `/api/projects/${p1}`, { token, headers: { 'If-Match': gotP1.headers.get('etag') ?? '"none"' } });

  // ---- batch (§15) ----
  const batch = await run.call('batch', 200, 'POST', '/api/batch', {
    token,
    body: {
      operations: [
        { op: 'projects.create', ref: 'trip', input: { project: { name: 'trip' } } },
        { op: 'tasks.create', input: { task: { label: 'batched', project_id: { ref: 'trip' } } } },
        { op: 'tasks.changeState', input: { id: t[0], task: { state: 'planned' } } },
        { op: 'tasks.reorder', input: { id: t[0], task: { order: 1 } } },
        { op: 'projects.update', input: { id: { ref: 'trip' }, project: { description: 'batched' } } },
      ],
    },
  });
  await run.call('batch: pause and restart a project', 200, 'POST', '/api/batch', {
    token,
    body: {
      operations: [
        { op: 'projects.changeState', input: { id: p4, project: { state: 'paused' } } },
        { op: 'projects.changeState', input: { id: p4, project: { state: 'started', due_at: farDue() } } },
      ],
    },
  });
  const answers: Array<{ status: number }> = batch.json?.data ?? [];
  run.check('batch: every operation answered 2xx', answers.length === 5 && answers.every((a) => a.status < 300), `answers ${answers.map((a) => a.status).join(',')}`);
  await run.call('batch: refused, nothing kept', 422, 'POST', '/api/batch', {
    token,
    body: {
      operations: [
        { op: 'projects.create', input: { project: { name: 'refused-batch' } } },
        { op: 'tasks.changeState', input: { id: t[2], task: { state: 'newed' } } },
      ],
    },
  });
  await run.call('batch: refused project state, nothing kept', 422, 'POST', '/api/batch', {
    token,
    body: {
      operations: [
        { op: 'projects.create', input: { project: { name: 'refused-batch-2' } } },
        { op: 'projects.changeState', input: { id: p5, project: { state: 'finished' } } },
      ],
    },
  });
  const kept = await run.call('list projects after the refused batch', 200, 'GET', '/api/users/me/projects?q=refused', { token });
  run.check('refused batches: their projects not kept', Array.isArray(kept.json?.data) && kept.json.data.length === 0, `${kept.json?.data?.length} projects`);
  await run.call('batch: empty', 422, 'POST', '/api/batch', { token, body: { operations: [] } });

  // ---- the change log and its streams (§10) ----
  const feed = await run.call('events: newest id', 200, 'GET', '/api/users/me/events', { token });
  const last: string = feed.json?.meta?.last_event_id ?? '0';
  const page = await run.call('events after 0', 200, 'GET', '/api/users/me/events?after=0', { token });
  const firstEventId: string = page.json?.data?.[0]?.id ?? '0';
  await run.call('events: malformed cursor', 400, 'GET', '/api/users/me/events?after=abc', { token });
  await run.call('events: cursor beyond the newest', 410, 'GET', '/api/users/me/events?after=999999999999', { token });
  const ticket = await run.call('stream ticket', 201, 'POST', '/api/users/me/events/tickets', { token });
  const tk: string = ticket.json?.data?.attributes?.ticket ?? 'none';

  /** Opens a stream, writes a task, and checks that its event arrives on the stream. */
  const live = async (label: string, url: string, headers: Record<string, string>) => {
    const requestId = run.nextRequestId();
    let stream;
    try {
      stream = await openSse(base + url, headers, requestId);
    } catch (error) {
      run.steps.push({ label: `${label}: opens`, request: `GET ${url.slice(0, 60)}`, expected: 200, got: 0, requestId, detail: String(error) });
      return;
    }
    run.steps.push({ label: `${label}: opens`, request: `GET ${url.split('?')[0]} (stream)`, expected: 200, got: stream.status, requestId });
    if (stream.status !== 200) {
      stream.close();
      return;
    }
    await sleep(300);
    const marker = `live ${label} ${tag} ${stamp}`;
    // From the write's start: the event may arrive before the write's answer has been read.
    const arrival = stream.waitFor(marker, 5_000);
    await run.call(`${label}: the write`, 201, 'POST', '/api/users/me/tasks', { token, body: { task: { label: marker } } });
    const ms = await arrival;
    run.check(`${label}: the live event arrives`, ms !== undefined, 'not within 5 s', requestId);
    if (ms !== undefined) run.steps.at(-1)!.ms = ms;
    stream.close();
  };
  await live('stream by ticket', `/api/users/me/events?ticket=${encodeURIComponent(tk)}`, {});
  const reused = await openSse(`${base}/api/users/me/events?ticket=${encodeURIComponent(tk)}`, {}, run.nextRequestId()).catch(() => undefined);
  run.steps.push({ label: 'stream: ticket used twice', request: 'GET /api/users/me/events (stream)', expected: 401, got: reused?.status ?? 0, requestId: reused?.requestId });
  reused?.close();
  await live('stream by token', `/api/users/me/events?after=${encodeURIComponent(last)}`, { authorization: token });
  await live('tRPC events.onChange', `/trpc/events.onChange${trpcInput({ lastEventId: last })}`, { authorization: token });

  // ---- webhooks (§14) ----
  const wh = await run.call('create webhook', 201, 'POST', '/api/users/me/webhooks', { token, body: { webhook: { url: 'https://127.0.0.1:9/hook', events: ['task.*'] } } });
  const wid = idOf(wh);
  await run.call('create webhook: not https', 422, 'POST', '/api/users/me/webhooks', { token, body: { webhook: { url: 'ftp://127.0.0.1/hook' } } });
  await run.call('create webhook: unknown event pattern', 422, 'POST', '/api/users/me/webhooks', { token, body: { webhook: { url: 'https://127.0.0.1:9/hook', events: ['nothing.*'] } } });
  await run.call('list webhooks', 200, 'GET', '/api/users/me/webhooks', { token });
  await run.call('get webhook', 200, 'GET', `/api/webhooks/${wid}`, { token });
  await run.call('get webhook: none such', 404, 'GET', '/api/webhooks/999999999', { token });
  await run.call("get webhook: another user's", 404, 'GET', `/api/webhooks/${wid}`, { token: otherToken });
  await run.call('update webhook', 200, 'PATCH', `/api/webhooks/${wid}`, { token, body: { webhook: { description: 'smoke', events: ['*'] } } });
  await run.call('test webhook', 202, 'POST', `/api/webhooks/${wid}/test`, { token });
  await run.call('rotate webhook secret', 201, 'POST', `/api/webhooks/${wid}/secret`, { token });
  await run.call('replay webhook', 202, 'POST', `/api/webhooks/${wid}/replay`, { token, body: { replay: { after: firstEventId } } });
  await run.call('replay webhook: malformed cursor', 422, 'POST', `/api/webhooks/${wid}/replay`, { token, body: { replay: { after: 'abc' } } });
  let attempts: Array<{ attributes?: { outcome?: string; error?: string } }> = [];
  const until = Date.now() + 15_000;
  while (Date.now() < until) {
    const res = await request(base, 'GET', `/api/webhooks/${wid}/deliveries`, token);
    attempts = res.status === 200 ? ((JSON.parse(res.text) as { data?: typeof attempts }).data ?? []) : [];
    if (attempts.length > 0) break;
    await sleep(250);
  }
  await run.call('webhook deliveries', 200, 'GET', `/api/webhooks/${wid}/deliveries`, { token });
  run.check(
    'webhook: attempts recorded, failed',
    attempts.length > 0 && attempts.every((a) => a.attributes?.outcome === 'failed'),
    `${attempts.length} attempts (${[...new Set(attempts.map((a) => `${a.attributes?.outcome}: ${a.attributes?.error}`))].join(', ')})`,
  );
  await run.call('disable webhook', 200, 'PATCH', `/api/webhooks/${wid}`, { token, body: { webhook: { state: 'disabled' } } });
  await run.call('enable webhook', 200, 'PATCH', `/api/webhooks/${wid}`, { token, body: { webhook: { state: 'enabled' } } });
  await run.call('delete webhook', 204, 'DELETE', `/api/webhooks/${wid}`, { token });
  await run.call('get webhook: deleted', 404, 'GET', `/api/webhooks/${wid}`, { token });

  // ---- the tRPC door (§8): superjson bodies ----
  await run.call('tRPC users.me', 200, 'GET', '/trpc/users.me', { token });
  await run.call('tRPC tasks.create', 200, 'POST', '/trpc/tasks.create', { token, body: { json: { task: { label: 'via tRPC' } } } });
  await run.call('tRPC tasks.create: label missing', 422, 'POST', '/trpc/tasks.create', { token, body: { json: { task: {} } } });
  await run.call('tRPC tasks.list', 200, 'GET', `/trpc/tasks.list${trpcInput({ page: 1 })}`, { token });
  await run.call('tRPC tasks.get: none such', 404, 'GET', `/trpc/tasks.get${trpcInput({ id: 999999999 })}`, { token });
  await run.call('tRPC tasks.changeState', 200, 'POST', '/trpc/tasks.changeState', { token, body: { json: { id: t[3], task: { state: 'planned' } } } });
  await run.call('tRPC projects.list', 200, 'GET', `/trpc/projects.list${trpcInput({})}`, { token });
  await run.call('tRPC projects.create', 200, 'POST', '/trpc/projects.create', { token, body: { json: { project: { name: 'via-trpc' } } } });
  await run.call('tRPC batch.apply', 200, 'POST', '/trpc/batch.apply', { token, body: { json: { operations: [{ op: 'tasks.create', input: { task: { label: 'tRPC batch' } } }] } } });
  await run.call('tRPC users.me: no token', 401, 'GET', '/trpc/users.me');

  // ---- deletes and revocation ----
  await run.call('delete project', 204, 'DELETE', `/api/projects/${p1}`, { token });
  await run.call('delete project: again', 404, 'DELETE', `/api/projects/${p1}`, { token });
  await run.call('list tasks after the delete', 200, 'GET', '/api/users/me/tasks', { token });
  await run.call('revoke token', 204, 'DELETE', '/api/users/me/authorizations/current', { token });
  await run.call('me: revoked token', 401, 'GET', '/api/users/me', { token });
  return run;
}

// ---- costs ------------------------------------------------------------------------------------

interface CostTarget {
  name: 'single' | 'citus';
  service: Target;
  agent: http.Agent;
  /** The users of the operations, made through the API. */
  me: string;
  stateUser: string;
  stateTasks: number[];
  states: Map<number, string>;
  listUser: string;
  feedCursor: string;
  projectUser: string;
  /** The project new tasks go to, and how many were made. */
  taskProject?: number;
  made: number;
  cycleUser: string;
  /** The project started and paused in turns (made by the first prepare step). */
  cycleProject?: number;
}

interface Op {
  name: string;
  /** Untimed, before the request. */
  prepare?(t: CostTarget): Promise<void>;
  request(t: CostTarget, i: number): BenchRequest;
  expected: number;
  /** Untimed, after a request answered as expected. */
  after?(t: CostTarget, req: BenchRequest): Promise<void>;
}

/** A request that must answer `expected`; its parsed body. */
async function must(base: string, method: string, path: string, token: string, body: unknown, expected: number, agent?: http.Agent): Promise<any> {
  const res = await request(base, method, path, token, body, agent ? { agent } : {});
  if (res.status !== expected) throw new Error(`${method} ${path} answered ${res.status} (expected ${expected}): ${res.text.slice(0, 300)}`);
  return res.text ? JSON.parse(res.text) : undefined;
}

async function registerUser(base: string, username: string): Promise<string> {
  const body = await must(base, 'POST', '/api/users', '', { user: { username, password: PASSWORD } }, 201);
  return body.meta.token as string;
}

/** The users and rows the cost operations need, on one target. */
async function prepareCosts(name: CostTarget['name'], service: Target, stamp: string): Promise<CostTarget> {
  const base = service.url;
  const user = (role: string) => registerUser(base, `cost_${name}_${role}_${stamp}`);
  const [me, stateUser, listUser, projectUser, cycleUser] = [await user('me'), await user('state'), await user('list'), await user('project'), await user('cycle')];
  const stateTasks: number[] = [];
  const states = new Map<number, string>();
  for (let i = 0; i < 20; i++) {
    const doc = await must(base, 'POST', '/api/users/me/tasks', stateUser, { task: { label: `flip ${i}` } }, 201);
    stateTasks.push(doc.data.id);
    states.set(doc.data.id, doc.data.attributes.state);
  }
  for (let b = 0; b < 2; b++) {
    const operations = Array.from({ length: 100 }, (_, i) => ({ op: 'tasks.create', input: { task: { label: `listed ${b * 100 + i}` } } }));
    await must(base, 'POST', '/api/batch', listUser, { operations }, 200);
  }
  // The feed's ids, oldest first: the cursor is the 11th newest, so a read answers 10 events.
  const ids: string[] = [];
  let after = '0';
  for (;;) {
    const page = await must(base, 'GET', `/api/users/me/events?after=${after}`, listUser, undefined, 200);
    ids.push(...(page.data as Array<{ id: string }>).map((e) => e.id));
    if (!page.links?.next) break;
    after = page.meta.last_event_id;
  }
  if (ids.length < 11) throw new Error(`the list user's feed holds ${ids.length} events`);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1, timeout: 4_000 });
  return { name, service, agent, me, stateUser, stateTasks, states, listUser, feedCursor: ids[ids.length - 11]!, projectUser, made: 0, cycleUser };
}

const OPS: Op[] = [
  { name: 'GET /api/users/me', expected: 200, request: (t) => ({ method: 'GET', path: '/api/users/me', token: t.me }) },
  { name: 'create task', expected: 201, request: (t, i) => ({ method: 'POST', path: '/api/users/me/tasks', token: t.me, body: { task: { label: `cost ${i}` } } }) },
  {
    name: 'change task state',
    expected: 200,
    request: (t, i) => {
      const id = t.stateTasks[i % t.stateTasks.length]!;
      const next = t.states.get(id) === 'started' ? 'newed' : 'started';
      return { method: 'PUT', path: `/api/tasks/${id}/state`, token: t.stateUser, body: { task: { state: next } } };
    },
    after: async (t, req) => {
      t.states.set(Number(req.path.split('/')[3]), (req.body as { task: { state: string } }).task.state);
    },
  },
  { name: 'list tasks (page of 50 of 200)', expected: 200, request: (t) => ({ method: 'GET', path: '/api/users/me/tasks?page=1&page_size=50', token: t.listUser }) },
  {
    name: 'create task in a project',
    expected: 201,
    prepare: async (t) => {
      // A new project every 20 tasks: a project's events list all its tasks.
      if (t.made++ % 20 !== 0 && t.taskProject !== undefined) return;
      const doc = await must(t.service.url, 'POST', '/api/users/me/projects', t.projectUser, { project: { name: `tasks-${t.made}-${Date.now().toString(36)}` } }, 201, t.agent);
      t.taskProject = doc.data.id;
    },
    request: (t, i) => ({ method: 'POST', path: '/api/users/me/tasks', token: t.projectUser, body: { task: { label: `in project ${i}`, project_id: t.taskProject } } }),
  },
  {
    // A restart: it moves the project's 20 newed tasks to started as a start does, in the same
    // statement, and a pause (untimed) makes them newed again. A fresh project for each start
    // would take 20 creates in a project each time.
    name: 'start project with 20 tasks',
    expected: 200,
    prepare: async (t) => {
      if (t.cycleProject !== undefined) return;
      const operations = [
        { op: 'projects.create', ref: 'p', input: { project: { name: `cycled-${Date.now().toString(36)}` } } },
        ...Array.from({ length: 20 }, (_, i) => ({ op: 'tasks.create', input: { task: { label: `cycled ${i}`, project_id: { ref: 'p' } } } })),
      ];
      const answer = await must(t.service.url, 'POST', '/api/batch', t.cycleUser, { operations }, 200, t.agent);
      t.cycleProject = answer.data[0].body.data.id;
    },
    request: (t) => ({ method: 'PUT', path: `/api/projects/${t.cycleProject}/state`, token: t.cycleUser, body: { project: { state: 'started', due_at: farDue() } } }),
    after: async (t) => {
      await must(t.service.url, 'PUT', `/api/projects/${t.cycleProject}/state`, t.cycleUser, { project: { state: 'paused' } }, 200, t.agent);
    },
  },
  { name: 'read the event feed (10 events)', expected: 200, request: (t) => ({ method: 'GET', path: `/api/users/me/events?after=${t.feedCursor}`, token: t.listUser }) },
];

interface Timed {
  ms: number[];
  failures: string[];
}

/** One operation's request on a target, timed; prepare and after are not. */
async function timedOne(op: Op, t: CostTarget, i: number, into: Timed): Promise<void> {
  try {
    await op.prepare?.(t);
  } catch (error) {
    into.failures.push(`prepare: ${(error as Error).message}`);
    return;
  }
  const req = op.request(t, i);
  const t0 = process.hrtime.bigint();
  let status: number;
  try {
    status = await statusOf(t.service.url, req, t.agent);
  } catch (error) {
    into.failures.push(`${req.method} ${req.path}: ${String(error)}`);
    return;
  }
  into.ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  if (status !== op.expected) into.failures.push(`${req.method} ${req.path}: ${status}`);
  else await op.after?.(t, req).catch((error: Error) => into.failures.push(`after: ${error.message}`));
}

/** Statement calls of a role so far (pg_stat_statements), the bench's own reads left out. */
async function roleStatements(client: pg.Client, role?: string): Promise<number> {
  return (await statementStats(client, role)).filter((s) => !/citus_stat_counters/.test(s.query)).reduce((a, s) => a + s.calls, 0);
}

interface Counted {
  statements: number[];
  single: number[];
  multi: number[];
}

const fmtMs = (x: number) => (x < 10 ? x.toFixed(2) : x.toFixed(1));
const median = (xs: number[]) => quantile(ascending(xs), 0.5);
const spreadOf = (xs: number[]) => {
  if (xs.length === 0) return '—';
  const s = ascending(xs);
  const m = median(s);
  const fmt = (x: number) => (Number.isInteger(x) ? String(x) : x.toFixed(1));
  return s[0] === s[s.length - 1] ? fmt(m) : `${fmt(m)} (${fmt(s[0]!)}–${fmt(s[s.length - 1]!)})`;
};
const cell = (s: string | number) => String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ');

runScenario('citus', async (session) => {
  const { startedAt, loadBefore } = session;
  const stamp = startedAt.getTime().toString(36);
  const url = CITUS_URL!;

  // ---- 1. the coordinator, laid out by the project's steps; the reference ----------------------
  let coordinator: Coordinator;
  try {
    coordinator = await openCoordinator(session, url);
  } catch (error) {
    if (error instanceof NotACoordinator) {
      process.stderr.write(`bench:citus: ${error.message}\n`);
      throw new Error('CITUS_DATABASE_URL is not usable; nothing was run');
    }
    throw error;
  }
  const { admin } = coordinator;
  log(`Citus ${coordinator.citusVersion} on PostgreSQL ${coordinator.serverVersion} at ${redact(url)}: ${coordinator.nodes.length} nodes`);
  // The database only the coordinator's settings name: the steps read DATABASE_URL alone.
  const stepEnv = { DATABASE_URL: url, DATABASE_DIRECT_URL: '', LOG_LEVEL: 'info' };
  log('npm run migrate');
  const migrated = npmRun('migrate', stepEnv)
    .trim()
    .split('\n')
    .map((line) => {
      try {
        return (JSON.parse(line) as { msg?: string }).msg ?? line;
      } catch {
        return line;
      }
    })
    .join(' ')
    .replace(/ on PostgreSQL at \S+/, '');
  log('npm run citus:distribute');
  const distributed = npmRun('citus:distribute', stepEnv).trim();
  const distributeSummary = distributed.split('\n').filter((l) => /laid out|skipped/.test(l)).at(-1) ?? distributed.split('\n').at(-1) ?? '';
  log(`  ${distributeSummary}`);
  const layout = await tableLayout(admin);
  const shardCount = Math.max(0, ...layout.map((l) => (l.layout.startsWith('distributed') ? l.shards : 0)));
  const counters = await statCountersAvailable(admin);
  const coordinatorStatements = await statementStatsReadable(admin);

  buildService();
  const db = await startDatabase(session, { settings: { ...STATEMENT_STATS, ...coordinator.durability, max_connections: '200' } });
  const reference = await openDatabase(session, db, 'bench', { statementStats: true });
  await createRoles(reference.q, [SINGLE_ROLE]);
  const singlePg = (await reference.q<{ v: string }>(`select current_setting('server_version') as v`)).rows[0]!.v;

  const baseEnv = { ...SERVICE_ENV, WEBHOOK_ALLOW_PRIVATE_URLS: '1', DATABASE_DIRECT_URL: '' };
  const start = (name: 'single' | 'citus', env: Record<string, string>, logs: ServiceLog) =>
    startTarget(session, {
      name,
      args: builtServiceArgs(),
      role: name === 'single' ? SINGLE_ROLE : '',
      env: { ...baseEnv, DATABASE_URL: name === 'single' ? reference.roleUrl(SINGLE_ROLE) : url, ...env },
      onLine: logs.onLine,
      echoLines: 0,
    });

  // ---- 2. smoke ---------------------------------------------------------------------------------
  const smokeLogs = { single: serviceLog(), citus: serviceLog() };
  const smokeServices = {
    single: await start('single', { LOG_LEVEL: 'debug' }, smokeLogs.single),
    citus: await start('citus', { LOG_LEVEL: 'debug' }, smokeLogs.citus),
  };
  log('smoke: single node');
  const runs = { single: await smoke(smokeServices.single.url, 's', stamp), citus: await smoke(smokeServices.citus.url, 'c', stamp) };
  log('smoke: Citus done');
  await sleep(500);
  await Promise.all([stopChild(smokeServices.single.child), stopChild(smokeServices.citus.child)]);

  const steps = runs.single.steps.map((s, i) => ({ single: s, citus: runs.citus.steps[i] }));
  const counts = (steps: Step[]) => ({
    requests: steps.filter((s) => s.request !== 'check').length,
    checks: steps.filter((s) => s.request === 'check').length,
    server: steps.filter((s) => typeof s.got === 'number' && s.got >= 500).length,
    unexpected: steps.filter((s) => s.got !== s.expected).length,
  });
  const tally = { single: counts(runs.single.steps), citus: counts(runs.citus.steps) };
  const differing = steps.filter((p) => !p.citus || p.citus.label !== p.single.label || p.citus.got !== p.single.got);
  const housekeepingSkipped = {
    single: smokeLogs.single.lines.filter((l) => /housekeeping skipped/.test(l.msg)),
    citus: smokeLogs.citus.lines.filter((l) => /housekeeping skipped/.test(l.msg)),
  };
  const failedSteps = (name: 'single' | 'citus') => runs[name].steps.filter((s) => s.got !== s.expected || (typeof s.got === 'number' && s.got >= 500));
  const linesFor = (name: 'single' | 'citus', requestId?: string) => (requestId ? smokeLogs[name].lines.filter((l) => l.reqId === requestId && l.level >= 40) : []);
  const describeLine = (l: LogLine) =>
    `${l.level >= 50 ? 'error' : 'warn'}: ${l.msg}${l.err?.message ? `: ${l.err.message.replace(/\s+/g, ' ')}` : ''}` +
    `${l.err?.code || l.err?.where ? ` (${[l.err.code, l.err.where].filter(Boolean).join(', ')})` : ''}`;
  for (const name of ['single', 'citus'] as const) {
    const c = tally[name];
    log(`smoke on ${name}: ${c.requests} requests and ${c.checks} checks, ${c.server} answers ≥ 500, ${c.unexpected} steps not as expected`);
    for (const s of failedSteps(name)) {
      log(`  ${s.label}: ${s.request} expected ${s.expected}, got ${s.got}${s.detail ? ` ${s.detail.slice(0, 200)}` : ''}`);
      for (const l of linesFor(name, s.requestId)) log(`    log ${describeLine(l)}`);
    }
  }
  log(`steps whose status differs between the targets: ${differing.length}`);

  // ---- 3. costs ---------------------------------------------------------------------------------
  const ops = SMOKE_ONLY ? [] : OPS;
  const targets: CostTarget[] = [];
  const ourPids = [process.pid, db.pid!];
  let costServices: { single: Target; citus: Target } | undefined;
  if (!SMOKE_ONLY) {
    costServices = {
      single: await start('single', { LOG_LEVEL: 'warn' }, serviceLog()),
      citus: await start('citus', { LOG_LEVEL: 'warn', ...(counters ? STAT_COUNTERS_ENV : {}) }, serviceLog()),
    };
    log('preparing the cost users');
    targets.push(await prepareCosts('single', costServices.single, stamp), await prepareCosts('citus', costServices.citus, stamp));
    session.defer(() => targets.forEach((t) => t.agent.destroy()));
    ourPids.push(costServices.single.pid, costServices.citus.pid);
  }
  for (const node of coordinator.nodes) {
    const pid = await localPostmasterPid(node.groupId === 0 ? url : nodeUrl(url, node));
    if (pid && !ourPids.includes(pid)) ourPids.push(pid);
  }
  const waitQuiet = quietWait(ourPids, num('BENCH_QUIET_WAIT', 120));

  const timed = new Map<string, Record<string, Timed>>();
  for (const op of ops) {
    const per: Record<string, Timed> = { single: { ms: [], failures: [] }, citus: { ms: [], failures: [] } };
    timed.set(op.name, per);
    let i = 0;
    for (const t of targets) for (let k = 0; k < WARMUP; k++) await timedOne(op, t, i++, { ms: [], failures: per[t.name]!.failures });
    const slice = Math.ceil(REQUESTS / ROUNDS);
    let quietRound = -1;
    await takeTurns(targets, ROUNDS, 'reverse', async (t, _index, round) => {
      if (round !== quietRound) {
        quietRound = round;
        await waitQuiet();
      }
      for (let k = 0; k < slice && per[t.name]!.ms.length < REQUESTS; k++) await timedOne(op, t, i++, per[t.name]!);
    });
    const p = (name: string, q: number) => quantile(ascending(per[name]!.ms), q);
    log(
      `${op.name.padEnd(34)} single p50 ${fmtMs(p('single', 0.5))} p95 ${fmtMs(p('single', 0.95))} ms; Citus p50 ${fmtMs(p('citus', 0.5))} p95 ${fmtMs(p('citus', 0.95))} ms; ` +
        `Citus ÷ single ${(p('citus', 0.5) / p('single', 0.5)).toFixed(2)}`,
    );
  }

  // Statements per request, one request at a time with a pause after each (work the request
  // sets off, such as the webhook deliverer's look at its user, lands in its window).
  const counted = new Map<string, Record<string, Counted>>();
  const read = async (t: CostTarget): Promise<{ statements: number; shards: ShardExecutions }> => {
    if (t.name === 'single') return { statements: await roleStatements(reference.admin, SINGLE_ROLE), shards: { single: 0, multi: 0 } };
    return {
      statements: coordinatorStatements ? await roleStatements(admin) : 0,
      shards: counters ? await shardExecutions(admin) : { single: 0, multi: 0 },
    };
  };
  for (const op of ops) {
    const per: Record<string, Counted> = {};
    counted.set(op.name, per);
    for (const t of targets) {
      const c: Counted = { statements: [], single: [], multi: [] };
      per[t.name] = c;
      const failures = timed.get(op.name)![t.name]!.failures;
      for (let i = 0; i < COUNTED; i++) {
        try {
          await op.prepare?.(t);
        } catch (error) {
          failures.push(`prepare: ${(error as Error).message} (counted)`);
          continue;
        }
        await sleep(50);
        const before = await read(t);
        const req = op.request(t, 10_000 + i);
        const status = await statusOf(t.service.url, req, t.agent);
        await sleep(50);
        const after = await read(t);
        if (status === op.expected) await op.after?.(t, req).catch((error: Error) => failures.push(`after: ${error.message} (counted)`));
        else failures.push(`${req.method} ${req.path}: ${status} (counted)`);
        c.statements.push(after.statements - before.statements);
        c.single.push(after.shards.single - before.shards.single);
        c.multi.push(after.shards.multi - before.shards.multi);
      }
    }
  }
  const costLogLines = { single: costServices?.single.logLines ?? 0, citus: costServices?.citus.logLines ?? 0 };

  // ---- 4. report --------------------------------------------------------------------------------
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  const workers = coordinator.nodes.filter((n) => n.groupId !== 0);
  const coordinatorHasShards = coordinator.nodes.some((n) => n.groupId === 0 && n.shouldHaveShards);
  const durability = Object.entries(coordinator.durability).map(([k, v]) => `${k}=${v}`).join(', ');
  const costRows = ops.map((op) => {
    const per = timed.get(op.name)!;
    const q = (name: string, p: number) => quantile(ascending(per[name]!.ms), p);
    const c = counted.get(op.name)!;
    const statementsCitus = coordinatorStatements ? spreadOf(c.citus!.statements) : 'not loaded';
    const shards = counters ? `${spreadOf(c.citus!.single)} / ${spreadOf(c.citus!.multi)}` : 'not available';
    return (
      `| ${op.name} | ${fmtMs(q('single', 0.5))} / ${fmtMs(q('single', 0.95))} | ${fmtMs(q('citus', 0.5))} / ${fmtMs(q('citus', 0.95))} | ` +
      `**${(q('citus', 0.5) / q('single', 0.5)).toFixed(2)}** / ${(q('citus', 0.95) / q('single', 0.95)).toFixed(2)} | ` +
      `${spreadOf(c.single!.statements)} | ${statementsCitus} | ${shards} |`
    );
  });
  const costFailures = ops.flatMap((op) => (['single', 'citus'] as const).flatMap((name) => timed.get(op.name)![name]!.failures.map((f) => `${name}, ${op.name}: ${f}`)));
  const smokeRows = steps.map(({ single, citus }, i) => {
    const mark = !citus || citus.got !== single.got ? 'differs' : single.got !== single.expected ? 'not as expected' : '';
    const ms = (s?: Step) => (s?.request === 'check' && s.ms !== undefined ? ` (${f0(s.ms)} ms)` : '');
    return `| ${i + 1} | ${cell(single.label)} | ${cell(single.request)} | ${single.expected} | ${cell(single.got)}${ms(single)} | ${cell(citus?.got ?? '—')}${ms(citus)} | ${mark} |`;
  });
  const failureBlocks = (['citus', 'single'] as const).flatMap((name) =>
    failedSteps(name).map((s) => {
      const lines = linesFor(name, s.requestId);
      return [
        `- **${name}**, ${s.label} (\`${s.request}\`, request id \`${s.requestId ?? '—'}\`): expected ${s.expected}, got ${s.got}${s.detail ? `: \`${cell(s.detail.slice(0, 300))}\`` : ''}`,
        ...lines.map((l) => `  - log ${cell(describeLine(l))}`),
      ].join('\n');
    }),
  );
  const otherLogLines = (['citus', 'single'] as const).flatMap((name) =>
    smokeLogs[name].lines
      .filter((l) => l.level >= 40 && !runs[name].steps.some((s) => s.requestId !== undefined && s.requestId === l.reqId))
      .map((l) => `- ${name}: ${cell(describeLine(l)).slice(0, 400)}`),
  );
  const liveOf = (name: 'single' | 'citus') =>
    runs[name].steps.filter((s) => /live event arrives/.test(s.label)).map((s) => `${s.label.replace(': the live event arrives', '')} ${s.ms === undefined ? 'not arrived' : `${f0(s.ms)} ms`}`).join(', ');
  const ok = tally.citus.server === 0 && tally.single.server === 0 && differing.length === 0 && tally.citus.unexpected === 0 && tally.single.unexpected === 0 &&
    housekeepingSkipped.citus.length === 0 && housekeepingSkipped.single.length === 0 && costFailures.length === 0;

  const report = [
    `### The service on Citus against a single PostgreSQL, ${utcMinute(startedAt)} UTC`,
    '',
    `Command: \`CITUS_DATABASE_URL=… ${SMOKE_ONLY ? 'CITUS_SMOKE_ONLY=1 ' : ''}npm run bench:citus\` (CITUS_REQUESTS=${REQUESTS}, CITUS_ROUNDS=${ROUNDS}, CITUS_WARMUP=${WARMUP}, CITUS_COUNTED=${COUNTED}). ` +
      `Machine: ${os.availableParallelism()} CPUs (${cpu}), ${os.platform()} ${os.release()}; Node ${process.version}.`,
    '',
    `- **Citus**: ${coordinator.citusVersion} on PostgreSQL ${coordinator.serverVersion}, a coordinator${coordinatorHasShards ? ' holding shards' : ''} and ${workers.length} worker(s) ` +
      `(${workers.map((w) => `${w.host}:${w.port}${w.active ? '' : ' inactive'}`).join(', ')}), ${shardCount} shards per distributed table; ${durability}. ` +
      'When they share the bench\'s machine, the figures are of routing overhead, not of scale.',
    `- **Single node**: embedded PostgreSQL ${singlePg} with the same durability settings, pg_stat_statements loaded.`,
    `- \`npm run migrate\`: ${cell(migrated.slice(0, 200))}.`,
    `- \`npm run citus:distribute\`: ${cell(distributeSummary)}. Layout: ${layout.map((l) => `${l.table} ${l.layout}`).join('; ')}.`,
    '',
    '#### Smoke',
    '',
    `The same script on both (built service, LOG_LEVEL=debug, WEBHOOK_ALLOW_PRIVATE_URLS=1, rate limits off), as new users of this run.`,
    '',
    '| | single node | Citus |',
    '|---|---:|---:|',
    `| requests | ${tally.single.requests} | ${tally.citus.requests} |`,
    `| checks (live events, replayed answers, attempts) | ${tally.single.checks} | ${tally.citus.checks} |`,
    `| answers ≥ 500 | ${tally.single.server} | **${tally.citus.server}** |`,
    `| steps not as expected | ${tally.single.unexpected} | **${tally.citus.unexpected}** |`,
    `| housekeeping jobs skipped at start | ${housekeepingSkipped.single.length} | ${housekeepingSkipped.citus.length} |`,
    `| live events, the write's start → the event | ${liveOf('single')} | ${liveOf('citus')} |`,
    '',
    `Steps whose status differs between the targets: **${differing.length}**.`,
    '',
    ...(failureBlocks.length > 0 ? ['Failed steps, with the service\'s log lines for them (by X-Request-Id):', '', ...failureBlocks, ''] : ['No step failed on either target.', '']),
    ...(housekeepingSkipped.citus.length + housekeepingSkipped.single.length > 0
      ? ['Housekeeping jobs skipped:', '', ...(['citus', 'single'] as const).flatMap((n) => housekeepingSkipped[n].map((l) => `- ${n}: ${cell(l.raw.slice(0, 500))}`)), '']
      : []),
    ...(otherLogLines.length > 0 ? ['Other log lines at warn or worse during the smoke:', '', ...otherLogLines.slice(0, 40), ''] : []),
    '#### Costs',
    '',
    ...(SMOKE_ONLY
      ? ['Not measured (CITUS_SMOKE_ONLY=1).', '']
      : [
        `Sequential latency, one request at a time on a kept-alive connection: ${REQUESTS} requests of each operation to each target after ${WARMUP} unrecorded, ` +
          `in ${ROUNDS} rounds in which the targets take turns (forward, then backward), a wait for the machine to go quiet before each round. ` +
          `Statements: ${COUNTED} more requests of each, one at a time, 50 ms after each answer before reading; median (min–max) per request. ` +
          'Single node: pg_stat_statements calls of the service\'s role (BEGIN and COMMIT included). ' +
          `Coordinator: pg_stat_statements ${coordinatorStatements ? 'calls of the service' : 'is not loaded there (skipped)'}; ` +
          (counters
            ? 'Citus\'s counters (`citus_stat_counters`, on in the service\'s sessions only): statements run on one shard / on several (a multi-shard statement asks every shard of its table).'
            : 'Citus\'s counters are not available there (Citus before 13.1, or the setting refused).'),
        '',
        '| operation | single p50 / p95 ms | Citus p50 / p95 ms | Citus ÷ single, p50 / p95 | statements, single | statements, coordinator | Citus: single-shard / multi-shard per request |',
        '|---|---:|---:|---:|---:|---:|---:|',
        ...costRows,
        '',
        costFailures.length > 0 ? `Cost requests not answered as expected: ${costFailures.length}: ${costFailures.slice(0, 10).map(cell).join('; ')}` : 'Every cost request answered as expected.',
        `Log lines at warn or worse during the costs: single ${costLogLines.single}, Citus ${costLogLines.citus}.`,
      ]),
    `Load average (1/5/15 min) before the run: ${loadBefore.map((x) => x.toFixed(2)).join(' / ')}; after: ${os.loadavg().map((x) => x.toFixed(2)).join(' / ')}. ` +
      `Whole run: ${f0((Date.now() - startedAt.getTime()) / 1000)} s, of which ${f1(waitQuiet.waitedMs() / 1000)} s waiting for other processes to go quiet.`,
    '',
    `**Verdict: ${ok ? 'passed' : 'FAILED'}.**`,
    '',
    '#### Every smoke step',
    '',
    '| # | step | request | expected | single | Citus | |',
    '|---:|---|---|---:|---:|---:|---|',
    ...smokeRows,
  ].join('\n');
  log('\n' + report.split('\n#### Every smoke step')[0]);
  writeResult(session, report, { file: process.env.BENCH_OUT });
  if (!ok) throw new Error('the service on Citus failed checks; see the report');
});
