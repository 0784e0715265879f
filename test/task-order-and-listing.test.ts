/** Task orders (API-CONTRACT.md §5) and the rules of the task list (SPEC.md 4.6). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DAY, T0, onlyError, seconds, startTestApp, type TestApp } from './helpers/test-app.js';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

async function createTasks(token: string, n: number): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 1; i <= n; i++) {
    const res = await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: `t${i}` } } });
    expect(res.status).toBe(201);
    ids.push(res.body.data.id);
  }
  return ids;
}

async function orderOf(token: string): Promise<number[]> {
  const res = await app.request('GET', '/api/users/me/tasks', { token });
  return res.body.data.map((t: any) => t.id);
}

const reorder = (token: string, id: number, order: unknown) =>
  app.request('PUT', `/api/tasks/${id}/order`, { token, body: { task: { order } } });

describe('task order', () => {
  it('appends new tasks after the highest order of the user, per user', async () => {
    const a = await app.register();
    const b = await app.register();
    await createTasks(a.token, 3);
    const [first] = await createTasks(b.token, 1);
    expect((await app.request('GET', `/api/tasks/${first}`, { token: b.token })).body.data.attributes.order).toBe(1);
    const res = await app.request('POST', '/api/users/me/tasks', { token: a.token, body: { task: { label: 'fourth' } } });
    expect(res.body.data.attributes.order).toBe(4);
  });

  it('moves a task up, shifting the ones in between down, and answers with every changed task', async () => {
    const { token } = await app.register();
    const [t1, t2, t3, t4, t5] = await createTasks(token, 5);
    const res = await reorder(token, t4!, 2);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: [
        { type: 'task', id: t4, attributes: { order: 2 } },
        { type: 'task', id: t2, attributes: { order: 3 } },
        { type: 'task', id: t3, attributes: { order: 4 } },
      ],
      meta: { stability: 'unstable', notice: 'This output may change soon.' },
    });
    expect(await orderOf(token)).toEqual([t1, t4, t2, t3, t5]);
  });

  it('moves a task down, shifting the ones in between up', async () => {
    const { token } = await app.register();
    const [t1, t2, t3, t4, t5] = await createTasks(token, 5);
    const res = await reorder(token, t2!, 4);
    expect(res.body.data).toEqual([
      { type: 'task', id: t3, attributes: { order: 2 } },
      { type: 'task', id: t4, attributes: { order: 3 } },
      { type: 'task', id: t2, attributes: { order: 4 } },
    ]);
    expect(await orderOf(token)).toEqual([t1, t3, t4, t2, t5]);
  });

  it('clamps an order above the highest to the highest, and a no-op returns just the task', async () => {
    const { token } = await app.register();
    const [t1, t2, t3] = await createTasks(token, 3);
    const clamped = await reorder(token, t1!, 999);
    expect(clamped.body.data.map((t: any) => [t.id, t.attributes.order])).toEqual([
      [t2, 1],
      [t3, 2],
      [t1, 3],
    ]);
    const same = await reorder(token, t1!, 3);
    expect(same.body.data).toEqual([{ type: 'task', id: t1, attributes: { order: 3 } }]);
  });

  it.each([0, -1, 1.5, '2', null, true])('refuses the order %j as invalid', async (order) => {
    const { token } = await app.register();
    const [t1] = await createTasks(token, 2);
    const res = await reorder(token, t1!, order);
    expect(res.status).toBe(422);
    expect(onlyError(res.body)).toMatchObject({ code: 'invalid', source: { pointer: '/task/order' } });
  });

  it('requires the order', async () => {
    const { token } = await app.register();
    const [t1] = await createTasks(token, 1);
    const res = await app.request('PUT', `/api/tasks/${t1}/order`, { token, body: { task: {} } });
    expect(onlyError(res.body)).toMatchObject({ code: 'parameter_missing', source: { pointer: '/task/order' } });
  });

  it('keeps orders exactly 1..30 under parallel creation and a permutation under parallel reorders', async () => {
    const { token } = await app.register();
    const created = await Promise.all(
      Array.from({ length: 30 }, (_, i) => app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: `p${i}` } } })),
    );
    const orders = created.map((r) => r.body.data.attributes.order).sort((a: number, b: number) => a - b);
    expect(orders).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    const ids = created.map((r) => r.body.data.id as number);
    const results = await Promise.all(ids.slice(0, 20).map((id, i) => reorder(token, id, ((i * 7) % 30) + 1)));
    expect(results.every((r) => r.status === 200)).toBe(true);
    const page = await app.request('GET', '/api/users/me/tasks', { token });
    expect(page.body.data.map((t: any) => t.attributes.order)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
  });
});

describe('task list', () => {
  it('pages 50 tasks at a time with absolute links, and answers an empty page beyond the last', async () => {
    const { token } = await app.register();
    await createTasks(token, 51);
    const base = `${app.baseUrl}/api/users/me/tasks?page=`;
    const first = await app.request('GET', '/api/users/me/tasks', { token });
    expect(first.body.data).toHaveLength(50);
    expect(first.body.links).toEqual({ first: `${base}1`, last: `${base}2`, next: `${base}2` });
    const second = await app.request('GET', '/api/users/me/tasks?page=2', { token });
    expect(second.body.data.map((t: any) => t.attributes.order)).toEqual([51]);
    expect(second.body.links).toEqual({ first: `${base}1`, last: `${base}2`, prev: `${base}1` });
    const beyond = await app.request('GET', '/api/users/me/tasks?page=5', { token });
    expect(beyond.status).toBe(200);
    expect(beyond.body.data).toEqual([]);
    expect(beyond.body.links).toEqual({ first: `${base}1`, last: `${base}2`, prev: `${base}4` });
  });

  it('has one empty page for a user with no tasks', async () => {
    const { token } = await app.register();
    const res = await app.request('GET', '/api/users/me/tasks', { token });
    const base = `${app.baseUrl}/api/users/me/tasks?page=`;
    expect(res.body).toEqual({ data: [], links: { first: `${base}1`, last: `${base}1` }, meta: { stability: 'unstable', notice: 'This output may change soon.' } });
  });

  it('leaves out abandoned tasks, and finished ones from before the UTC day 14 days ago', async () => {
    const { token } = await app.register();
    app.clock.set(T0);
    const [kept, abandoned, finished] = await createTasks(token, 3);
    await app.request('PUT', `/api/tasks/${abandoned}/state`, { token, body: { task: { state: 'abandoned' } } });
    await app.request('PUT', `/api/tasks/${finished}/state`, { token, body: { task: { state: 'planned' } } });
    const done = await app.request('PUT', `/api/tasks/${finished}/state`, { token, body: { task: { state: 'finished' } } });
    expect(done.body.data.attributes.finishedAt).toBe(seconds(T0));

    // T0 is 12:00 UTC; the task stays listed through the whole UTC day 14 days later.
    app.clock.set(T0 + 14 * DAY * 1000 + 11 * 3600 * 1000 + 59 * 60 * 1000);
    expect(await orderOf(token)).toEqual([kept, finished]);
    app.clock.set(T0 + 15 * DAY * 1000 - 12 * 3600 * 1000);
    expect(await orderOf(token)).toEqual([kept]);
    // Still there, and listed again once replanned.
    expect((await app.request('GET', `/api/tasks/${finished}`, { token })).status).toBe(200);
    await app.request('PUT', `/api/tasks/${finished}/state`, { token, body: { task: { state: 'planned' } } });
    expect(await orderOf(token)).toEqual([kept, finished]);
    app.clock.set(T0);
  });
});
