/**
 * Task order and the task list (SPEC.md 4.6, 4.9; API-CONTRACT.md §5, §7): moves up, down, to
 * either end and clamped, the answer listing every moved task, invalid orders; pages of 50 by
 * order with absolute links, abandoned tasks left out, finished ones until the end of the UTC
 * day 14 days after they finished.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { apiSteps, range, type TestUser, TASKS } from '../helpers/api-steps.js';
import { expectError, JSON_CT, META, orderDoc, taskJson } from '../helpers/envelope.js';
import { useTestApp } from '../helpers/test-app.js';
import { DAY, DUE, HOUR, seconds, T0, T0S } from '../helpers/times.js';

const app = useTestApp({ resetClock: true });
const { createTask, createTasks, getTask, putTaskOrder: putOrder, changeTaskState: changeState, listTasks: list, listedTaskIds: listedIds, listedTaskOrders: listedOrders, projectIn } = apiSteps(app);

describe('PUT /api/tasks/:id/order', () => {
  let user: TestUser;
  let ids: number[];
  const t = (n: number) => ids[n - 1]!;
  beforeEach(async () => {
    user = await app.register();
    ids = await createTasks(user.token, 5);
  });

  it('moves a task up (4 -> 2): answers the moved and shifted tasks, by order', async () => {
    const res = await putOrder(user.token, t(4), 2);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    expect(res.body).toEqual(orderDoc([[t(4), 2], [t(2), 3], [t(3), 4]]));
    expect(await listedOrders(user.token)).toEqual([[t(1), 1], [t(4), 2], [t(2), 3], [t(3), 4], [t(5), 5]]);
  });

  it('moves a task down (2 -> 4)', async () => {
    const res = await putOrder(user.token, t(2), 4);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(orderDoc([[t(3), 2], [t(4), 3], [t(2), 4]]));
    expect(await listedOrders(user.token)).toEqual([[t(1), 1], [t(3), 2], [t(4), 3], [t(2), 4], [t(5), 5]]);
  });

  it('moves to the very top and to the very bottom', async () => {
    const up = await putOrder(user.token, t(5), 1);
    expect(up.body).toEqual(orderDoc([[t(5), 1], [t(1), 2], [t(2), 3], [t(3), 4], [t(4), 5]]));
    const down = await putOrder(user.token, t(5), 5);
    expect(down.body).toEqual(orderDoc([[t(1), 1], [t(2), 2], [t(3), 3], [t(4), 4], [t(5), 5]]));
  });

  it('clamps an order above the highest to the highest', async () => {
    const res = await putOrder(user.token, t(2), 999);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(orderDoc([[t(3), 2], [t(4), 3], [t(5), 4], [t(2), 5]]));
    const big = await putOrder(user.token, t(1), Number.MAX_SAFE_INTEGER);
    expect(big.body).toEqual(orderDoc([[t(3), 1], [t(4), 2], [t(5), 3], [t(2), 4], [t(1), 5]]));
    expect(await listedOrders(user.token)).toEqual([[t(3), 1], [t(4), 2], [t(5), 3], [t(2), 4], [t(1), 5]]);
  });

  it.each([[2 ** 53], [1e20], [1e300]])('clamps %j, an integer beyond 2^53 (and beyond 64 bits), to the highest on both doors', async (order) => {
    const rest = await putOrder(user.token, t(1), order);
    expect(rest.status, rest.text).toBe(200);
    expect(rest.body).toEqual(orderDoc([[t(2), 1], [t(3), 2], [t(4), 3], [t(5), 4], [t(1), 5]]));
    const moved = await app.trpc(user.token).tasks.reorder.mutate({ id: t(2), task: { order } });
    expect(moved).toEqual(orderDoc([[t(3), 1], [t(4), 2], [t(5), 3], [t(1), 4], [t(2), 5]]));
  });

  it('returns just the task when it does not move (same order, or clamped to its own)', async () => {
    const same = await putOrder(user.token, t(3), 3);
    expect(same.status, same.text).toBe(200);
    expect(same.body).toEqual(orderDoc([[t(3), 3]]));
    const clamped = await putOrder(user.token, t(5), 6);
    expect(clamped.body).toEqual(orderDoc([[t(5), 5]]));
    expect(await listedOrders(user.token)).toEqual(ids.map((id, i) => [id, i + 1]));
  });

  it.each([[0], [-1], ['2'], [1.5], [2.0000000000000004], [1000000000000000.5], [null], [true], [[2]]])('refuses the order %j as invalid and changes nothing', async (order) => {
    expectError(await putOrder(user.token, t(4), order), 422, 'invalid', { pointer: '/task/order' });
    expect(await listedOrders(user.token)).toEqual(ids.map((id, i) => [id, i + 1]));
  });

  it('requires the order and the wrapper', async () => {
    const missing = await app.request('PUT', `/api/tasks/${t(2)}/order`, { token: user.token, body: { task: {} } });
    expectError(missing, 422, 'parameter_missing', { pointer: '/task/order' });
    const wrapper = await app.request('PUT', `/api/tasks/${t(2)}/order`, { token: user.token, body: { order: 1 } });
    expectError(wrapper, 422, 'parameter_missing', { pointer: '/task' });
  });

  it('ignores unknown members', async () => {
    const res = await app.request('PUT', `/api/tasks/${t(3)}/order`, { token: user.token, body: { task: { order: 1, label: 'x' } } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(orderDoc([[t(3), 1], [t(1), 2], [t(2), 3]]));
    expect((await getTask(user.token, t(3))).data.attributes.label).toBe('t3');
  });

  it('keeps orders a permutation of 1..n through a sequence of moves', async () => {
    await putOrder(user.token, t(1), 5); // 2 3 4 5 1
    await putOrder(user.token, t(4), 1); // 4 2 3 5 1
    await putOrder(user.token, t(2), 4); // 4 3 5 2 1
    await putOrder(user.token, t(1), 2); // 4 1 3 5 2
    expect(await listedOrders(user.token)).toEqual([[t(4), 1], [t(1), 2], [t(3), 3], [t(5), 4], [t(2), 5]]);
    // A new task still goes to the end.
    const next = await createTask(user.token, { label: 'sixth' });
    expect(next.attributes.order).toBe(6);
    // The single-task view agrees with the list.
    expect((await getTask(user.token, t(5))).data.attributes.order).toBe(4);
  });
});

// =============================================================================================

describe('GET /api/users/me/tasks', () => {
  const base = () => `${app.baseUrl}${TASKS}?page=`;

  it('with no tasks: an empty page 1 with first and last', async () => {
    const user = await app.register();
    const res = await list(user.token);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    expect(res.body).toEqual({ data: [], links: { first: `${base()}1`, last: `${base()}1` }, meta: META });
  });

  it('with one task: the full task and one page', async () => {
    const user = await app.register();
    const project = await projectIn(user.token, 'newed');
    const t = await createTask(user.token, { label: 'only', project_id: project });
    const res = await list(user.token);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: [taskJson({ id: t.id, userId: user.id, label: 'only', order: 1, state: 'newed', projectId: project })],
      links: { first: `${base()}1`, last: `${base()}1` },
      meta: META,
    });
    expect(await list(user.token, 1).then((r) => r.body)).toEqual(res.body);
  });

  it('pages 50 at a time: 50, 51, a page beyond the last, and abandoned tasks not counted', async () => {
    const user = await app.register();
    const ids = await createTasks(user.token, 50);
    const fifty = await list(user.token);
    expect(fifty.body.data.map((t: any) => t.id)).toEqual(ids);
    expect(fifty.body.data.map((t: any) => t.attributes.order)).toEqual(range(50));
    expect(fifty.body.links).toEqual({ first: `${base()}1`, last: `${base()}1` });
    expect(fifty.body.meta).toEqual(META);

    ids.push((await createTask(user.token, { label: 't51' })).id);
    const first = await list(user.token, 1);
    expect(first.body.data).toHaveLength(50);
    expect(first.body.links).toEqual({ first: `${base()}1`, last: `${base()}2`, next: `${base()}2` });
    const second = await list(user.token, 2);
    expect(second.status).toBe(200);
    expect(second.body).toEqual({
      data: [taskJson({ id: ids[50]!, userId: user.id, label: 't51', order: 51, state: 'started', startedAt: T0S })],
      links: { first: `${base()}1`, last: `${base()}2`, prev: `${base()}1` },
      meta: META,
    });
    const beyond = await list(user.token, 3);
    expect(beyond.status).toBe(200);
    expect(beyond.body).toEqual({ data: [], links: { first: `${base()}1`, last: `${base()}2`, prev: `${base()}2` }, meta: META });

    // Abandoning one brings it back to 50 listed tasks on one page.
    await changeState(user.token, ids[9]!, 'abandoned');
    const after = await list(user.token);
    expect(after.body.data.map((t: any) => t.id)).toEqual([...ids.slice(0, 9), ...ids.slice(10)]);
    expect(after.body.links).toEqual({ first: `${base()}1`, last: `${base()}1` });
    const emptySecond = await list(user.token, 2);
    expect(emptySecond.body).toEqual({ data: [], links: { first: `${base()}1`, last: `${base()}1`, prev: `${base()}1` }, meta: META });
  });

  it('lists the middle page with prev and next', async () => {
    const user = await app.register();
    const created = await Promise.all(range(101).map((i) => createTask(user.token, { label: `m${i}` })));
    expect(created.map((t) => t.attributes.order).sort((a, b) => a - b)).toEqual(range(101));
    const middle = await list(user.token, 2);
    expect(middle.body.data.map((t: any) => t.attributes.order)).toEqual(range(50).map((i) => i + 50));
    expect(middle.body.links).toEqual({ first: `${base()}1`, last: `${base()}3`, prev: `${base()}1`, next: `${base()}3` });
    const last = await list(user.token, 3);
    expect(last.body.data.map((t: any) => t.attributes.order)).toEqual([101]);
  });

  it('sorts by order, not by id, and never lists abandoned tasks', async () => {
    const user = await app.register();
    const [a, b, c, d] = await createTasks(user.token, 4);
    await putOrder(user.token, d!, 1); // d a b c
    await putOrder(user.token, b!, 4); // d a c b
    await changeState(user.token, a!, 'abandoned');
    const res = await list(user.token);
    expect(res.body.data.map((t: any) => [t.id, t.attributes.order, t.attributes.state])).toEqual([
      [d, 1, 'started'],
      [c, 3, 'started'],
      [b, 4, 'started'],
    ]);
  });

  it('lists finished tasks until the end of the UTC day 14 days after the day they finished', async () => {
    // 2026-06-15T00:00:00Z and the second before it.
    const midnight = T0 - 12 * HOUR * 1000;
    app.clock.set(midnight - 1000);
    const user = await app.register();
    const early = await createTask(user.token, { label: 'early', planned_at: DUE });
    const onTime = await createTask(user.token, { label: 'on time', planned_at: DUE });
    const open = await createTask(user.token, { label: 'open' });
    const earlyDone = await changeState(user.token, early.id, 'finished');
    expect(earlyDone.attributes.finishedAt).toBe(seconds(midnight) - 1);
    app.clock.set(midnight);
    const onTimeDone = await changeState(user.token, onTime.id, 'finished');
    expect(onTimeDone.attributes.finishedAt).toBe(seconds(midnight));

    const at = async (ms: number) => {
      app.clock.set(ms);
      return listedIds(user.token);
    };
    const days = (n: number) => n * DAY * 1000;
    expect(await at(midnight + days(7))).toEqual([early.id, onTime.id, open.id]);
    // 2026-06-28T23:59:59Z: the start of the day 14 days ago is 2026-06-14T00:00:00Z.
    expect(await at(midnight + days(14) - 1000)).toEqual([early.id, onTime.id, open.id]);
    // 2026-06-29T00:00:00Z: the cut-off is 2026-06-15T00:00:00Z; 'early' finished one second before it.
    expect(await at(midnight + days(14))).toEqual([onTime.id, open.id]);
    // 2026-06-29T23:59:59Z: 'on time' still listed (finishedAt == cut-off).
    expect(await at(midnight + days(15) - 1000)).toEqual([onTime.id, open.id]);
    // 2026-06-30T00:00:00Z: gone.
    const gone = await list(user.token);
    app.clock.set(midnight + days(15));
    const res = await list(user.token);
    expect(gone.body.data.map((t: any) => t.id)).toEqual([onTime.id, open.id]);
    expect(res.body).toEqual({
      data: [taskJson({ id: open.id, userId: user.id, label: 'open', order: 3, state: 'started', startedAt: seconds(midnight) - 1 })],
      links: { first: `${base()}1`, last: `${base()}1` },
      meta: META,
    });
    // Still readable on its own, and listed again once replanned.
    expect((await getTask(user.token, early.id)).data.attributes.state).toBe('finished');
    await changeState(user.token, early.id, 'planned');
    expect(await listedIds(user.token)).toEqual([early.id, open.id]);
  });

  it('counts only listed tasks in the page links', async () => {
    const user = await app.register();
    const ids = await createTasks(user.token, 51);
    const last = ids[50]!;
    await changeState(user.token, last, 'planned');
    await changeState(user.token, last, 'finished');
    expect((await list(user.token)).body.links.last).toBe(`${base()}2`);
    app.clock.advance(20 * DAY);
    const res = await list(user.token);
    expect(res.body.data).toHaveLength(50);
    expect(res.body.links).toEqual({ first: `${base()}1`, last: `${base()}1` });
  });

  it.each(['abc', '0', '-1', '1.5', '2x'])('refuses page=%s with 400 invalid on the parameter page', async (page) => {
    const user = await app.register();
    await createTasks(user.token, 1);
    expectError(await app.request('GET', `${TASKS}?page=${page}`, { token: user.token }), 400, 'invalid', { parameter: 'page' });
  });
});
