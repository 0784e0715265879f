/**
 * What HTTP adds to PUT /api/projects/:id/state (the rules themselves are in
 * test/procedures/projects-state.test.ts, the table in test/rules/projects-state.test.ts):
 * the answer's status and content type, the `project` wrapper of the body, unknown members
 * written in the JSON text (named by an escaped JSON Pointer), and the limit of 3 started
 * projects under parallel requests.
 */
import { describe, expect, it } from 'vitest';
import { apiSteps } from '../helpers/api-steps.js';
import { expectError, JSON_CT, projectDoc } from '../helpers/envelope.js';
import { useTestApp } from '../helpers/test-app.js';
import { DUE, T0S } from '../helpers/times.js';

const app = useTestApp({ resetClock: true });
const { createProject, getProject, putProjectState: putState, startProject: start, listProjects } = apiSteps(app);

describe('PUT /api/projects/:id/state over HTTP', () => {
  it('refuses a state no move reaches, whatever its text (NUL, unknown, empty), as invalid_transition, never a 500', async () => {
    const { token } = await app.register();
    const project = await createProject(token, 'Odd');
    for (const state of ['a\u0000b', 'STARTED', '', 'x'.repeat(5000), 'newed']) {
      const res = await putState(token, project.id, { state, due_at: DUE });
      expectError(res, 422, 'invalid_transition', { pointer: '/project/state' });
    }
  });

  it('starts a newed project: startedAt = now, dueAt = due_at, isInProgress', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'Launch');
    const res = await putState(user.token, p.id, { state: 'started', due_at: DUE });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    const expected = projectDoc({ id: p.id, userId: user.id, name: 'Launch', state: 'started', startedAt: T0S, dueAt: DUE });
    expect(res.body).toEqual(expected);
    expect(await getProject(user.token, p.id)).toEqual(expected);
  });

  it.each([
    ['{"project":{"state":"paused","a/b":1}}', '/project/a~1b'],
    ['{"project":{"state":"paused","c~d":1}}', '/project/c~0d'],
    ['{"project":{"state":"paused","__proto__":{"x":1}}}', '/project/__proto__'],
    ['{"project":{"state":"paused","constructor":1}}', '/project/constructor'],
  ])('names an unknown member with an escaped JSON Pointer: %s', async (rawBody, pointer) => {
    const user = await app.register();
    const p = await createProject(user.token, 'pointers');
    await start(user.token, p.id);
    const res = await app.request('PUT', `/api/projects/${p.id}/state`, {
      token: user.token, rawBody, headers: { 'Content-Type': 'application/json' },
    });
    expectError(res, 422, 'cannot_be_set', { pointer });
    expect((await getProject(user.token, p.id)).data.attributes.state).toBe('started');
    // The same on /trpc: the members as sent, `__proto__` included.
    const trpc = await fetch(`${app.baseUrl}/trpc/projects.changeState`, {
      method: 'POST', headers: { Authorization: user.token, 'Content-Type': 'application/json' },
      body: `{"json":${rawBody.replace('{"project":', `{"id":${p.id},"project":`)}}`,
    });
    expect(trpc.status).toBe(422);
    expect(((await trpc.json()) as any).error.json.data).toMatchObject({ code: 'cannot_be_set', errors: [{ source: { pointer } }] });
    expect((await getProject(user.token, p.id)).data.attributes.state).toBe('started');
  });

  it.each([
    ['an empty body', {}],
    ['project a string', { project: 'started' }],
    ['project null', { project: null }],
    ['state outside the wrapper', { state: 'started', due_at: DUE }],
  ])('answers parameter_missing on /project for %s', async (_what, body) => {
    const user = await app.register();
    const p = await createProject(user.token, 'wrapped');
    const res = await app.request('PUT', `/api/projects/${p.id}/state`, { token: user.token, body });
    expectError(res, 422, 'parameter_missing', { pointer: '/project' });
  });
});

// =============================================================================================

describe('limit of 3 started projects', () => {
  it('holds under 8 concurrent start requests: exactly 3 succeed', async () => {
    const user = await app.register();
    const ids: number[] = [];
    for (let i = 1; i <= 8; i++) ids.push((await createProject(user.token, `race${i}`)).id);
    const responses = await Promise.all(ids.map((id) => putState(user.token, id, { state: 'started', due_at: DUE })));
    const ok = responses.filter((r) => r.status === 200);
    const refused = responses.filter((r) => r.status !== 200);
    expect(ok).toHaveLength(3);
    expect(refused).toHaveLength(5);
    for (const r of refused) expectError(r, 422, 'reached_max_started', { pointer: '/project/state' });
    for (const r of ok) expect(r.body.data.attributes).toMatchObject({ state: 'started', startedAt: T0S, dueAt: DUE, isInProgress: true });

    const list = await listProjects(user.token);
    const startedIds = list.body.data.filter((p: any) => p.attributes.state === 'started').map((p: any) => p.id);
    expect(startedIds).toHaveLength(3);
    expect(startedIds.sort()).toEqual(ok.map((r) => r.body.data.id).sort());
    expect(list.body.data.filter((p: any) => p.attributes.state === 'newed')).toHaveLength(5);
  });
});
