/**
 * Idempotency-Key on every write of projects and tasks (API-CONTRACT.md §11), on the real
 * database, through both doors: the first request runs and its outcome is kept; a retry
 * replays it (Idempotent-Replayed: true) and changes nothing; a different request with the
 * key is 422 idempotency_key_reused; a request refused before it ran keeps nothing; a domain
 * error that ran is kept and replayed; records expire after 24 hours and are pruned.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { keyLock } from '../../src/writes/idempotency.js';
import { eventually } from '../helpers/eventually.js';
import pg from 'pg';
import { DAY, T0, directUrlOf, onlyError, seconds, useTestAppWithSql } from '../helpers/test-app.js';

const { app, db } = useTestAppWithSql({ resetClock: true });

const DUE = seconds(T0) + 7 * DAY;
const key = () => randomUUID();

async function countRows(sql: string, params: unknown[]): Promise<number> {
  return (await db.query(sql, params)).rows[0].n;
}
const tasksOf = (userId: number) => countRows('select count(*)::int as n from tasks where user_id = $1', [userId]);
const eventsOf = (userId: number) => countRows('select count(*)::int as n from events where user_id = $1', [userId]);
const recordsOf = (userId: number) => countRows('select count(*)::int as n from idempotency_keys where user_id = $1', [userId]);

describe('REST: a retry with the same key', () => {
  it('replays the first status, body and ETag, with Idempotent-Replayed, and creates nothing more', async () => {
    const { id, token } = await app.register();
    const k = key();
    const body = { task: { label: 'Buy beans' } };
    const first = await app.request('POST', '/api/users/me/tasks', { token, body, headers: { 'Idempotency-Key': k } });
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const events = await eventsOf(id);
    const second = await app.request('POST', '/api/users/me/tasks', { token, body, headers: { 'Idempotency-Key': k } });
    expect(second.status).toBe(201);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.text).toBe(first.text);
    expect(second.headers.get('etag')).toBe(first.headers.get('etag'));
    expect(second.headers.get('etag')).toMatch(/^"[^"]+"$/);
    expect(await tasksOf(id)).toBe(1);
    expect(await eventsOf(id)).toBe(events);
    // Without a key, the same body creates again.
    await app.request('POST', '/api/users/me/tasks', { token, body });
    expect(await tasksOf(id)).toBe(2);
  });

  it('replays a 204 delete as a 204', async () => {
    const { token } = await app.register();
    const project = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Gone' } } });
    const k = key();
    const first = await app.request('DELETE', `/api/projects/${project.body.data.id}`, { token, headers: { 'Idempotency-Key': k } });
    const second = await app.request('DELETE', `/api/projects/${project.body.data.id}`, { token, headers: { 'Idempotency-Key': k } });
    expect([first.status, second.status]).toEqual([204, 204]);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.text).toBe('');
    // Without the key, the project is gone.
    expect((await app.request('DELETE', `/api/projects/${project.body.data.id}`, { token })).status).toBe(404);
  });

  it('replays a finished request while another retry of it holds the key (only a running first is 409), on both doors', async () => {
    const { id, token } = await app.register();
    const k = key();
    const body = { task: { label: 'Once' } };
    const first = await app.request('POST', '/api/users/me/tasks', { token, body, headers: { 'Idempotency-Key': k } });
    expect(first.status).toBe(201);
    // Another replay reading the kept outcome holds the key's lock meanwhile: here, a session of the test
    // holds it, on the server itself (behind PgBouncer, a session lock could land on a connection a request then takes).
    const lock = keyLock(id, k);
    const holder = new pg.Client({ connectionString: directUrlOf(app.databaseUrl) });
    await holder.connect();
    await holder.query('select pg_advisory_lock($1::bigint)', [lock]);
    try {
      const replays = await Promise.all(Array.from({ length: 5 }, () => app.request('POST', '/api/users/me/tasks', { token, body, headers: { 'Idempotency-Key': k } })));
      for (const replay of replays) {
        expect([replay.status, replay.headers.get('idempotent-replayed')], replay.text).toEqual([201, 'true']);
        expect(replay.text).toBe(first.text);
      }
      const trpc = await app.trpc(token).tasks.create.mutate(body, { context: { headers: { 'Idempotency-Key': k } } });
      expect(trpc).toEqual(first.body);
      // Another request with the key is still told so, not made to wait.
      const other = await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'Other' } }, headers: { 'Idempotency-Key': k } });
      expect([other.status, onlyError(other.body).code]).toEqual([422, 'idempotency_key_reused']);
    } finally {
      await holder.end();
    }
    expect(await tasksOf(id)).toBe(1);
  });

  it('an operation that takes no input replays across doors whatever input each call sent', async () => {
    const { token } = await app.register();
    const k = key();
    const first = await app.request('POST', '/api/users/me/events/tickets', { token, headers: { 'Idempotency-Key': k } });
    expect(first.status, first.text).toBe(201);
    for (const input of [{}, { x: 1 }, null]) {
      const trpc = await app.trpc(token).events.ticket.mutate(input as never, { context: { headers: { 'Idempotency-Key': k } } });
      expect(trpc, JSON.stringify(input)).toEqual(first.body);
    }
    const rest = await app.request('POST', '/api/users/me/events/tickets', { token, body: { x: 1 }, headers: { 'Idempotency-Key': k } });
    expect([rest.status, rest.headers.get('idempotent-replayed'), rest.text]).toEqual([201, 'true', first.text]);
  });

  it('keys are per user: two users may use the same key', async () => {
    const a = await app.register();
    const b = await app.register();
    const k = key();
    const ra = await app.request('POST', '/api/users/me/tasks', { token: a.token, body: { task: { label: 'a' } }, headers: { 'Idempotency-Key': k } });
    const rb = await app.request('POST', '/api/users/me/tasks', { token: b.token, body: { task: { label: 'a' } }, headers: { 'Idempotency-Key': k } });
    expect([ra.status, rb.status]).toEqual([201, 201]);
    expect(rb.headers.get('idempotent-replayed')).toBeNull();
    expect(rb.body.data.id).not.toBe(ra.body.data.id);
  });

  it('the same key with another body, path or method is 422 idempotency_key_reused and changes nothing', async () => {
    const { id, token } = await app.register();
    const k = key();
    const created = await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'one' } }, headers: { 'Idempotency-Key': k } });
    const taskId = created.body.data.id;
    const attempts = [
      () => app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'two' } }, headers: { 'Idempotency-Key': k } }),
      () => app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'one' } }, headers: { 'Idempotency-Key': k } }),
      () => app.request('PATCH', `/api/tasks/${taskId}`, { token, body: { task: { label: 'one' } }, headers: { 'Idempotency-Key': k } }),
    ];
    for (const attempt of attempts) {
      const res = await attempt();
      expect(res.status).toBe(422);
      expect(onlyError(res.body)).toMatchObject({ status: '422', code: 'idempotency_key_reused', source: { parameter: 'Idempotency-Key' } });
    }
    expect(await tasksOf(id)).toBe(1);
    expect((await app.request('GET', '/api/users/me/projects', { token })).body.data).toEqual([]);
    expect((await app.request('GET', `/api/tasks/${taskId}`, { token })).body.data.attributes.label).toBe('one');
  });

  it.each([
    ['empty', ''],
    ['too long', 'k'.repeat(256)],
    ['a space', 'a b'],
    ['a control character', 'a\tb'],
  ])('a key that is %s is 422 invalid on the header, and nothing runs', async (_, value) => {
    const { id, token } = await app.register();
    const res = await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'x' } }, headers: { 'Idempotency-Key': value } });
    expect(res.status).toBe(422);
    expect(onlyError(res.body)).toMatchObject({ code: 'invalid', source: { parameter: 'Idempotency-Key' } });
    expect(await tasksOf(id)).toBe(0);
    expect(await recordsOf(id)).toBe(0);
  });

  it('accepts 255 visible ASCII characters', async () => {
    const { token } = await app.register();
    const k = '!~'.repeat(127) + 'z';
    const res = await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'x' } }, headers: { 'Idempotency-Key': k } });
    expect(res.status).toBe(201);
  });
});

describe('REST: what is kept', () => {
  it('a request refused before it ran (validation 422, 400, 415, 401) keeps nothing: the fixed request runs', async () => {
    const { id, token } = await app.register();
    const k = key();
    const h = { 'Idempotency-Key': k };
    expect((await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: '' } }, headers: h })).status).toBe(422);
    expect((await app.request('POST', '/api/users/me/tasks', { token, rawBody: '{"task":', headers: { ...h, 'Content-Type': 'application/json' } })).status).toBe(400);
    expect((await app.request('POST', '/api/users/me/tasks', { token, rawBody: 'x', headers: { ...h, 'Content-Type': 'text/plain' } })).status).toBe(415);
    expect((await app.request('POST', '/api/users/me/tasks', { token: 'nope', body: { task: { label: 'fixed' } }, headers: h })).status).toBe(401);
    expect(await recordsOf(id)).toBe(0);
    const fixed = await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'fixed' } }, headers: h });
    expect(fixed.status).toBe(201);
    expect(fixed.headers.get('idempotent-replayed')).toBeNull();
    expect(await tasksOf(id)).toBe(1);
  });

  it('a rule of the input that needs the database (a taken name, a project that is not the user\'s) keeps nothing: the fixed request runs under the same key, on both doors', async () => {
    const { id, token } = await app.register();
    await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Taken' } } });
    const k = key();
    const h = { 'Idempotency-Key': k };
    expect(onlyError((await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'taken' } }, headers: h })).body).code).toBe('taken');
    await expect(app.trpc(token).projects.create.mutate({ project: { name: 'TAKEN' } }, { context: { headers: h } })).rejects.toMatchObject({ data: { code: 'taken' } });
    const t = key();
    const linked = await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'x', project_id: 999_999 } }, headers: { 'Idempotency-Key': t } });
    expect(onlyError(linked.body)).toMatchObject({ code: 'record_not_found', source: { pointer: '/task/project_id' } });
    expect(await recordsOf(id)).toBe(0);
    const fixed = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Free' } }, headers: h });
    expect([fixed.status, fixed.headers.get('idempotent-replayed')]).toEqual([201, null]);
    expect((await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'x' } }, headers: { 'Idempotency-Key': t } })).status).toBe(201);
    expect(await recordsOf(id)).toBe(2);
  });

  it('a domain error that ran is kept and replayed, even once the request would now succeed', async () => {
    const { token } = await app.register();
    const ids: number[] = [];
    for (const name of ['a', 'b', 'c', 'd']) ids.push((await app.request('POST', '/api/users/me/projects', { token, body: { project: { name } } })).body.data.id);
    for (const p of ids.slice(0, 3)) await app.request('PUT', `/api/projects/${p}/state`, { token, body: { project: { state: 'started', due_at: DUE } } });
    const k = key();
    const start = { project: { state: 'started', due_at: DUE } };
    const refused = await app.request('PUT', `/api/projects/${ids[3]}/state`, { token, body: start, headers: { 'Idempotency-Key': k } });
    expect(refused.status).toBe(422);
    expect(onlyError(refused.body).code).toBe('reached_max_started');
    await app.request('PUT', `/api/projects/${ids[0]}/state`, { token, body: { project: { state: 'paused' } } });
    const replay = await app.request('PUT', `/api/projects/${ids[3]}/state`, { token, body: start, headers: { 'Idempotency-Key': k } });
    expect(replay.status).toBe(422);
    expect(replay.text).toBe(refused.text);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect((await app.request('GET', `/api/projects/${ids[3]}`, { token })).body.data.attributes.state).toBe('newed');
  });

  it('a 404 on the path id ran, and is kept', async () => {
    const { id, token } = await app.register();
    const k = key();
    const first = await app.request('PATCH', '/api/tasks/999999', { token, body: { task: { label: 'x' } }, headers: { 'Idempotency-Key': k } });
    const again = await app.request('PATCH', '/api/tasks/999999', { token, body: { task: { label: 'x' } }, headers: { 'Idempotency-Key': k } });
    expect([first.status, again.status]).toEqual([404, 404]);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await recordsOf(id)).toBe(1);
  });

  it('a record lives 24 hours: after that the key runs again, and old records are pruned', async () => {
    const { id, token } = await app.register();
    const k = key();
    const send = () => app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'daily' } }, headers: { 'Idempotency-Key': k } });
    await send();
    app.clock.set(T0 + 24 * 3600 * 1000 - 1000);
    expect((await send()).headers.get('idempotent-replayed')).toBe('true');
    expect(await tasksOf(id)).toBe(1);
    app.clock.set(T0 + 24 * 3600 * 1000 + 1000);
    const again = await send();
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(await tasksOf(id)).toBe(2);
    // Another user's old record is pruned by a later keyed write (in the background).
    const other = await app.register();
    app.clock.set(T0 + 3 * DAY * 1000);
    await app.request('POST', '/api/users/me/tasks', { token: other.token, body: { task: { label: 'x' } }, headers: { 'Idempotency-Key': key() } });
    await eventually(async () => (await recordsOf(id)) === 0, { message: "the other user's old record was pruned" });
  });
});

describe('tRPC: the same keys', () => {
  it('a retried mutation replays its result and creates nothing more; another input is refused', async () => {
    const { id, token } = await app.register();
    const k = key();
    const api = app.trpc(token);
    const first = await api.tasks.create.mutate({ task: { label: 'trpc' } }, { context: { headers: { 'Idempotency-Key': k } } });
    const again = await api.tasks.create.mutate({ task: { label: 'trpc' } }, { context: { headers: { 'Idempotency-Key': k } } });
    expect(again).toEqual(first);
    expect(await tasksOf(id)).toBe(1);
    await expect(api.tasks.create.mutate({ task: { label: 'other' } }, { context: { headers: { 'Idempotency-Key': k } } })).rejects.toMatchObject({
      data: { code: 'idempotency_key_reused', httpStatus: 422 },
    });
  });

  it('a member sent as undefined (superjson) is the same input as one left out, on either door', async () => {
    const { id, token } = await app.register();
    const k = key();
    const rest = await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'x' } }, headers: { 'Idempotency-Key': k } });
    expect(rest.status).toBe(201);
    const api = app.trpc(token);
    const again = await api.tasks.create.mutate({ task: { label: 'x', planned_at: undefined } }, { context: { headers: { 'Idempotency-Key': k } } });
    expect(again).toEqual(rest.body);
    expect(await tasksOf(id)).toBe(1);
  });

  it('a replay over /trpc carries Idempotent-Replayed and the ETag', async () => {
    const { token } = await app.register();
    const k = key();
    const send = () =>
      fetch(`${app.baseUrl}/trpc/tasks.create`, {
        method: 'POST',
        headers: { Authorization: token, 'Content-Type': 'application/json', 'Idempotency-Key': k },
        body: JSON.stringify({ json: { task: { label: 'raw' } } }),
      });
    const first = await send();
    const second = await send();
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.headers.get('etag')).toBe(first.headers.get('etag'));
    expect(await second.text()).toBe(await first.text());
  });

  it('a batch of several calls cannot carry a key: 400 on the header, nothing runs', async () => {
    const { id, token } = await app.register();
    const res = await fetch(`${app.baseUrl}/trpc/tasks.create,tasks.create?batch=1`, {
      method: 'POST',
      headers: { Authorization: token, 'Content-Type': 'application/json', 'Idempotency-Key': key() },
      body: JSON.stringify({ 0: { json: { task: { label: 'a' } } }, 1: { json: { task: { label: 'b' } } } }),
    });
    const body = (await res.json()) as Array<{ error: { json: { data: { code: string; errors: Array<{ source: unknown }> } } } }>;
    expect(body.map((r) => r.error.json.data.code)).toEqual(['invalid', 'invalid']);
    expect(body[0]!.error.json.data.errors[0]!.source).toEqual({ parameter: 'Idempotency-Key' });
    expect(await tasksOf(id)).toBe(0);
  });
});
