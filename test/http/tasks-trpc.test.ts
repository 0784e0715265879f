/**
 * The task procedures through the tRPC client: the same data as REST for every operation,
 * and the same error codes, pointers and statuses in the error data.
 */
import { describe, expect, it } from 'vitest';
import { apiSteps } from '../helpers/api-steps.js';
import { orderDoc, taskDoc, taskExpectationOf } from '../helpers/envelope.js';
import { useTestApp } from '../helpers/test-app.js';
import { DUE, T0S } from '../helpers/times.js';

const app = useTestApp({ resetClock: true });
const { createTask, getTask, listTasks: list, listedTaskOrders: listedOrders, projectIn } = apiSteps(app);

describe('the tRPC door', () => {
  it('creates, reads, lists, updates, moves and changes state with the same data as REST', async () => {
    const user = await app.register();
    const api = app.trpc(user.token);
    const first = await api.tasks.create.mutate({ task: { label: 'via trpc' } });
    expect(first).toEqual(taskDoc({ id: first.data.id, userId: user.id, label: 'via trpc', order: 1, state: 'started', startedAt: T0S }));
    expect(await getTask(user.token, first.data.id)).toEqual(first);
    expect(await api.tasks.get.query({ id: first.data.id })).toEqual(first);

    const project = await projectIn(user.token, 'newed');
    const second = await api.tasks.create.mutate({ task: { label: 'planned', planned_at: DUE, project_id: project } });
    expect(second).toEqual(
      taskDoc({ id: second.data.id, userId: user.id, label: 'planned', order: 2, state: 'planned', plannedCount: 1, plannedAt: DUE, startedAt: T0S, projectId: project }),
    );
    const rest = await createTask(user.token, { label: 'rest' });
    expect(rest.attributes.order).toBe(3);

    expect(await api.tasks.list.query({})).toEqual((await list(user.token)).body);
    expect(await api.tasks.list.query({ page: 2 })).toEqual((await list(user.token, 2)).body);

    const moved = await api.tasks.reorder.mutate({ id: rest.id, task: { order: 1 } });
    expect(moved).toEqual(orderDoc([[rest.id, 1], [first.data.id, 2], [second.data.id, 3]]));
    expect(await listedOrders(user.token)).toEqual([[rest.id, 1], [first.data.id, 2], [second.data.id, 3]]);

    app.clock.advance(60);
    const planned = await api.tasks.changeState.mutate({ id: first.data.id, task: { state: 'planned' } });
    expect(planned).toEqual(
      taskDoc({ id: first.data.id, userId: user.id, label: 'via trpc', order: 2, state: 'planned', plannedCount: 1, startedAt: T0S, plannedAt: T0S + 60 }),
    );
    expect(await getTask(user.token, first.data.id)).toEqual(planned);

    const updated = await api.tasks.update.mutate({ id: first.data.id, task: { label: 'renamed', project_id: project } });
    expect(updated).toEqual(taskDoc({ ...taskExpectationOf(planned.data), label: 'renamed', projectId: project }));
    expect(await getTask(user.token, first.data.id)).toEqual(updated);
  });

  it('reports the same error codes as REST in data.code', async () => {
    const user = await app.register();
    const other = await app.register();
    const api = app.trpc(user.token);
    const t = await api.tasks.create.mutate({ task: { label: 'x' } });
    const foreignProject = await projectIn(other.token, 'newed');

    await expect(api.tasks.create.mutate({ task: { label: '' } })).rejects.toMatchObject({
      data: { code: 'invalid', httpStatus: 422, errors: [expect.objectContaining({ code: 'invalid', source: { pointer: '/task/label' } })] },
    });
    await expect(api.tasks.create.mutate({ task: { label: 'a'.repeat(1001) } })).rejects.toMatchObject({
      data: { code: 'too_long', httpStatus: 422 },
    });
    await expect(api.tasks.create.mutate({ task: {} } as any)).rejects.toMatchObject({
      data: { code: 'parameter_missing', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/task/label' } })] },
    });
    await expect(api.tasks.create.mutate({ task: { label: 'x', project_id: foreignProject } })).rejects.toMatchObject({
      data: { code: 'record_not_found', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/task/project_id' } })] },
    });
    await expect(api.tasks.create.mutate({ task: { label: 'x', planned_at: -1 } })).rejects.toMatchObject({
      data: { code: 'invalid', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/task/planned_at' } })] },
    });
    await expect(api.tasks.changeState.mutate({ id: t.data.id, task: { state: 'finished' } })).rejects.toMatchObject({
      data: { code: 'invalid_transition', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/task/state' } })] },
    });
    await expect(api.tasks.changeState.mutate({ id: t.data.id, task: {} } as any)).rejects.toMatchObject({
      data: { code: 'must_be_set', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/task/state' } })] },
    });
    await expect(api.tasks.changeState.mutate({ id: t.data.id, task: { state: 'planned', planned_at: DUE } })).rejects.toMatchObject({
      data: { code: 'cannot_be_set', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/task/planned_at' } })] },
    });
    await expect(api.tasks.reorder.mutate({ id: t.data.id, task: { order: 0 } })).rejects.toMatchObject({
      data: { code: 'invalid', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/task/order' } })] },
    });
    await expect(api.tasks.update.mutate({ id: t.data.id, task: { project_id: foreignProject } })).rejects.toMatchObject({
      data: { code: 'record_not_found', httpStatus: 422 },
    });
    await expect(api.tasks.list.query({ page: 0 })).rejects.toMatchObject({
      data: { code: 'invalid', httpStatus: 400, errors: [expect.objectContaining({ source: { parameter: 'page' } })] },
    });

    const intruder = app.trpc(other.token);
    for (const call of [
      () => intruder.tasks.get.query({ id: t.data.id }),
      () => intruder.tasks.update.mutate({ id: t.data.id, task: { label: 'hacked' } }),
      () => intruder.tasks.changeState.mutate({ id: t.data.id, task: { state: 'abandoned' } }),
      () => intruder.tasks.reorder.mutate({ id: t.data.id, task: { order: 1 } }),
      () => api.tasks.get.query({ id: 0 }),
    ]) {
      await expect(call()).rejects.toMatchObject({
        data: { code: 'record_not_found', httpStatus: 404, errors: [expect.objectContaining({ source: { pointer: '/task' } })] },
      });
    }
    await expect(app.trpc().tasks.list.query({})).rejects.toMatchObject({ data: { code: 'unauthorized', httpStatus: 401 } });
    // Nothing changed for the owner.
    expect(await getTask(user.token, t.data.id)).toEqual(t);
  });
});
