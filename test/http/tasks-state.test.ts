/**
 * What HTTP adds to PUT /api/tasks/:id/state (the rules themselves are in
 * test/procedures/tasks-state.test.ts, the table in test/rules/tasks-state.test.ts): the
 * answer's status and content type, the `task` wrapper of the body, and a `__proto__` member
 * written in the JSON text.
 */
import { describe, expect, it } from 'vitest';
import { apiSteps } from '../helpers/api-steps.js';
import { expectError, JSON_CT, taskDoc } from '../helpers/envelope.js';
import { useTestApp } from '../helpers/test-app.js';
import { T0S } from '../helpers/times.js';

const app = useTestApp({ resetClock: true });
const { createTask, getTask, putTaskState: putState, projectIn, taskIn } = apiSteps(app);

describe('PUT /api/tasks/:id/state over HTTP', () => {
  it('answers 200 with the changed task as JSON, as GET then returns it', async () => {
    const user = await app.register();
    const project = await projectIn(user.token, 'newed');
    const t = await createTask(user.token, { label: 'go', project_id: project });
    app.clock.advance(60);
    const res = await putState(user.token, t.id, { state: 'started' });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    const expected = taskDoc({ id: t.id, userId: user.id, label: 'go', order: 1, state: 'started', startedAt: T0S + 60, projectId: project });
    expect(res.body).toEqual(expected);
    expect(await getTask(user.token, t.id)).toEqual(expected);
  });

  it('requires the task wrapper', async () => {
    const user = await app.register();
    const task = await taskIn(user, 'started');
    for (const body of [{}, { state: 'planned' }, { task: 'planned' }]) {
      const res = await app.request('PUT', `/api/tasks/${task.id}/state`, { token: user.token, body });
      expectError(res, 422, 'parameter_missing', { pointer: '/task' });
    }
    expect((await getTask(user.token, task.id)).data.attributes.state).toBe('started');
  });

  it('refuses a __proto__ member as cannot_be_set too', async () => {
    const user = await app.register();
    const task = await taskIn(user, 'started');
    const res = await app.request('PUT', `/api/tasks/${task.id}/state`, {
      token: user.token,
      rawBody: '{"task":{"state":"planned","__proto__":{"x":1}}}',
      headers: { 'Content-Type': 'application/json' },
    });
    expectError(res, 422, 'cannot_be_set', { pointer: '/task/__proto__' });
    expect((await getTask(user.token, task.id)).data.attributes.state).toBe('started');
    // The same on /trpc, as plain JSON and with superjson's meta (whose copy drops the member).
    for (const body of [
      `{"json":{"id":${task.id},"task":{"state":"planned","__proto__":{"x":1}}}}`,
      `{"json":{"id":${task.id},"sent":"2026-06-15T12:00:00.000Z","task":{"state":"planned","__proto__":{"x":1}}},"meta":{"values":{"sent":["Date"]},"v":1}}`,
    ]) {
      const trpc = await fetch(`${app.baseUrl}/trpc/tasks.changeState`, { method: 'POST', headers: { Authorization: user.token, 'Content-Type': 'application/json' }, body });
      expect(trpc.status, body).toBe(422);
      expect(((await trpc.json()) as any).error.json.data.errors.map((e: any) => e.source.pointer)).toContain('/task/__proto__');
    }
    expect((await getTask(user.token, task.id)).data.attributes.state).toBe('started');
  });
});
