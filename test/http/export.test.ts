/**
 * The account's export (API-CONTRACT.md §16): GET /api/users/me/export and tRPC `users.export`.
 * Every record of the user, each item exactly what its own GET answers under `data` (compared
 * with real GET answers), tasks the list hides included, no webhook secret, nothing of
 * another user; the NDJSON form by `Accept`; the attachment header; the refusals and limits
 * of any other route; a client that goes away mid-stream gives its database connection back.
 * The memory bound of a large export is test/system/export-memory.test.ts.
 */
import { request as httpRequest } from 'node:http';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { rawRequest } from '../helpers/http.js';
import { DAY, T0, onlyError, startTestApp, useTestAppWithSql } from '../helpers/test-app.js';
import { DUE } from '../helpers/times.js';

const { app, db } = useTestAppWithSql();
const EXPORT = '/api/users/me/export';
const NDJSON = 'application/x-ndjson';

type Json = Record<string, any>;

interface Account {
  id: number;
  token: string;
  projects: number[];
  tasks: number[];
  webhooks: number[];
  secrets: string[];
}

async function ok(method: string, path: string, token: string, body?: unknown): Promise<Json> {
  const res = await app.request(method, path, { token, body });
  expect(res.status, `${method} ${path}: ${res.text}`).toBeLessThan(300);
  return res.body;
}

const setState = (token: string, id: number, state: string) => ok('PUT', `/api/tasks/${id}/state`, token, { task: { state } });

/**
 * A user with two projects (one started), tasks in every state (newed, started, planned,
 * finished today, finished long ago, abandoned; one of no project) and a webhook.
 */
async function seedAccount(name: string): Promise<Account> {
  const { id, token } = await app.register(name);
  const garden = (await ok('POST', '/api/users/me/projects', token, { project: { name: `${name}-garden` } })).data.id as number;
  await ok('PUT', `/api/projects/${garden}/state`, token, { project: { state: 'started', due_at: DUE } });
  const shed = (await ok('POST', '/api/users/me/projects', token, { project: { name: `${name}-shed`, description: 'Tools' } })).data.id as number;
  const task = async (label: string, projectId: number | null) =>
    (await ok('POST', '/api/users/me/tasks', token, { task: { label: `${name} ${label}`, ...(projectId ? { project_id: projectId } : {}) } })).data.id as number;

  // Finished 40 days ago: out of the task list's 14 days, still the user's.
  app.clock.set(T0 - 40 * DAY * 1000);
  const old = await task('old errand', garden);
  await setState(token, old, 'planned');
  await setState(token, old, 'finished');
  app.clock.set(T0);

  // A task of a started project starts with it (SPEC.md 4.5): these are in the newed one.
  const newed = await task('newed', shed);
  const started = await task('started', shed);
  await setState(token, started, 'started');
  const planned = await task('planned', shed);
  await setState(token, planned, 'planned');
  const finished = await task('finished', shed);
  await setState(token, finished, 'planned');
  await setState(token, finished, 'finished');
  const abandoned = await task('abandoned', garden);
  await setState(token, abandoned, 'abandoned');
  const loose = await task('loose', null);

  const hook = await ok('POST', '/api/users/me/webhooks', token, { webhook: { url: `https://hooks.example.com/${name}`, description: 'Board' } });
  // A rotated secret stays valid for a while: neither the old nor the new may show.
  const rotated = await ok('POST', `/api/webhooks/${hook.data.id}/secret`, token);
  return {
    id,
    token,
    projects: [garden, shed],
    tasks: [old, newed, started, planned, finished, abandoned, loose].sort((a, b) => a - b),
    webhooks: [hook.data.id],
    secrets: [hook.meta.secret, rotated.meta.secret].filter((s) => typeof s === 'string'),
  };
}

let owner: Account;
let other: Account;

beforeAll(async () => {
  owner = await seedAccount('owner');
  other = await seedAccount('other');
});

/** What the GET of each record answers under `data`. */
async function answersOfGets(account: Account): Promise<Json> {
  const data = async (path: string) => (await ok('GET', path, account.token)).data;
  return {
    user: await data('/api/users/me'),
    projects: await Promise.all(account.projects.map((id) => data(`/api/projects/${id}`))),
    tasks: await Promise.all(account.tasks.map((id) => data(`/api/tasks/${id}`))),
    webhooks: await Promise.all(account.webhooks.map((id) => data(`/api/webhooks/${id}`))),
  };
}

describe('GET /api/users/me/export', () => {
  it('answers one JSON document of every record, each as its GET shows it, as an attachment', async () => {
    const res = await app.request('GET', EXPORT, { token: owner.token });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="export.json"');
    expect(res.headers.get('x-request-id')).toBeTruthy();
    expect(Object.keys(res.body)).toEqual(['user', 'projects', 'tasks', 'webhooks']);
    expect(res.body).toEqual(await answersOfGets(owner));
    // Every kind of task, in order of id.
    expect(res.body.tasks.map((t: Json) => t.attributes.state)).toEqual(['finished', 'newed', 'started', 'planned', 'finished', 'abandoned', 'started']);
  });

  it('includes the tasks the task list leaves out (abandoned, finished long ago)', async () => {
    const listed = (await ok('GET', '/api/users/me/tasks', owner.token)).data.map((t: Json) => t.id);
    const hidden = owner.tasks.filter((id) => !listed.includes(id));
    expect(hidden).toHaveLength(2);
    const exported = (await app.request('GET', EXPORT, { token: owner.token })).body.tasks.map((t: Json) => t.id);
    expect(exported).toEqual(owner.tasks);
    for (const id of hidden) expect(exported).toContain(id);
  });

  it('shows no webhook secret and nothing of another user', async () => {
    const res = await app.request('GET', EXPORT, { token: owner.token });
    expect(owner.secrets.length).toBe(2);
    for (const secret of [...owner.secrets, ...other.secrets]) expect(res.text).not.toContain(secret);
    expect(res.text).not.toContain('whsec_');
    expect(res.text).not.toContain(owner.token);
    const { rows } = await db.query<{ secret: string }>('select secret from webhooks where user_id = $1', [owner.id]);
    expect(rows.length).toBe(1);
    expect(res.text).not.toContain(rows[0]!.secret);
    expect(res.text).not.toContain('other');
    expect(res.body.projects.map((p: Json) => p.id)).toEqual(owner.projects);
    expect(res.body.webhooks.map((w: Json) => w.id)).toEqual(owner.webhooks);
    // The other user's export is theirs alone.
    const theirs = (await app.request('GET', EXPORT, { token: other.token })).body;
    expect(theirs).toEqual(await answersOfGets(other));
    for (const id of owner.tasks) expect(theirs.tasks.map((t: Json) => t.id)).not.toContain(id);
  });

  it('answers NDJSON when Accept asks for it: the user, then each project, task and webhook, one a line', async () => {
    const json = (await app.request('GET', EXPORT, { token: owner.token })).body;
    const res = await app.request('GET', EXPORT, { token: owner.token, headers: { Accept: NDJSON } });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toBe(NDJSON);
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="export.ndjson"');
    expect(res.text.endsWith('\n')).toBe(true);
    const lines = res.text.slice(0, -1).split('\n').map((line) => JSON.parse(line) as Json);
    expect(lines).toEqual([json.user, ...json.projects, ...json.tasks, ...json.webhooks]);
    expect(lines.map((l) => l.type)).toEqual(['user', 'project', 'project', ...owner.tasks.map(() => 'task'), 'webhook']);
  });

  it.each([
    ['*/*', 'json'],
    ['text/html', 'json'],
    [`application/json, ${NDJSON};q=0.5`, 'json'],
    [`${NDJSON};q=0, */*`, 'json'],
    [`${NDJSON}, application/json;q=0.9`, 'ndjson'],
    [`${NDJSON.toUpperCase()}`, 'ndjson'],
  ])('Accept: %s answers %s', async (accept, form) => {
    const res = await app.request('GET', EXPORT, { token: owner.token, headers: { Accept: accept } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(form === 'json' ? 'application/json; charset=utf-8' : NDJSON);
    if (form === 'json') expect(res.body.user.id).toBe(owner.id);
    else expect(JSON.parse(res.text.split('\n')[0]!)).toEqual(expect.objectContaining({ type: 'user', id: owner.id }));
  });

  it('is 401 in the error envelope without a token, or with an unknown one', async () => {
    for (const token of [undefined, 'not-a-token-of-anyone-at-all-0000000000']) {
      const res = await app.request('GET', EXPORT, { token, headers: { Accept: NDJSON } });
      expect(res.status).toBe(401);
      expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(res.headers.get('content-disposition')).toBeNull();
      expect(res.headers.get('x-request-id')).toBeTruthy();
      expect(Object.keys(res.body)).toEqual(['errors']);
      expect(onlyError(res.body)).toMatchObject({ status: '401', code: 'unauthorized' });
    }
  });

  it('holds a body sent along to the rules of any body (415 after the token is checked)', async () => {
    const res = await rawRequest(`${app.baseUrl}${EXPORT}`, 'GET', { Authorization: owner.token, 'Content-Type': 'text/plain' }, 'x');
    expect(res.status).toBe(415);
    expect(onlyError(res.body)).toMatchObject({ code: 'unsupported_media_type' });
  });

  it('counts against the token\'s rate limit like any request', async () => {
    const limited = await startTestApp({ databaseUrl: app.databaseUrl, rateLimits: { authPerMinute: 100, perMinute: 2 }, clock: app.clock });
    try {
      const { token } = await limited.register();
      for (let i = 0; i < 2; i++) {
        const res = await limited.request('GET', EXPORT, { token });
        expect(res.status).toBe(200);
        expect(res.headers.get('ratelimit-remaining')).toBe(String(1 - i));
      }
      const refused = await limited.request('GET', EXPORT, { token });
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
      expect(onlyError(refused.body)).toMatchObject({ code: 'rate_limited' });
    } finally {
      await limited.close();
    }
  });

  it('gives its connection back when the client goes away mid-stream', async () => {
    // Enough tasks that the answer outgrows the socket's buffers: the server waits to write.
    const { id, token } = await app.register();
    await db.query(
      `insert into tasks (user_id, label, "order", planned_count, state, created_at)
       select $1, 'Bulk ' || g, g, 0, 'newed', now() from generate_series(1, 5000) g`,
      [id],
    );
    await db.query('update users set next_task_order = 5001 where id = $1', [id]);
    const first = await new Promise<string>((resolve, reject) => {
      const req = httpRequest(`${app.baseUrl}${EXPORT}`, { headers: { Authorization: token } }, (res) => {
        res.once('data', (chunk: Buffer) => {
          // Gone after the first chunk, long before the last.
          req.destroy();
          resolve(chunk.toString('utf8'));
        });
      });
      req.on('error', (error: NodeJS.ErrnoException) => (error.code === 'ECONNRESET' ? undefined : reject(error)));
      req.end();
    });
    expect(first.startsWith('{"user":')).toBe(true);
    // The snapshot's transaction ends: no session of the app's database stays in it.
    await eventually(async () => {
      const { rows } = await db.query(
        `select count(*)::int as n from pg_stat_activity
          where datname = current_database() and pid <> pg_backend_pid() and state in ('idle in transaction', 'active')`,
      );
      return rows[0].n === 0;
    }, { message: 'the export\'s transaction to end' });
    // And the export answers whole when read to the end.
    const whole = await app.request('GET', EXPORT, { token });
    expect(whole.body.tasks).toHaveLength(5000);
  });
});

describe('tRPC users.export', () => {
  it('answers the same document as REST', async () => {
    const rest = (await app.request('GET', EXPORT, { token: owner.token })).body;
    expect(await app.trpc(owner.token).users.export.query()).toEqual(rest);
  });

  it('is unauthorized without a token', async () => {
    await expect(app.trpc().users.export.query()).rejects.toMatchObject({
      data: { code: 'unauthorized', httpStatus: 401, errors: [expect.objectContaining({ code: 'unauthorized' })] },
    });
  });
});
