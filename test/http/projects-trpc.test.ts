/**
 * The project procedures through the tRPC client: the same data as REST for every operation,
 * and the same error codes, pointers and statuses in the error data.
 */
import { describe, expect, it } from 'vitest';
import { apiSteps } from '../helpers/api-steps.js';
import { expectError, META, projectDoc, projectJson } from '../helpers/envelope.js';
import { useTestApp } from '../helpers/test-app.js';
import { DUE, END_OF_TODAY, HOUR, T0S } from '../helpers/times.js';

const app = useTestApp({ resetClock: true });
const { createProject, getProject, createTask, getTask, listProjects, projectsPageUrl: pageUrl } = apiSteps(app);

describe('the tRPC door', () => {
  it('creates, reads, lists, updates, changes state and deletes with the same data as REST', async () => {
    const user = await app.register();
    const api = app.trpc(user.token);

    const created = await api.projects.create.mutate({ project: { name: 'Via_TRPC' } });
    const id = created.data.id;
    expect(created).toEqual(projectDoc({ id, userId: user.id, name: 'Via_TRPC' }));
    expect(await api.projects.get.query({ id })).toEqual(await getProject(user.token, id));

    const updated = await api.projects.update.mutate({ id, project: { name: 'via_trpc', description: 'both doors' } });
    expect(updated).toEqual(projectDoc({ id, userId: user.id, name: 'via_trpc', description: 'both doors' }));

    const task = await createTask(user.token, { label: 'trpc task', project_id: id });
    const started = await api.projects.changeState.mutate({ id, project: { state: 'started', due_at: DUE } });
    expect(started).toEqual(
      projectDoc({ id, userId: user.id, name: 'via_trpc', description: 'both doors', state: 'started', startedAt: T0S, dueAt: DUE, tasks: [task.id] }),
    );
    expect((await getTask(user.token, task.id)).data.attributes).toMatchObject({ state: 'started', startedAt: T0S });

    app.clock.advance(HOUR);
    const paused = await api.projects.changeState.mutate({ id, project: { state: 'paused' } });
    expect(paused.data.attributes).toMatchObject({ state: 'paused', pausedAt: T0S + HOUR, isInProgress: false });
    expect((await getTask(user.token, task.id)).data.attributes).toMatchObject({ state: 'newed', startedAt: 0 });

    const list = await api.projects.list.query({});
    expect(list).toEqual((await listProjects(user.token)).body);
    expect(list).toEqual({
      data: [projectJson({
        id, userId: user.id, name: 'via_trpc', description: 'both doors',
        state: 'paused', startedAt: T0S, dueAt: DUE, pausedAt: T0S + HOUR, tasks: [task.id],
      })],
      links: { first: pageUrl(1), last: pageUrl(1) },
      meta: META,
    });

    await expect(api.projects.delete.mutate({ id })).resolves.toBeUndefined();
    expectError(await app.request('GET', `/api/projects/${id}`, { token: user.token }), 404, 'record_not_found', { pointer: '/project' });
    expect((await getTask(user.token, task.id)).data).toMatchObject({
      attributes: { state: 'abandoned', abandonedAt: T0S + HOUR },
      relationships: { project: { data: null } },
    });
  });

  it('reports the same error codes as REST', async () => {
    const user = await app.register();
    const api = app.trpc(user.token);
    const p = await createProject(user.token, 'Existing');

    await expect(api.projects.create.mutate({ project: { name: 'existing' } })).rejects.toMatchObject({
      data: { code: 'taken', httpStatus: 422, errors: [expect.objectContaining({ code: 'taken', source: { pointer: '/project/name' } })] },
    });
    await expect(api.projects.create.mutate({ project: { name: 'x y'.repeat(40) } })).rejects.toMatchObject({
      data: { code: expect.stringMatching(/^(invalid|too_long)$/), httpStatus: 422 },
    });
    const both = await api.projects.create.mutate({ project: { name: 'x y'.repeat(40) } }).catch((e: any) => e);
    expect(both.data.errors.map((e: any) => [e.code, e.source.pointer]).sort()).toEqual([
      ['invalid', '/project/name'],
      ['too_long', '/project/name'],
    ]);

    await expect(api.projects.changeState.mutate({ id: p.id, project: { state: 'started' } })).rejects.toMatchObject({
      data: { code: 'must_be_set', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/project/due_at' } })] },
    });
    await expect(api.projects.changeState.mutate({ id: p.id, project: { state: 'paused', due_at: DUE } })).rejects.toMatchObject({
      data: { code: 'invalid_transition', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/project/state' } })] },
    });
    await expect(api.projects.changeState.mutate({ id: p.id, project: { state: 'started', due_at: END_OF_TODAY } })).rejects.toMatchObject({
      data: { code: 'cannot_be_before_started_at', httpStatus: 422 },
    });
    await expect(api.projects.changeState.mutate({ id: p.id, project: { state: 'started', due_at: DUE, foo: 1 } })).rejects.toMatchObject({
      data: { code: 'cannot_be_set', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/project/foo' } })] },
    });
    await expect(api.projects.update.mutate({ id: p.id, project: { due_at: DUE } })).rejects.toMatchObject({
      data: { code: 'cannot_be_set', httpStatus: 422 },
    });

    for (const name of ['s1', 's2', 's3']) {
      const s = await api.projects.create.mutate({ project: { name } });
      await api.projects.changeState.mutate({ id: s.data.id, project: { state: 'started', due_at: DUE } });
    }
    await expect(api.projects.changeState.mutate({ id: p.id, project: { state: 'started', due_at: DUE } })).rejects.toMatchObject({
      data: { code: 'reached_max_started', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/project/state' } })] },
    });

    await expect(api.projects.get.query({ id: 2_147_483_000 })).rejects.toMatchObject({
      data: { code: 'record_not_found', httpStatus: 404 },
    });
    await expect(api.projects.get.query({ id: 0 })).rejects.toMatchObject({
      data: { code: 'record_not_found', httpStatus: 404 },
    });
    await expect(api.projects.list.query({ page: 0 })).rejects.toMatchObject({
      data: { code: 'invalid', httpStatus: 400, errors: [expect.objectContaining({ source: { parameter: 'page' } })] },
    });

    const other = app.trpc((await app.register()).token);
    await expect(other.projects.get.query({ id: p.id })).rejects.toMatchObject({
      data: { code: 'record_not_found', httpStatus: 404, errors: [expect.objectContaining({ source: { pointer: '/project' } })] },
    });
    await expect(other.projects.delete.mutate({ id: p.id })).rejects.toMatchObject({
      data: { code: 'record_not_found', httpStatus: 404 },
    });
    expect(await getProject(user.token, p.id)).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'Existing' }));
  });
});
