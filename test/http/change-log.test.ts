/**
 * The change log (API-CONTRACT.md §10) on the real database: which events each write
 * appends (and that a refused write appends none), delta sync pages and cursors, the REST
 * Server-Sent Events stream (live delivery, resumption by Last-Event-ID and ?after=,
 * heartbeats, tickets for EventSource, limits, revocation) and the tRPC subscription.
 */
import net from 'node:net';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client.js';
import { MAX_STREAMS_PER_TOKEN } from '../../src/changes/event-hub.js';
import { EVENTS_PATH } from '../../src/changes/events.router.js';
import { parseNotification } from '../../src/changes/event.store.js';
import { EVENTS_CHANNEL } from '../../src/writes/announcer.js';
import { eventually } from '../helpers/eventually.js';
import { openStream, type SseStream } from '../helpers/sse.js';
import { DAY, T0, directUrlOf, seconds, startTestApp, useTestApp, type TestApp } from '../helpers/test-app.js';

const app = useTestApp({ eventsIdleMs: 150, resetClock: true });

const DUE = seconds(T0) + 7 * DAY;
const EVENTS = EVENTS_PATH;

type User = Awaited<ReturnType<TestApp['register']>>;

async function newestId(user: User): Promise<string> {
  const res = await app.request('GET', EVENTS, { token: user.token });
  expect(res.status).toBe(200);
  expect(res.body.data).toEqual([]);
  return res.body.meta.last_event_id;
}

/** Every event after `after`, following links.next. */
async function eventsAfter(user: User, after: string) {
  const all: any[] = [];
  let path: string | undefined = `${EVENTS}?after=${after}`;
  while (path) {
    const res: { status: number; text: string; body: any } = await app.request('GET', path, { token: user.token });
    expect(res.status, res.text).toBe(200);
    all.push(...res.body.data);
    path = res.body.links.next?.replace(app.baseUrl, '');
  }
  return all;
}

const summary = (events: any[]) => events.map((e) => [e.type, e.data.type, e.data.id]);

async function ok(method: string, path: string, token: string, body?: unknown) {
  const res = await app.request(method, path, { token, body });
  expect(res.status, `${method} ${path}: ${res.text}`).toBeLessThan(300);
  return res.body;
}

/** The payloads of the user's NOTIFYs from now on, as they arrive; `end` stops listening. */
async function notificationsOf(user: User): Promise<{ payloads: string[]; end: () => Promise<void> }> {
  const listener = new pg.Client({ connectionString: directUrlOf(app.databaseUrl) });
  await listener.connect();
  const payloads: string[] = [];
  listener.on('notification', (n) => {
    if (n.payload?.startsWith(`${user.id}:`)) payloads.push(n.payload);
  });
  await listener.query(`listen ${EVENTS_CHANNEL}`);
  return { payloads, end: () => listener.end() };
}

describe('what each write appends', () => {
  it('a task abandoned in a project, and a task moved between projects, give the projects\' documents as the change leaves them', async () => {
    const u = await app.register();
    const a = (await ok('POST', '/api/users/me/projects', u.token, { project: { name: 'A' } })).data;
    const b = (await ok('POST', '/api/users/me/projects', u.token, { project: { name: 'B' } })).data;
    const [one, two, three] = [
      (await ok('POST', '/api/users/me/tasks', u.token, { task: { label: '1', project_id: a.id } })).data,
      (await ok('POST', '/api/users/me/tasks', u.token, { task: { label: '2', project_id: a.id } })).data,
      (await ok('POST', '/api/users/me/tasks', u.token, { task: { label: '3', project_id: b.id } })).data,
    ];
    const from = await newestId(u);
    await ok('PUT', `/api/tasks/${one.id}/state`, u.token, { task: { state: 'abandoned' } });
    const afterAbandon = await eventsAfter(u, from);
    expect(summary(afterAbandon)).toEqual([['task.updated', 'task', one.id], ['project.updated', 'project', a.id]]);
    expect(afterAbandon[1].data.relationships.tasks.data).toEqual([{ type: 'task', id: two.id }]);
    expect(afterAbandon[1].data).toEqual((await ok('GET', `/api/projects/${a.id}`, u.token)).data);

    const beforeMove = await newestId(u);
    await ok('PATCH', `/api/tasks/${two.id}`, u.token, { task: { project_id: b.id } });
    const afterMove = await eventsAfter(u, beforeMove);
    expect(summary(afterMove)).toEqual([['project.updated', 'project', a.id], ['project.updated', 'project', b.id], ['task.updated', 'task', two.id]]);
    expect(afterMove[0].data).toEqual((await ok('GET', `/api/projects/${a.id}`, u.token)).data);
    expect(afterMove[0].data.relationships.tasks.data).toEqual([]);
    expect(afterMove[1].data).toEqual((await ok('GET', `/api/projects/${b.id}`, u.token)).data);
    // By order: three was created after two, so two (order 2) comes before three (order 3).
    expect(afterMove[1].data.relationships.tasks.data).toEqual([{ type: 'task', id: two.id }, { type: 'task', id: three.id }]);
    expect(afterMove[2].data).toEqual((await ok('GET', `/api/tasks/${two.id}`, u.token)).data);

    // A reorder: the moved tasks by order, and the task's project, whose tasks it passed, after its first moved task,
    // listing its tasks in their new order.
    const beforeReorder = await newestId(u);
    await ok('PUT', `/api/tasks/${three.id}/order`, u.token, { task: { order: 1 } });
    const afterReorder = await eventsAfter(u, beforeReorder);
    expect(summary(afterReorder)).toEqual([
      ['task.updated', 'task', three.id], ['project.updated', 'project', b.id],
      // A still holds the abandoned task, which moved: A lists none, its document is the same.
      ['task.updated', 'task', one.id],
      ['task.updated', 'task', two.id],
    ]);
    expect([afterReorder[0], afterReorder[2], afterReorder[3]].map((e) => e!.data.attributes.order)).toEqual([1, 2, 3]);
    expect(afterReorder[1].data.relationships.tasks.data).toEqual([{ type: 'task', id: three.id }, { type: 'task', id: two.id }]);
    expect(afterReorder[1].data).toEqual((await ok('GET', `/api/projects/${b.id}`, u.token)).data);
  });

  it('every write kind gives its events, each with the document the endpoints return', async () => {
    const u = await app.register();
    const start = await newestId(u);
    expect(start).toBe('0');

    const project = (await ok('POST', '/api/users/me/projects', u.token, { project: { name: 'Log' } })).data;
    const inProject = (await ok('POST', '/api/users/me/tasks', u.token, { task: { label: 'a', project_id: project.id } })).data;
    const alone = (await ok('POST', '/api/users/me/tasks', u.token, { task: { label: 'b' } })).data;
    await ok('PUT', `/api/projects/${project.id}/state`, u.token, { project: { state: 'started', due_at: DUE } });
    await ok('PATCH', `/api/tasks/${alone.id}`, u.token, { task: { label: 'b2' } });
    await ok('PUT', `/api/tasks/${alone.id}/state`, u.token, { task: { state: 'planned' } });
    await ok('PUT', `/api/tasks/${alone.id}/order`, u.token, { task: { order: 1 } });
    await ok('PATCH', `/api/projects/${project.id}`, u.token, { project: { description: 'd' } });
    await ok('DELETE', `/api/projects/${project.id}`, u.token);

    const events = await eventsAfter(u, start);
    expect(summary(events)).toEqual([
      ['project.created', 'project', project.id],
      ['task.created', 'task', inProject.id],
      ['project.updated', 'project', project.id], // its task list grew
      ['task.created', 'task', alone.id],
      ['project.updated', 'project', project.id], // started
      ['task.updated', 'task', inProject.id], // started with its project
      ['task.updated', 'task', alone.id], // label
      ['task.updated', 'task', alone.id], // planned
      ['task.updated', 'task', alone.id], // moved to 1
      ['task.updated', 'task', inProject.id], // shifted to 2; its project's document is the same (a)
      ['project.updated', 'project', project.id], // description
      ['project.deleted', 'project', project.id],
      ['task.updated', 'task', inProject.id], // released: abandoned, detached
    ]);
    const ids = events.map((e) => BigInt(e.id));
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
    for (const e of events) {
      expect(Object.keys(e).sort()).toEqual(['at', 'data', 'id', 'type']);
      expect(e.at).toBe(seconds(T0));
      expect(typeof e.id).toBe('string');
    }
    expect(events.at(-2).data).toEqual({ type: 'project', id: project.id });
    // Each document is what the endpoint answers now (or answered then).
    const released = await ok('GET', `/api/tasks/${inProject.id}`, u.token);
    expect(events.at(-1).data).toEqual(released.data);
    expect(events.at(-1).data.attributes.state).toBe('abandoned');
    expect(events.at(-1).data.relationships.project.data).toBeNull();
    const single = await ok('GET', `/api/tasks/${alone.id}`, u.token);
    expect(events[8].data).toEqual(single.data);
    // The very same document, members in the same order, as the endpoint writes it.
    expect(JSON.stringify(events.at(-1).data)).toBe(JSON.stringify(released.data));
  });

  it('a refused write appends nothing; a reorder in place appends nothing', async () => {
    const u = await app.register();
    const start = await newestId(u);
    const task = (await ok('POST', '/api/users/me/tasks', u.token, { task: { label: 'x' } })).data;
    const after = await newestId(u);
    expect((await app.request('PUT', `/api/tasks/${task.id}/state`, { token: u.token, body: { task: { state: 'finished' } } })).status).toBe(422);
    expect((await app.request('POST', '/api/users/me/projects', { token: u.token, body: { project: { name: 'bad name' } } })).status).toBe(422);
    const names = ['p1', 'p2', 'p3', 'p4'];
    for (const name of names) {
      const p = (await ok('POST', '/api/users/me/projects', u.token, { project: { name } })).data;
      const res = await app.request('PUT', `/api/projects/${p.id}/state`, { token: u.token, body: { project: { state: 'started', due_at: DUE } } });
      expect(res.status).toBe(name === 'p4' ? 422 : 200);
    }
    await ok('PUT', `/api/tasks/${task.id}/order`, u.token, { task: { order: 1 } });
    const events = await eventsAfter(u, after);
    expect(summary(events)).toEqual(names.flatMap((_, i) => {
      const created = [['project.created', 'project', expect.any(Number)]];
      return i < 3 ? [...created, ['project.updated', 'project', expect.any(Number)]] : created;
    }));
    expect(await eventsAfter(u, start)).toHaveLength(events.length + 1);
  });

  it('an edit that changes nothing appends nothing and keeps the ETag, on both doors; one that changes something appends its event', async () => {
    const u = await app.register();
    const project = (await ok('POST', '/api/users/me/projects', u.token, { project: { name: 'Same' } })).data;
    await ok('PATCH', `/api/projects/${project.id}`, u.token, { project: { description: 'd' } });
    const task = (await ok('POST', '/api/users/me/tasks', u.token, { task: { label: 'same', project_id: project.id } })).data;
    const before = await newestId(u);
    const tags = [
      (await app.request('GET', `/api/projects/${project.id}`, { token: u.token })).headers.get('etag'),
      (await app.request('GET', `/api/tasks/${task.id}`, { token: u.token })).headers.get('etag'),
    ];
    const unchanged = [
      ['PATCH', `/api/projects/${project.id}`, { project: {} }],
      ['PATCH', `/api/projects/${project.id}`, { project: { name: 'Same' } }],
      ['PATCH', `/api/projects/${project.id}`, { project: { description: 'd' } }],
      ['PATCH', `/api/projects/${project.id}`, { project: { due_at: 0 } }],
      ['PATCH', `/api/tasks/${task.id}`, { task: {} }],
      ['PATCH', `/api/tasks/${task.id}`, { task: { label: 'same', project_id: project.id } }],
    ] as const;
    for (const [method, path, body] of unchanged) {
      const res = await app.request(method, path, { token: u.token, body });
      expect(res.status, res.text).toBe(200);
      expect(res.headers.get('etag')).toBe(tags[path.includes('projects') ? 0 : 1]);
    }
    await app.trpc(u.token).projects.update.mutate({ id: project.id, project: { name: 'Same' } });
    await app.trpc(u.token).tasks.update.mutate({ id: task.id, task: { label: 'same' } });
    expect(await eventsAfter(u, before)).toEqual([]);
    await ok('PATCH', `/api/tasks/${task.id}`, u.token, { task: { label: 'changed' } });
    await ok('PATCH', `/api/projects/${project.id}`, u.token, { project: { name: 'same' } });
    expect(summary(await eventsAfter(u, before))).toEqual([['task.updated', 'task', task.id], ['project.updated', 'project', project.id]]);
    // An abandoned task is in no project's list: it leaving its project changes the task alone.
    await ok('PUT', `/api/tasks/${task.id}/state`, u.token, { task: { state: 'abandoned' } });
    const left = await newestId(u);
    await ok('PATCH', `/api/tasks/${task.id}`, u.token, { task: { project_id: null } });
    expect(summary(await eventsAfter(u, left))).toEqual([['task.updated', 'task', task.id]]);
  });

  it('a reorder gives an event per moved task, and its project\'s only when the task passed another of that project', async () => {
    const u = await app.register();
    const p = (await ok('POST', '/api/users/me/projects', u.token, { project: { name: 'Kept' } })).data;
    const q = (await ok('POST', '/api/users/me/projects', u.token, { project: { name: 'Other' } })).data;
    const [a, b] = [(await ok('POST', '/api/users/me/tasks', u.token, { task: { label: 'a', project_id: p.id } })).data,
      (await ok('POST', '/api/users/me/tasks', u.token, { task: { label: 'b', project_id: p.id } })).data];
    const alone = (await ok('POST', '/api/users/me/tasks', u.token, { task: { label: 'alone' } })).data;
    const c = (await ok('POST', '/api/users/me/tasks', u.token, { task: { label: 'c', project_id: q.id } })).data;
    // alone passes a and b: their project's task list keeps its order, and its document.
    let before = await newestId(u);
    const tag = (await app.request('GET', `/api/projects/${p.id}`, { token: u.token })).headers.get('etag')!;
    await ok('PUT', `/api/tasks/${alone.id}/order`, u.token, { task: { order: 1 } });
    expect(summary(await eventsAfter(u, before))).toEqual([['task.updated', 'task', alone.id], ['task.updated', 'task', a.id], ['task.updated', 'task', b.id]]);
    expect((await app.request('GET', `/api/projects/${p.id}`, { token: u.token, headers: { 'If-None-Match': tag } })).status).toBe(304);
    // b passes a: p's task list is b, a now (after b, where the first of its moved tasks stands); c moves alone in q.
    before = await newestId(u);
    await ok('PUT', `/api/tasks/${b.id}/order`, u.token, { task: { order: 2 } });
    expect(summary(await eventsAfter(u, before))).toEqual([['task.updated', 'task', b.id], ['project.updated', 'project', p.id], ['task.updated', 'task', a.id]]);
    expect((await ok('GET', `/api/projects/${p.id}`, u.token)).data.relationships.tasks.data.map((t: { id: number }) => t.id)).toEqual([b.id, a.id]);
    before = await newestId(u);
    await ok('PUT', `/api/tasks/${c.id}/order`, u.token, { task: { order: 1 } });
    expect(summary(await eventsAfter(u, before))).toEqual([['task.updated', 'task', c.id], ['task.updated', 'task', alone.id], ['task.updated', 'task', b.id], ['task.updated', 'task', a.id]]);
    // Orders now c, alone, b, a. An abandoned task is in no list: a (abandoned) passing b, or b passing a, changes no document.
    await ok('PUT', `/api/tasks/${a.id}/state`, u.token, { task: { state: 'abandoned' } });
    const listed = (await app.request('GET', `/api/projects/${p.id}`, { token: u.token })).headers.get('etag')!;
    // The moved tasks by their new orders: a to 3 (a, b), a back to 4 (b, a), b to 4 (a, b).
    for (const [moved, order, events] of [[a, 3, [a, b]], [a, 4, [b, a]], [b, 4, [a, b]]] as const) {
      before = await newestId(u);
      await ok('PUT', `/api/tasks/${moved.id}/order`, u.token, { task: { order } });
      expect(summary(await eventsAfter(u, before)), `${moved.attributes.label} to ${order}`).toEqual(events.map((t) => ['task.updated', 'task', t.id]));
      expect((await app.request('GET', `/api/projects/${p.id}`, { token: u.token, headers: { 'If-None-Match': listed } })).status).toBe(304);
    }
  });

  it('notifies with the events when they fit in the payload, else with their numbers only', async () => {
    const u = await app.register();
    const { payloads, end } = await notificationsOf(u);
    try {
      const project = (await ok('POST', '/api/users/me/projects', u.token, { project: { name: 'Many' } })).data;
      for (let i = 0; i < 40; i++) await ok('POST', '/api/users/me/tasks', u.token, { task: { label: `task ${i}`, project_id: project.id } });
      const before = await newestId(u);
      // One event (one statement), then 41 (a transaction: the project and its 40 tasks), over 7,000 bytes.
      const task = (await ok('POST', '/api/users/me/tasks', u.token, { task: { label: 'alone' } })).data;
      await ok('PUT', `/api/projects/${project.id}/state`, u.token, { project: { state: 'started', due_at: DUE } });
      const events = await eventsAfter(u, before);
      expect(events).toHaveLength(42);
      await eventually(() => payloads.length >= 43, { message: 'the notifications' });
      const [small, big] = payloads.slice(-2).map((payload) => parseNotification(payload));
      expect(small).toEqual({ userId: u.id, first: BigInt(events[0].id), last: BigInt(events[0].id), events: [events[0]] });
      expect(events[0].data.id).toBe(task.id);
      expect(big).toEqual({ userId: u.id, first: BigInt(events[1].id), last: BigInt(events[41].id), events: undefined });
      // A transaction's write whose events fit carries them too: the project's finish (one event).
      await ok('PUT', `/api/projects/${project.id}/state`, u.token, { project: { state: 'finished' } });
      await eventually(() => payloads.length >= 44, { message: 'the finish notification' });
      const finished = await eventsAfter(u, events[41].id);
      expect(parseNotification(payloads.at(-1))).toEqual({ userId: u.id, first: BigInt(finished[0].id), last: BigInt(finished[0].id), events: finished });
      // A batch whose project.updated events are folded into one (API-CONTRACT.md §15): the
      // payload numbers and carries the events the log keeps, no more.
      const other = (await ok('POST', '/api/users/me/projects', u.token, { project: { name: 'Few' } })).data;
      await ok('POST', '/api/batch', u.token, {
        operations: [1, 2, 3].map((i) => ({ op: 'tasks.create', input: { task: { label: `batched ${i}`, project_id: other.id } } })),
      });
      await eventually(() => payloads.length >= 46, { message: 'the batch notification' });
      const batched = await eventsAfter(u, (await eventsAfter(u, finished[0].id))[0].id);
      expect(batched.map((e) => e.type)).toEqual(['task.created', 'task.created', 'task.created', 'project.updated']);
      expect(parseNotification(payloads.at(-1))).toEqual({ userId: u.id, first: BigInt(batched[0].id), last: BigInt(batched[3].id), events: batched });
    } finally {
      await end();
    }
  });

  it('notifies a write whose one document is longer than the payload with its numbers only, and logs it whole', async () => {
    const u = await app.register();
    const project = (await ok('POST', '/api/users/me/projects', u.token, { project: { name: 'Long' } })).data;
    for (let batch = 0; batch < 3; batch++) {
      const operations = Array.from({ length: 100 }, (_, i) => ({ op: 'tasks.create', input: { task: { label: `t${batch}.${i}`, project_id: project.id } } }));
      await ok('POST', '/api/batch', u.token, { operations });
    }
    const { payloads, end } = await notificationsOf(u);
    try {
      const before = await newestId(u);
      // Its project.updated lists 301 tasks: over 7,000 bytes alone.
      await ok('POST', '/api/users/me/tasks', u.token, { task: { label: 'one more', project_id: project.id } });
      const events = await eventsAfter(u, before);
      expect(events.map((e) => e.type)).toEqual(['task.created', 'project.updated']);
      expect(events[1].data.relationships.tasks.data).toHaveLength(301);
      expect(JSON.stringify(events[1]).length).toBeGreaterThan(7_000);
      await eventually(() => payloads.length >= 1, { message: 'the notification' });
      expect(parseNotification(payloads[0])).toEqual({ userId: u.id, first: BigInt(events[0].id), last: BigInt(events[1].id), events: undefined });
    } finally {
      await end();
    }
  });

  it('never shows another user\'s changes', async () => {
    const a = await app.register();
    const b = await app.register();
    const startB = await newestId(b);
    await ok('POST', '/api/users/me/projects', a.token, { project: { name: 'Mine' } });
    await ok('POST', '/api/users/me/tasks', a.token, { task: { label: 'mine' } });
    expect(await eventsAfter(b, startB)).toEqual([]);
    expect(await newestId(b)).toBe(startB);
  });
});

describe('delta sync', () => {
  it('pages 100 events at a time, oldest first, with links.next while more remain', async () => {
    const u = await app.register();
    for (let i = 0; i < 230; i++) await ok('POST', '/api/users/me/tasks', u.token, { task: { label: `t${i}` } });
    const first = await app.request('GET', `${EVENTS}?after=0`, { token: u.token });
    expect(first.body.data).toHaveLength(100);
    expect(first.body.meta.last_event_id).toBe(first.body.data[99].id);
    expect(first.body.links.next).toBe(`${app.baseUrl}${EVENTS}?after=${first.body.data[99].id}`);
    const all = await eventsAfter(u, '0');
    expect(all).toHaveLength(230);
    expect(all.map((e) => e.data.attributes.label)).toEqual(Array.from({ length: 230 }, (_, i) => `t${i}`));
    const last = await app.request('GET', `${EVENTS}?after=${all.at(-1).id}`, { token: u.token });
    expect(last.body).toEqual({ data: [], links: {}, meta: { last_event_id: all.at(-1).id } });
  });

  it.each(['', 'abc', '-1', '01', '1e3', '0x10', ' 1', '1.5', '99999999999999999999'])('refuses after=%j with 400 invalid on the parameter', async (after) => {
    const u = await app.register();
    const res = await app.request('GET', `${EVENTS}?after=${encodeURIComponent(after)}`, { token: u.token });
    expect(res.status).toBe(400);
    expect(res.body.errors).toEqual([expect.objectContaining({ status: '400', code: 'invalid', source: { parameter: 'after' } })]);
  });

  it('a cursor beyond the log or older than what is kept is 410 cursor_expired with the newest id', async () => {
    const u = await app.register();
    for (let i = 0; i < 3; i++) await ok('POST', '/api/users/me/tasks', u.token, { task: { label: `t${i}` } });
    const ahead = await app.request('GET', `${EVENTS}?after=99`, { token: u.token });
    expect(ahead.status).toBe(410);
    expect(ahead.body.errors[0]).toMatchObject({ status: '410', code: 'cursor_expired' });
    expect(ahead.body.meta).toEqual({ last_event_id: '3' });

    // Retention removed the first two events: a cursor before them has missed some.
    await app.orm.em.fork().execute('update events set at = at - interval \'40 days\' where user_id = ? and seq <= 2', [u.id]);
    const { pruneEvents } = await import('../../src/changes/event.store.js');
    expect(await pruneEvents(app.orm.em.fork(), new Date(T0 - 30 * DAY * 1000))).toBeGreaterThanOrEqual(2);
    const old = await app.request('GET', `${EVENTS}?after=1`, { token: u.token });
    expect(old.status).toBe(410);
    expect(old.body.meta).toEqual({ last_event_id: '3' });
    const kept = await app.request('GET', `${EVENTS}?after=2`, { token: u.token });
    expect(kept.status).toBe(200);
    expect(kept.body.data.map((e: any) => e.id)).toEqual(['3']);

    const trpc = await app.trpc(u.token).events.list.query({ after: '1' }).catch((e: any) => e);
    expect(trpc.data.code).toBe('cursor_expired');
    expect(trpc.data.httpStatus).toBe(410);
    expect(trpc.data.meta).toEqual({ last_event_id: '3' });
  });

  it('events.list called with no input is the list without after, as GET without a query (§8)', async () => {
    const u = await app.register();
    await app.request('POST', '/api/users/me/tasks', { token: u.token, body: { task: { label: 'one' } } });
    const rest = await app.request('GET', EVENTS, { token: u.token });
    expect(await app.trpc(u.token).events.list.query()).toEqual(rest.body);
    const raw = await fetch(`${app.baseUrl}/trpc/events.list`, { headers: { Authorization: u.token } });
    expect(raw.status).toBe(200);
    expect(((await raw.json()) as any).result.data.json).toEqual(rest.body);
  });

  it('answers 401 without a valid token', async () => {
    const res = await app.request('GET', `${EVENTS}?after=0`);
    expect(res.status).toBe(401);
  });
});

describe('the REST event stream', () => {
  const streams: SseStream[] = [];
  const open = async (token: string | undefined, query = '', headers: Record<string, string> = {}) => {
    const s = await openStream(`${app.baseUrl}${EVENTS}${query}`, token ? { Authorization: token, ...headers } : headers);
    streams.push(s);
    return s;
  };
  afterAll(() => streams.forEach((s) => s.close()));

  it('delivers live events with id and event lines, and heartbeats while idle', async () => {
    const u = await app.register();
    const s = await open(u.token);
    expect(s.status).toBe(200);
    expect(s.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(s.headers.get('cache-control')).toBe('no-store');
    const task = (await ok('POST', '/api/users/me/tasks', u.token, { task: { label: 'live' } })).data;
    const message = await s.nextEvent();
    expect(message.event).toBe('task.created');
    const event = JSON.parse(message.data);
    expect(event).toMatchObject({ id: message.id, type: 'task.created', data: task });
    const heartbeat = await s.next(2_000);
    expect(heartbeat.comments).toContain('heartbeat');
  });

  it('resumes after Last-Event-ID (which wins over ?after=) and after ?after=', async () => {
    const u = await app.register();
    for (let i = 0; i < 5; i++) await ok('POST', '/api/users/me/tasks', u.token, { task: { label: `t${i}` } });
    const byHeader = await open(u.token, '?after=1', { 'Last-Event-ID': '3' });
    expect((await byHeader.nextEvent()).id).toBe('4');
    expect((await byHeader.nextEvent()).id).toBe('5');
    const byQuery = await open(u.token, '?after=2');
    expect([(await byQuery.nextEvent()).id, (await byQuery.nextEvent()).id, (await byQuery.nextEvent()).id]).toEqual(['3', '4', '5']);
    const expired = await open(u.token, '?after=77');
    expect(expired.status).toBe(410);
    expect(JSON.parse(expired.text!).meta).toEqual({ last_event_id: '5' });
  });

  it('opens with a single-use ticket instead of a header, and refuses without either', async () => {
    const u = await app.register();
    const ticket = await app.request('POST', `${EVENTS}/tickets`, { token: u.token });
    expect(ticket.status).toBe(201);
    const value = ticket.body.data.attributes.ticket;
    expect(ticket.body.data.attributes.expiresAt).toBe(seconds(T0) + 60);
    const s = await open(undefined, `?ticket=${value}`);
    expect(s.status).toBe(200);
    await ok('POST', '/api/users/me/tasks', u.token, { task: { label: 'seen' } });
    expect(JSON.parse((await s.nextEvent()).data).data.attributes.label).toBe('seen');
    const reused = await open(undefined, `?ticket=${value}`);
    expect(reused.status).toBe(401);
    const none = await open(undefined);
    expect(none.status).toBe(401);
    expect(JSON.parse(none.text!).errors[0].code).toBe('unauthorized');
  });

  it(`allows ${MAX_STREAMS_PER_TOKEN} open streams per token; one more is 429 rate_limited`, async () => {
    const u = await app.register();
    const mine = await Promise.all(Array.from({ length: MAX_STREAMS_PER_TOKEN }, () => open(u.token)));
    expect(mine.map((s) => s.status)).toEqual(mine.map(() => 200));
    const extra = await open(u.token);
    expect(extra.status).toBe(429);
    expect(JSON.parse(extra.text!).errors[0].code).toBe('rate_limited');
    expect(app.events.streamsOf(u.token)).toBe(MAX_STREAMS_PER_TOKEN);
    mine[0]!.close();
    // The closed one is released once the server sees the socket go: its slot is back when
    // the hub counts one stream fewer for the token, and not before.
    await eventually(() => app.events.streamsOf(u.token) < MAX_STREAMS_PER_TOKEN, {
      message: 'the hub released the closed stream',
      timeout: 10_000,
    });
    const again = await open(u.token);
    expect(again.status, 'a closed stream was never released').toBe(200);
  });

  it('counts the slot of a stream closed a moment ago free once its lease is deleted, not 429 while the deletion runs', async () => {
    const u = await app.register();
    const mine = await Promise.all(Array.from({ length: MAX_STREAMS_PER_TOKEN }, () => open(u.token)));
    expect(mine.map((s) => s.status)).toEqual(mine.map(() => 200));
    // Another session holds the token's leases: the deletion of a closed one waits for it.
    const holder = new pg.Client({ connectionString: directUrlOf(app.databaseUrl) });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query('select id from event_stream_leases where user_id = $1 for update', [u.id]);
      mine[0]!.close();
      await eventually(() => app.events.streamsOf(u.token) < MAX_STREAMS_PER_TOKEN, { message: 'the hub released the closed stream', timeout: 10_000 });
      const again = open(u.token);
      // While the closed stream's lease is being deleted, the new stream waits for that, not refused.
      expect(await Promise.race([again.then((s) => s.status), new Promise((resolve) => setTimeout(resolve, 500, 'waiting'))])).toBe('waiting');
      await holder.query('commit');
      expect((await again).status).toBe(200);
    } finally {
      await holder.end();
    }
  });

  it('ends the stream of a revoked token within one idle tick, with an error event', async () => {
    const u = await app.register();
    const s = await open(u.token);
    expect((await app.request('DELETE', '/api/users/me/authorizations/current', { token: u.token })).status).toBe(204);
    const last = await s.nextEvent(3_000);
    expect(last.event).toBe('error');
    expect(JSON.parse(last.data).errors[0].code).toBe('unauthorized');
    await s.ended;
    expect((await open(u.token)).status).toBe(401);
  });
});

describe('revocation and tickets', () => {
  it('ends a busy stream of a revoked token too, not only an idle one', async () => {
    const u = await app.register();
    const second = await app.request('POST', '/api/users/authorizations', { body: { username: u.username, password: 'correct horse' } });
    const other = second.body.meta.token as string;
    const s = await openStream(`${app.baseUrl}${EVENTS}`, { Authorization: u.token });
    expect(s.status).toBe(200);
    let writing = true;
    // The user keeps writing from another device, more often than the idle tick. (The pause
    // paces the writer, as a person typing would; nothing waits on it.)
    const writer = (async () => {
      while (writing) {
        await app.request('POST', '/api/users/me/tasks', { token: other, body: { task: { label: 'busy' } } });
        await new Promise((r) => setTimeout(r, 30));
      }
    })();
    try {
      await s.nextEvent();
      expect((await app.request('DELETE', '/api/users/me/authorizations/current', { token: u.token })).status).toBe(204);
      // Events of the writes may still come first; the stream must end with the error.
      const last = await eventually(
        async () => {
          const message = await s.nextEvent();
          return message.event === 'error' && message;
        },
        { message: 'the stream of a revoked token ended with an error event', timeout: 5_000, interval: 0 },
      );
      expect(last.event, 'the stream of a revoked token kept going').toBe('error');
      await s.ended;
    } finally {
      writing = false;
      await writer;
    }
  });

  it('refuses a ticket whose token was revoked before it was used', async () => {
    const u = await app.register();
    const ticket = (await app.request('POST', `${EVENTS}/tickets`, { token: u.token })).body.data.attributes.ticket;
    expect((await app.request('DELETE', '/api/users/me/authorizations/current', { token: u.token })).status).toBe(204);
    const s = await openStream(`${app.baseUrl}${EVENTS}?ticket=${ticket}&after=0`);
    expect(s.status).toBe(401);
  });

  it('answers a ticket retried with its Idempotency-Key with the same ticket, which opens one stream', async () => {
    const u = await app.register();
    const key = { 'Idempotency-Key': `ticket-${u.id}` };
    const first = await app.request('POST', `${EVENTS}/tickets`, { token: u.token, headers: key });
    const again = await app.request('POST', `${EVENTS}/tickets`, { token: u.token, headers: key });
    expect([first.status, again.status, again.text, again.headers.get('idempotent-replayed')]).toEqual([201, 201, first.text, 'true']);
    const s = await openStream(`${app.baseUrl}${EVENTS}?ticket=${first.body.data.attributes.ticket}&after=0`);
    expect(s.status).toBe(200);
    s.close();
    const bad = await app.request('POST', `${EVENTS}/tickets`, { token: u.token, headers: { 'Idempotency-Key': 'a b' } });
    expect([bad.status, bad.body.errors[0].code, bad.body.errors[0].source]).toEqual([422, 'invalid', { parameter: 'Idempotency-Key' }]);
  });

  it('refuses an expired ticket', async () => {
    const u = await app.register();
    const ticket = (await app.request('POST', `${EVENTS}/tickets`, { token: u.token })).body.data.attributes.ticket;
    app.clock.advance(61);
    const s = await openStream(`${app.baseUrl}${EVENTS}?ticket=${ticket}`);
    expect(s.status).toBe(401);
  });

  it('reads Accept\'s quality values: a stream only where it is preferred to JSON', async () => {
    const u = await app.register();
    for (const accept of ['text/event-stream;q=0', 'text/event-stream;q=0, application/json', 'application/json;q=1, text/event-stream;q=0.1', '*/*']) {
      const res = await fetch(`${app.baseUrl}${EVENTS}`, { headers: { Authorization: u.token, Accept: accept } });
      expect([accept, res.headers.get('content-type')]).toEqual([accept, 'application/json; charset=utf-8']);
      expect(((await res.json()) as { data: unknown[] }).data).toEqual([]);
    }
    for (const accept of ['text/event-stream', 'text/event-stream, */*;q=0.5', 'application/json;q=0.5, text/event-stream']) {
      const s = await openStream(`${app.baseUrl}${EVENTS}`, { Authorization: u.token, Accept: accept });
      expect([accept, s.status, s.headers.get('content-type')]).toEqual([accept, 200, 'text/event-stream; charset=utf-8']);
      s.close();
    }
  });

  it('holds after= to its rule also beside a valid Last-Event-ID, which wins over it', async () => {
    const u = await app.register();
    const s = await openStream(`${app.baseUrl}${EVENTS}?after=zz`, { Authorization: u.token, 'Last-Event-ID': '0' });
    expect(s.status).toBe(400);
    expect(JSON.parse(s.text!).errors[0]).toMatchObject({ code: 'invalid', source: { parameter: 'after' } });
  });

  it('a HEAD request opens no stream', async () => {
    const u = await app.register();
    const before = app.events.size;
    const res = await fetch(`${app.baseUrl}${EVENTS}`, { method: 'HEAD', headers: { Authorization: u.token, Accept: 'text/event-stream' } });
    expect(res.headers.get('content-type')).not.toMatch(/event-stream/);
    expect(app.events.size).toBe(before);
  });

  it('an invalid Last-Event-ID is 400 invalid on that header', async () => {
    const u = await app.register();
    const s = await openStream(`${app.baseUrl}${EVENTS}`, { Authorization: u.token, 'Last-Event-ID': 'abc' });
    expect(s.status).toBe(400);
    // The detail names the header, not the query parameter `after` it stands in for.
    expect(JSON.parse(s.text!).errors[0]).toMatchObject({ code: 'invalid', source: { parameter: 'Last-Event-ID' }, detail: 'Last-Event-ID must be an event id: digits, no leading zero.' });
  });
});

describe('the tRPC subscription events.onChange', () => {
  it('delivers the events after lastEventId, then live ones, as tracked events', async () => {
    const u = await app.register();
    const api = createClient({ url: app.baseUrl, token: u.token });
    await ok('POST', '/api/users/me/tasks', u.token, { task: { label: 'before' } });
    const received: any[] = [];
    let failure: unknown;
    const subscription = api.events.onChange.subscribe(
      { lastEventId: '0' },
      { onData: (event) => received.push(event), onError: (error) => (failure = error) },
    );
    try {
      const waitFor = (n: number) =>
        eventually(
          () => {
            if (failure) throw failure;
            return received.length >= n;
          },
          { message: `${n} events received`, timeout: 5_000 },
        );
      await waitFor(1);
      await api.tasks.create.mutate({ task: { label: 'after' } });
      await waitFor(2);
      expect(received.map((e) => [e.id, e.data.type, e.data.data.attributes.label])).toEqual([
        ['1', 'task.created', 'before'],
        ['2', 'task.created', 'after'],
      ]);
    } finally {
      subscription.unsubscribe();
    }
  });

  it('refuses a malformed lastEventId as invalid', async () => {
    const u = await app.register();
    const api = createClient({ url: app.baseUrl, token: u.token });
    const error = await new Promise<any>((resolve) => {
      const sub = api.events.onChange.subscribe({ lastEventId: 'x1' }, {
        onData: () => undefined,
        onError: (e) => {
          sub.unsubscribe();
          resolve(e);
        },
      });
    });
    expect(error.data.code).toBe('invalid');
  });
});

describe('a client that does not read', () => {
  it('is told why and disconnected, and the server lets go of its stream', async () => {
    const slow = await startTestApp({ eventsIdleMs: 150, eventsSlowClientMs: 300 });
    try {
      const u = await slow.register();
      // 20,000 events of 2 KB each: far more than the socket buffers on both sides hold.
      await slow.orm.em.fork().execute(
        `insert into events (user_id, seq, type, data, at)
         select ?, g, 'task.updated', json_build_object('type', 'task', 'id', g, 'pad', repeat('x', 2000)), now()
           from generate_series(1, 20000) g`,
        [u.id],
      );
      await slow.orm.em.fork().execute('update users set last_event_seq = 20000 where id = ?', [u.id]);
      const { port } = new URL(slow.baseUrl);
      const socket = net.connect(Number(port), '127.0.0.1');
      await new Promise<void>((resolve) => socket.once('connect', resolve));
      // Connection: close, so that the socket closes once the answer is read, not after the
      // server's keep-alive timeout (5 s of waiting on nothing).
      socket.write(`GET ${EVENTS}?after=0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAccept: text/event-stream\r\nAuthorization: ${u.token}\r\n\r\n`);
      socket.pause(); // and never read
      const hub = slow.events;
      await eventually(() => hub.size > 0, { message: 'the stream opened', timeout: 20_000 }).catch(() => undefined);
      expect(hub.size, 'the stream never opened').toBe(1);
      await eventually(() => hub.size === 0, { message: 'the stream was let go', timeout: 20_000 }).catch(() => undefined);
      expect(hub.size, 'the stream of a client that does not read was never let go').toBe(0);
      // What the client finally reads ends with the reason.
      socket.resume();
      let text = '';
      socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
      await new Promise<void>((resolve) => socket.once('close', () => resolve()));
      expect(text).toContain('event: error');
      expect(text).toContain('did not read the stream fast enough');
    } finally {
      await slow.close();
    }
  });
});
