/**
 * Versions, ETags and conditional requests (API-CONTRACT.md §11) on the real database,
 * through both doors: strong ETags on single resources and on the writes that return one,
 * list ETags that move with any change of the page or the page count (and with the UTC
 * day for the task list), 304 for a matching If-None-Match, and 412 precondition_failed for
 * a stale If-Match that changes nothing, also when the competing change runs in parallel.
 */
import { describe, expect, it } from 'vitest';
import { callOptions, withEtag } from '../../src/client.js';
import { eventually } from '../helpers/eventually.js';
import { DAY, T0, onlyError, seconds, useTestAppWithSql } from '../helpers/test-app.js';

const { app, db } = useTestAppWithSql({ resetClock: true });

const DUE = seconds(T0) + 7 * DAY;
const STRONG = /^"[\x21\x23-\x7e]+"$/;

async function setup() {
  const user = await app.register();
  const { token } = user;
  const project = (await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'P' } } }));
  const task = (await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'T', project_id: project.body.data.id } } }));
  return { ...user, projectId: project.body.data.id as number, taskId: task.body.data.id as number, projectEtag: project.headers.get('etag')!, taskEtag: task.headers.get('etag')! };
}

const etagOf = async (path: string, token: string) => (await app.request('GET', path, { token })).headers.get('etag');

describe('ETags of single resources', () => {
  it('come with GET and with every write that returns the resource, and move with every change', async () => {
    const { token, projectId, taskId, taskEtag } = await setup();
    expect(taskEtag).toMatch(STRONG);
    const seen = new Set<string>();
    const step = async (res: { status: number; headers: Headers }, path: string) => {
      expect(res.status).toBeLessThan(300);
      const etag = res.headers.get('etag')!;
      expect(etag).toMatch(STRONG);
      expect(await etagOf(path, token)).toBe(etag);
      expect(seen.has(etag)).toBe(false);
      seen.add(etag);
    };
    const task = `/api/tasks/${taskId}`;
    const project = `/api/projects/${projectId}`;
    seen.add((await etagOf(project, token))!);
    seen.add(taskEtag);
    await step(await app.request('PATCH', task, { token, body: { task: { label: 'T2' } } }), task);
    await step(await app.request('PUT', `${task}/state`, { token, body: { task: { state: 'planned' } } }), task);
    await step(await app.request('PATCH', project, { token, body: { project: { description: 'd' } } }), project);
    await step(await app.request('PUT', `${project}/state`, { token, body: { project: { state: 'started', due_at: DUE } } }), project);
  });

  it('an unchanged write keeps the ETag; a reorder moves the versions of every task it moves', async () => {
    const { token, taskId } = await setup();
    const before = await etagOf(`/api/tasks/${taskId}`, token);
    const same = await app.request('PATCH', `/api/tasks/${taskId}`, { token, body: { task: { label: 'T' } } });
    expect(same.headers.get('etag')).toBe(before);
    const other = (await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'second' } } })).body.data.id;
    const otherBefore = await etagOf(`/api/tasks/${other}`, token);
    await app.request('PUT', `/api/tasks/${other}/order`, { token, body: { task: { order: 1 } } });
    expect(await etagOf(`/api/tasks/${taskId}`, token)).not.toBe(before);
    expect(await etagOf(`/api/tasks/${other}`, token)).not.toBe(otherBefore);
  });

  it("a project's ETag moves when its list of tasks does, though its row does not", async () => {
    const { token, projectId, taskId } = await setup();
    const path = `/api/projects/${projectId}`;
    const tags = [await etagOf(path, token)];
    await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'joins', project_id: projectId } } });
    tags.push(await etagOf(path, token));
    await app.request('PUT', `/api/tasks/${taskId}/state`, { token, body: { task: { state: 'abandoned' } } });
    tags.push(await etagOf(path, token));
    expect(new Set(tags).size).toBe(3);
  });

  it('a project start that starts its tasks moves their ETags (set-based SQL bumps versions too)', async () => {
    const { token, projectId, taskId } = await setup();
    const before = await etagOf(`/api/tasks/${taskId}`, token);
    await app.request('PUT', `/api/projects/${projectId}/state`, { token, body: { project: { state: 'started', due_at: DUE } } });
    expect(await etagOf(`/api/tasks/${taskId}`, token)).not.toBe(before);
  });
});

describe('If-None-Match', () => {
  it('answers 304 with no body while nothing changed, 200 after a change', async () => {
    const { token, projectId, taskId } = await setup();
    for (const path of [`/api/tasks/${taskId}`, `/api/projects/${projectId}`, '/api/users/me/tasks', '/api/users/me/projects']) {
      const first = await app.request('GET', path, { token });
      const etag = first.headers.get('etag')!;
      expect(etag, path).toMatch(STRONG);
      const again = await app.request('GET', path, { token, headers: { 'If-None-Match': etag } });
      expect(again.status, path).toBe(304);
      expect(again.text).toBe('');
      expect(again.headers.get('etag')).toBe(etag);
      expect((await app.request('GET', path, { token, headers: { 'If-None-Match': `"other", W/${etag}` } })).status).toBe(304);
      expect((await app.request('GET', path, { token, headers: { 'If-None-Match': '"other"' } })).status).toBe(200);
    }
    const list = await app.request('GET', '/api/users/me/tasks', { token });
    await app.request('PATCH', `/api/tasks/${taskId}`, { token, body: { task: { label: 'changed' } } });
    const after = await app.request('GET', '/api/users/me/tasks', { token, headers: { 'If-None-Match': list.headers.get('etag')! } });
    expect(after.status).toBe(200);
    expect(after.body.data[0].attributes.label).toBe('changed');
  });

  it("a list's ETag moves with any change on its page or in its page count, and not with another user's", async () => {
    const { token, taskId } = await setup();
    const other = await app.register();
    const tags = new Set<string>();
    const take = async (path: string) => {
      const etag = (await app.request('GET', path, { token })).headers.get('etag')!;
      expect(tags.has(etag)).toBe(false);
      tags.add(etag);
    };
    await take('/api/users/me/tasks');
    await app.request('POST', '/api/users/me/tasks', { token: other.token, body: { task: { label: 'theirs' } } });
    expect(tags.has((await app.request('GET', '/api/users/me/tasks', { token })).headers.get('etag')!)).toBe(true);
    await app.request('PUT', `/api/tasks/${taskId}/state`, { token, body: { task: { state: 'planned' } } });
    await take('/api/users/me/tasks');
    await take('/api/users/me/tasks?page=2');
    await take('/api/users/me/projects');
    await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Q' } } });
    await take('/api/users/me/projects');
  });

  it("a list's ETag names the page it comes with, also when a write lands between the token's read and the page's", async () => {
    const { id, token, projectId, taskId } = await setup();
    const lists = [
      { path: '/api/users/me/tasks', table: 'tasks', change: ['update tasks set label = $1, version = version + 1 where id = $2', taskId] },
      { path: '/api/users/me/projects', table: 'projects', change: ['update projects set name = $1, version = version + 1 where id = $2', projectId] },
    ] as const;
    for (const [i, { path, table, change }] of lists.entries()) {
      // The page's table is held while the request reads the token (and the list's version),
      // and a write lands before the page is read: the page shows it, so its tag must name it.
      await db.query('begin');
      await db.query(`lock table ${table} in access exclusive mode`);
      const raced = app.request('GET', path, { token });
      await eventually(async () => (await db.query('select 1 from pg_locks where relation = $1::regclass and not granted', [table])).rowCount, { message: `the list waited on ${table}`, timeout: 30_000 });
      await db.query(change[0], [`landed ${i}`, change[1]]);
      await db.query('update users set last_event_seq = last_event_seq + 1 where id = $1', [id]);
      await db.query('commit');
      const first = await raced;
      expect(JSON.stringify(first.body.data), path).toContain(`landed ${i}`);
      const again = await app.request('GET', path, { token });
      expect(again.body, path).toEqual(first.body);
      expect(first.headers.get('etag'), path).toBe(again.headers.get('etag'));
      expect((await app.request('GET', path, { token, headers: { 'If-None-Match': first.headers.get('etag')! } })).status, path).toBe(304);
    }
  });

  it("the task list's ETag moves at UTC midnight, when finished tasks may leave its window with no write", async () => {
    const { token, taskId } = await setup();
    await app.request('PUT', `/api/tasks/${taskId}/state`, { token, body: { task: { state: 'planned' } } });
    await app.request('PUT', `/api/tasks/${taskId}/state`, { token, body: { task: { state: 'finished' } } });
    const listed = await app.request('GET', '/api/users/me/tasks', { token });
    expect(listed.body.data).toHaveLength(1);
    const etag = listed.headers.get('etag')!;
    app.clock.set(T0 + 11 * 3600 * 1000); // 23:00 the same day
    expect((await app.request('GET', '/api/users/me/tasks', { token, headers: { 'If-None-Match': etag } })).status).toBe(304);
    app.clock.set(T0 + 15 * DAY * 1000);
    const aged = await app.request('GET', '/api/users/me/tasks', { token, headers: { 'If-None-Match': etag } });
    expect(aged.status).toBe(200);
    expect(aged.body.data).toEqual([]);
  });

  it('works on /trpc: a 304 with no body, and withEtag reports it', async () => {
    const { token, taskId } = await setup();
    const api = app.trpc(token);
    const { data, etag } = await withEtag((o) => api.tasks.get.query({ id: taskId }, o));
    expect(data!.data.id).toBe(taskId);
    expect(etag).toBe(await etagOf(`/api/tasks/${taskId}`, token));
    const again = await withEtag((o) => api.tasks.get.query({ id: taskId }, o), { ifNoneMatch: etag! });
    expect(again).toEqual({ data: undefined, etag, notModified: true, replayed: false });
    const list = await withEtag((o) => api.tasks.list.query({ page: 1 }, o));
    expect(list.etag).toBe(await etagOf('/api/users/me/tasks?page=1', token));
    const raw = await fetch(`${app.baseUrl}/trpc/tasks.list?input=${encodeURIComponent(JSON.stringify({ json: { page: 1 } }))}`, {
      headers: { Authorization: token, 'If-None-Match': list.etag! },
    });
    expect(raw.status).toBe(304);
    expect(await raw.text()).toBe('');
  });

  it('a tRPC batch of several calls gets no ETag', async () => {
    const { token, taskId } = await setup();
    const input = encodeURIComponent(JSON.stringify({ 0: { json: { id: taskId } }, 1: { json: { page: 1 } } }));
    const res = await fetch(`${app.baseUrl}/trpc/tasks.get,tasks.list?batch=1&input=${input}`, { headers: { Authorization: token } });
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).toBeNull();
    const single = await fetch(`${app.baseUrl}/trpc/tasks.get?batch=1&input=${encodeURIComponent(JSON.stringify({ 0: { json: { id: taskId } } }))}`, { headers: { Authorization: token } });
    expect(single.headers.get('etag')).toMatch(STRONG);
  });
});

describe('If-Match', () => {
  const writes = (projectId: number, taskId: number) => [
    ['PATCH', `/api/tasks/${taskId}`, { task: { label: 'stale' } }, 'task'],
    ['PUT', `/api/tasks/${taskId}/state`, { task: { state: 'abandoned' } }, 'task'],
    ['PUT', `/api/tasks/${taskId}/order`, { task: { order: 1 } }, 'task'],
    ['PATCH', `/api/projects/${projectId}`, { project: { name: 'stale' } }, 'project'],
    ['PUT', `/api/projects/${projectId}/state`, { project: { state: 'started', due_at: DUE } }, 'project'],
    ['DELETE', `/api/projects/${projectId}`, undefined, 'project'],
  ] as const;

  async function snapshot(userId: number) {
    const q = async (sql: string) => (await db.query(sql, [userId])).rows;
    return {
      projects: await q('select * from projects where user_id = $1 order by id'),
      tasks: await q('select * from tasks where user_id = $1 order by id'),
      events: await q('select count(*)::int from events where user_id = $1'),
    };
  }

  it('a stale tag is 412 precondition_failed on every write of one resource, and changes nothing', async () => {
    const { id, token, projectId, taskId, projectEtag, taskEtag } = await setup();
    // Both resources change after their tags were taken (a second task moves both).
    await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'newer', project_id: projectId } } });
    await app.request('PATCH', `/api/tasks/${taskId}`, { token, body: { task: { label: 'newer' } } });
    const before = await snapshot(id);
    for (const [method, path, body, kind] of writes(projectId, taskId)) {
      const stale = kind === 'task' ? taskEtag : projectEtag;
      const res = await app.request(method, path, { token, body, headers: { 'If-Match': stale } });
      expect(res.status, `${method} ${path}`).toBe(412);
      expect(onlyError(res.body)).toMatchObject({ status: '412', code: 'precondition_failed', source: { parameter: 'If-Match' } });
      // A weak tag never matches If-Match (strong comparison), even the current one.
      const current = await etagOf(kind === 'task' ? `/api/tasks/${taskId}` : `/api/projects/${projectId}`, token);
      expect((await app.request(method, path, { token, body, headers: { 'If-Match': `W/${current}` } })).status).toBe(412);
    }
    expect(await snapshot(id)).toEqual(before);
  });

  it('the current tag, a list holding it, * and no header all keep the write going', async () => {
    const { token, projectId, taskId } = await setup();
    const current = (await etagOf(`/api/tasks/${taskId}`, token))!;
    const ok = await app.request('PATCH', `/api/tasks/${taskId}`, { token, body: { task: { label: 'a' } }, headers: { 'If-Match': `"x", ${current}` } });
    expect(ok.status).toBe(200);
    expect((await app.request('PATCH', `/api/tasks/${taskId}`, { token, body: { task: { label: 'b' } }, headers: { 'If-Match': '*' } })).status).toBe(200);
    const project = (await etagOf(`/api/projects/${projectId}`, token))!;
    expect((await app.request('DELETE', `/api/projects/${projectId}`, { token, headers: { 'If-Match': project } })).status).toBe(204);
    // An unknown id stays 404, whatever If-Match says.
    expect((await app.request('PATCH', '/api/tasks/999999', { token, body: { task: { label: 'x' } }, headers: { 'If-Match': current } })).status).toBe(404);
  });

  it('of two parallel writes based on the same tag, exactly one lands; the other is 412 and changes nothing', async () => {
    const { id, token, taskId } = await setup();
    for (let round = 0; round < 5; round++) {
      const etag = (await etagOf(`/api/tasks/${taskId}`, token))!;
      const labels = Array.from({ length: 6 }, (_, i) => `r${round}-${i}`);
      const results = await Promise.all(
        labels.map((label) => app.request('PATCH', `/api/tasks/${taskId}`, { token, body: { task: { label } }, headers: { 'If-Match': etag } })),
      );
      const won = results.filter((r) => r.status === 200);
      expect(won).toHaveLength(1);
      expect(results.filter((r) => r.status === 412)).toHaveLength(5);
      const [row] = (await db.query('select label from tasks where id = $1 and user_id = $2', [taskId, id])).rows;
      expect(row.label).toBe(won[0]!.body.data.attributes.label);
    }
  });

  it('works on /trpc with the client: a stale tag is PRECONDITION_FAILED with the envelope, the current one goes through', async () => {
    const { token, taskId, taskEtag } = await setup();
    const api = app.trpc(token);
    const first = await withEtag((o) => api.tasks.update.mutate({ id: taskId, task: { label: 'via trpc' } }, o), { ifMatch: taskEtag });
    expect(first.data!.data.attributes.label).toBe('via trpc');
    expect(first.etag).not.toBe(taskEtag);
    await expect(api.tasks.update.mutate({ id: taskId, task: { label: 'stale' } }, callOptions({ ifMatch: taskEtag }))).rejects.toMatchObject({
      data: { code: 'precondition_failed', httpStatus: 412 },
    });
    expect((await api.tasks.get.query({ id: taskId })).data.attributes.label).toBe('via trpc');
  });
});

describe('If-None-Match on a write (RFC 9110 §13.1.2: never 304, 412 when it matches)', () => {
  const writes = (projectId: number, taskId: number) => [
    ['PATCH', `/api/tasks/${taskId}`, { task: { label: 'changed' } }, 'task'],
    ['PUT', `/api/tasks/${taskId}/state`, { task: { state: 'abandoned' } }, 'task'],
    ['PUT', `/api/tasks/${taskId}/order`, { task: { order: 1 } }, 'task'],
    ['PATCH', `/api/projects/${projectId}`, { project: { name: 'changed' } }, 'project'],
    ['PUT', `/api/projects/${projectId}/state`, { project: { state: 'started', due_at: DUE } }, 'project'],
    ['DELETE', `/api/projects/${projectId}`, undefined, 'project'],
  ] as const;

  it('the current tag (weak or strong, alone or in a list) and * are 412 precondition_failed on every write of one resource, and change nothing', async () => {
    const { id, token, projectId, taskId } = await setup();
    const rows = async () => (await db.query('select (select json_agg(p order by p.id) from projects p where p.user_id = $1) as p, (select json_agg(t order by t.id) from tasks t where t.user_id = $1) as t, (select count(*)::int from events where user_id = $1) as e', [id])).rows[0];
    const before = await rows();
    for (const [method, path, body, kind] of writes(projectId, taskId)) {
      const current = (await etagOf(kind === 'task' ? `/api/tasks/${taskId}` : `/api/projects/${projectId}`, token))!;
      for (const header of [current, `W/${current}`, `"other", ${current}`, '*']) {
        const res = await app.request(method, path, { token, body, headers: { 'If-None-Match': header } });
        expect(res.status, `${method} ${path} If-None-Match: ${header}`).toBe(412);
        expect(onlyError(res.body)).toMatchObject({ status: '412', code: 'precondition_failed', source: { parameter: 'If-None-Match' } });
      }
    }
    expect(await rows()).toEqual(before);
  });

  it('a tag that is not the current one lets the write go; on /trpc the same', async () => {
    const { token, taskId, taskEtag } = await setup();
    const moved = await app.request('PATCH', `/api/tasks/${taskId}`, { token, body: { task: { label: 'a' } }, headers: { 'If-None-Match': '"other"' } });
    expect(moved.status).toBe(200);
    // The tag from before that change is no longer current: the write goes.
    expect((await app.request('PATCH', `/api/tasks/${taskId}`, { token, body: { task: { label: 'b' } }, headers: { 'If-None-Match': taskEtag } })).status).toBe(200);
    const api = app.trpc(token);
    const current = (await etagOf(`/api/tasks/${taskId}`, token))!;
    await expect(api.tasks.update.mutate({ id: taskId, task: { label: 'c' } }, callOptions({ ifNoneMatch: current }))).rejects.toMatchObject({
      data: { code: 'precondition_failed', httpStatus: 412 },
    });
    expect((await api.tasks.get.query({ id: taskId })).data.attributes.label).toBe('b');
  });
});
