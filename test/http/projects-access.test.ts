/**
 * What the project endpoints answer outside of their rules: another user's project is 404
 * and stays unchanged, no token is 401, a body that is not JSON is 415 and broken JSON 400,
 * and a wrong method on a project path is missing_endpoint.
 */
import { describe, expect, it } from 'vitest';
import { apiSteps, PROJECTS } from '../helpers/api-steps.js';
import { expectError, projectDoc } from '../helpers/envelope.js';
import { type ApiResponse, useTestApp } from '../helpers/test-app.js';
import { DAY, DUE, T0S } from '../helpers/times.js';

const app = useTestApp({ resetClock: true });
const { createProject, getProject, patchProject: patch, putProjectState: putState, startProject: start, createTask, getTask, listProjects } = apiSteps(app);

describe('ownership', () => {
  it("answers 404 record_not_found for another user's project and leaves it unchanged", async () => {
    const alice = await app.register();
    const bob = await app.register();
    const p = await createProject(alice.token, 'private');
    await start(alice.token, p.id);
    const t = await createTask(alice.token, { label: 'mine', project_id: p.id });
    const before = await getProject(alice.token, p.id);
    expect(before).toEqual(
      projectDoc({ id: p.id, userId: alice.id, name: 'private', state: 'started', startedAt: T0S, dueAt: DUE, tasks: [t.id] }),
    );

    const notFound = (res: ApiResponse) => expectError(res, 404, 'record_not_found', { pointer: '/project' });
    notFound(await app.request('GET', `/api/projects/${p.id}`, { token: bob.token }));
    notFound(await patch(bob.token, p.id, { name: 'stolen', description: 'mine now' }));
    notFound(await patch(bob.token, p.id, { due_at: DUE + DAY }));
    notFound(await putState(bob.token, p.id, { state: 'paused' }));
    notFound(await putState(bob.token, p.id, { state: 'finished' }));
    notFound(await app.request('DELETE', `/api/projects/${p.id}`, { token: bob.token }));

    expect(await getProject(alice.token, p.id)).toEqual(before);
    expect((await getTask(alice.token, t.id)).data.attributes.state).toBe('started');
    expect((await listProjects(bob.token)).body.data).toEqual([]);

    // Bob cannot attach a task to it either.
    const task = await app.request('POST', '/api/users/me/tasks', { token: bob.token, body: { task: { label: 'x', project_id: p.id } } });
    expectError(task, 422, 'record_not_found', { pointer: '/task/project_id' });
    expect((await getProject(alice.token, p.id)).data.relationships.tasks.data).toEqual([{ type: 'task', id: t.id }]);
  });

  it('answers 401 without a token', async () => {
    const alice = await app.register();
    const p = await createProject(alice.token, 'guarded');
    for (const [method, path, body] of [
      ['GET', PROJECTS, undefined],
      ['POST', PROJECTS, { project: { name: 'x' } }],
      ['GET', `/api/projects/${p.id}`, undefined],
      ['PATCH', `/api/projects/${p.id}`, { project: { name: 'x' } }],
      ['PUT', `/api/projects/${p.id}/state`, { project: { state: 'started', due_at: DUE } }],
      ['DELETE', `/api/projects/${p.id}`, undefined],
    ] as const) {
      expectError(await app.request(method, path, { body }), 401, 'unauthorized');
    }
    expect(await getProject(alice.token, p.id)).toEqual(projectDoc({ id: p.id, userId: alice.id, name: 'guarded' }));
  });
});

// =============================================================================================

describe('HTTP details', () => {
  it('answers 415 for a body that is not JSON and 400 for broken JSON', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'wire');
    const textPlain = await app.request('POST', PROJECTS, {
      token: user.token,
      rawBody: JSON.stringify({ project: { name: 'plain' } }),
      headers: { 'Content-Type': 'text/plain' },
    });
    expectError(textPlain, 415, 'unsupported_media_type');
    const charset = await app.request('PATCH', `/api/projects/${p.id}`, {
      token: user.token,
      rawBody: JSON.stringify({ project: { description: 'utf8' } }),
      headers: { 'Content-Type': 'application/json; charset=utf-8' },
    });
    expect(charset.status, charset.text).toBe(200);
    expect(charset.body.data.attributes.description).toBe('utf8');
    const broken = await app.request('PUT', `/api/projects/${p.id}/state`, {
      token: user.token,
      rawBody: '{"project": {"state": "started",',
      headers: { 'Content-Type': 'application/json' },
    });
    expectError(broken, 400, 'invalid_json');
    expect((await getProject(user.token, p.id)).data.attributes.state).toBe('newed');
  });

  it('answers missing_endpoint for a wrong method on a project path', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'routes');
    expectError(await app.request('POST', `/api/projects/${p.id}`, { token: user.token, body: { project: {} } }), 404, 'missing_endpoint');
    expectError(await app.request('GET', `/api/projects/${p.id}/state`, { token: user.token }), 404, 'missing_endpoint');
  });
});
