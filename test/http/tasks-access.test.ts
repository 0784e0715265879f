/**
 * Who may reach a task: another user's task is 404 record_not_found on every endpoint and
 * stays unchanged, a malformed id is 404 too, and no token is 401.
 */
import { describe, expect, it } from 'vitest';
import { apiSteps, TASKS } from '../helpers/api-steps.js';
import { expectError } from '../helpers/envelope.js';
import { type ApiResponse, useTestApp } from '../helpers/test-app.js';

const app = useTestApp({ resetClock: true });
const { createTask, createTasks, getTask, patchTask, putTaskState: putState, putTaskOrder: putOrder, listTasks: list, listedTaskOrders: listedOrders, projectIn } = apiSteps(app);
const notFound = (res: ApiResponse) => expectError(res, 404, 'record_not_found', { pointer: '/task' });

describe('ownership', () => {
  it("answers 404 record_not_found to another user's task on every endpoint, and changes nothing", async () => {
    const a = await app.register();
    const b = await app.register();
    const aProject = await projectIn(a.token, 'newed');
    const [a1, a2] = await createTasks(a.token, 2, 'a');
    const aTask = await createTask(a.token, { label: 'private', project_id: aProject });
    const bIds = await createTasks(b.token, 3, 'b');
    const bProject = await projectIn(b.token, 'started');
    const before = await getTask(a.token, aTask.id);
    const aOrders = await listedOrders(a.token);
    const bOrders = await listedOrders(b.token);

    app.clock.advance(60);
    notFound(await app.request('GET', `/api/tasks/${aTask.id}`, { token: b.token }));
    notFound(await patchTask(b.token, aTask.id, { task: { label: 'hacked' } }));
    notFound(await patchTask(b.token, aTask.id, { task: { project_id: bProject } }));
    notFound(await patchTask(b.token, aTask.id, { task: { project_id: null } }));
    for (const state of ['started', 'planned', 'abandoned', 'finished']) notFound(await putState(b.token, aTask.id, { state }));
    notFound(await putOrder(b.token, aTask.id, 1));
    notFound(await putOrder(b.token, a1!, 3));

    expect(await getTask(a.token, aTask.id)).toEqual(before);
    expect(await listedOrders(a.token)).toEqual(aOrders);
    expect(await listedOrders(b.token)).toEqual(bOrders);
    expect(aOrders).toEqual([[a1, 1], [a2, 2], [aTask.id, 3]]);
    expect(bOrders).toEqual(bIds.map((id, i) => [id, i + 1]));
    const listed = await list(b.token);
    expect(listed.body.data.every((t: any) => t.relationships.user.data.id === b.id)).toBe(true);
  });

  it.each(['abc', '0', '-5', '2.5', '99999999999', '2147483647', '%20'])('answers 404 record_not_found to the id %s', async (id) => {
    const user = await app.register();
    await createTasks(user.token, 2);
    notFound(await app.request('GET', `/api/tasks/${id}`, { token: user.token }));
    notFound(await patchTask(user.token, id, { task: { label: 'x' } }));
    notFound(await putState(user.token, id, { state: 'planned' }));
    notFound(await putOrder(user.token, id, 1));
  });

  it.each([
    ['POST', TASKS, { task: { label: 'x' } }],
    ['GET', TASKS, undefined],
    ['GET', '/api/tasks/1', undefined],
    ['PATCH', '/api/tasks/1', { task: { label: 'x' } }],
    ['PUT', '/api/tasks/1/state', { task: { state: 'planned' } }],
    ['PUT', '/api/tasks/1/order', { task: { order: 1 } }],
  ])('answers 401 to %s %s without a token', async (method, path, body) => {
    const res = await app.request(method, path, { body });
    expectError(res, 401, 'unauthorized');
  });
});
