/**
 * What a project's changes do to its tasks (SPEC.md 3.1, 4.4): starting and restarting starts
 * its newed tasks, pausing returns started ones to newed, finishing leaves them alone; the
 * project lists its tasks by order; deleting it abandons its unfinished tasks and detaches all.
 */
import { describe, expect, it } from 'vitest';
import { apiSteps } from '../helpers/api-steps.js';
import { expectError, projectDoc, projectJson, taskDoc, type TaskExpectation } from '../helpers/envelope.js';
import { useTestApp } from '../helpers/test-app.js';
import { DAY, DUE, HOUR, T0S } from '../helpers/times.js';

const app = useTestApp({ resetClock: true });
const { createProjectRes, createProject, getProject, patchProject: patch, putProjectState: putState, changeProjectState: changeState, startProject: start, pauseProject: pause, finishProject: finish, createTask, getTask, changeTaskState: taskState, listProjects } = apiSteps(app);

describe('effects on tasks', () => {
  it('start and restart start newed tasks, pause returns started ones to newed, finish leaves them alone', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'withtasks');
    const q = await createProject(user.token, 'other');
    const t1 = await createTask(user.token, { label: 'one', project_id: p.id });
    const t2 = await createTask(user.token, { label: 'two', project_id: p.id, planned_at: T0S + DAY });
    const t3 = await createTask(user.token, { label: 'three', project_id: p.id });
    const tq = await createTask(user.token, { label: 'q', project_id: q.id });
    const free = await createTask(user.token, { label: 'free' });

    const expectTasks = async (expected: Record<string, Partial<TaskExpectation>>) => {
      const base: Record<string, TaskExpectation> = {
        t1: { id: t1.id, userId: user.id, label: 'one', order: 1, state: 'newed', projectId: p.id },
        t2: { id: t2.id, userId: user.id, label: 'two', order: 2, state: 'planned', plannedCount: 1, startedAt: T0S, plannedAt: T0S + DAY, projectId: p.id },
        t3: { id: t3.id, userId: user.id, label: 'three', order: 3, state: 'newed', projectId: p.id },
        tq: { id: tq.id, userId: user.id, label: 'q', order: 4, state: 'newed', projectId: q.id },
        free: { id: free.id, userId: user.id, label: 'free', order: 5, state: 'started', startedAt: T0S, projectId: null },
      };
      for (const [key, ids] of Object.entries({ t1, t2, t3, tq, free })) {
        expect(await getTask(user.token, ids.id), key).toEqual(taskDoc({ ...base[key]!, ...expected[key] }));
      }
    };

    await expectTasks({});
    expect(await getProject(user.token, p.id)).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'withtasks', tasks: [t1.id, t2.id, t3.id] }),
    );

    app.clock.advance(600);
    const started = await putState(user.token, p.id, { state: 'started', due_at: DUE });
    expect(started.body).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'withtasks', state: 'started', startedAt: T0S + 600, dueAt: DUE, tasks: [t1.id, t2.id, t3.id] }),
    );
    await expectTasks({
      t1: { state: 'started', startedAt: T0S + 600 },
      t3: { state: 'started', startedAt: T0S + 600 },
    });

    app.clock.advance(600);
    await pause(user.token, p.id);
    await expectTasks({});

    app.clock.advance(600);
    const restarted = await changeState(user.token, p.id, { state: 'started' });
    expect(restarted.relationships.tasks.data).toEqual([t1.id, t2.id, t3.id].map((id) => ({ type: 'task', id })));
    await expectTasks({
      t1: { state: 'started', startedAt: T0S + 1800 },
      t3: { state: 'started', startedAt: T0S + 1800 },
    });

    app.clock.advance(600);
    const finished = await finish(user.token, p.id);
    expect(finished.attributes).toMatchObject({ state: 'finished', finishedAt: T0S + 2400 });
    await expectTasks({
      t1: { state: 'started', startedAt: T0S + 1800 },
      t3: { state: 'started', startedAt: T0S + 1800 },
    });
  });

  it('lists the ids of non-abandoned tasks by order in relationships.tasks', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'ordered');
    const other = await createProject(user.token, 'elsewhere');
    const a = await createTask(user.token, { label: 'a', project_id: p.id });
    await createTask(user.token, { label: 'x', project_id: other.id });
    const b = await createTask(user.token, { label: 'b', project_id: p.id });
    const c = await createTask(user.token, { label: 'c', project_id: p.id });

    const ref = (...ids: number[]) => ids.map((id) => ({ type: 'task', id }));
    expect((await getProject(user.token, p.id)).data.relationships.tasks.data).toEqual(ref(a.id, b.id, c.id));

    // Move c to the top.
    const moved = await app.request('PUT', `/api/tasks/${c.id}/order`, { token: user.token, body: { task: { order: 1 } } });
    expect(moved.status, moved.text).toBe(200);
    expect((await getProject(user.token, p.id)).data.relationships.tasks.data).toEqual(ref(c.id, a.id, b.id));

    // Abandon a: it disappears.
    await taskState(user.token, a.id, 'abandoned');
    const got = await getProject(user.token, p.id);
    expect(got).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'ordered', tasks: [c.id, b.id] }));
    const list = await listProjects(user.token);
    expect(list.body.data.find((x: any) => x.id === p.id)).toEqual(got.data);
  });
});

// =============================================================================================

describe('DELETE /api/projects/:id', () => {
  it('answers 204 with no body; unfinished tasks are abandoned and all tasks lose their project', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'doomed');
    const keep = await createProject(user.token, 'kept');
    await start(user.token, p.id);
    const startedTask = await createTask(user.token, { label: 'started', project_id: p.id });
    const newedTask = await createTask(user.token, { label: 'newed', project_id: p.id });
    await taskState(user.token, newedTask.id, 'newed');
    const plannedTask = await createTask(user.token, { label: 'planned', project_id: p.id, planned_at: T0S + DAY });
    const finishedTask = await createTask(user.token, { label: 'finished', project_id: p.id, planned_at: T0S + DAY });
    app.clock.advance(60);
    await taskState(user.token, finishedTask.id, 'finished');
    const abandonedTask = await createTask(user.token, { label: 'abandoned', project_id: p.id });
    await taskState(user.token, abandonedTask.id, 'abandoned');
    const keptTask = await createTask(user.token, { label: 'kept', project_id: keep.id });

    app.clock.advance(HOUR);
    const res = await app.request('DELETE', `/api/projects/${p.id}`, { token: user.token });
    expect(res.status, res.text).toBe(204);
    expect(res.text).toBe('');

    const at = T0S + 60 + HOUR;
    expect(await getTask(user.token, startedTask.id)).toEqual(
      taskDoc({ id: startedTask.id, userId: user.id, label: 'started', order: 1, state: 'abandoned', startedAt: T0S, abandonedAt: at, projectId: null }),
    );
    expect(await getTask(user.token, newedTask.id)).toEqual(
      taskDoc({ id: newedTask.id, userId: user.id, label: 'newed', order: 2, state: 'abandoned', abandonedAt: at, projectId: null }),
    );
    expect(await getTask(user.token, plannedTask.id)).toEqual(
      taskDoc({
        id: plannedTask.id, userId: user.id, label: 'planned', order: 3, state: 'abandoned',
        plannedCount: 1, startedAt: T0S, plannedAt: T0S + DAY, abandonedAt: at, projectId: null,
      }),
    );
    expect(await getTask(user.token, finishedTask.id)).toEqual(
      taskDoc({
        id: finishedTask.id, userId: user.id, label: 'finished', order: 4, state: 'finished',
        plannedCount: 1, startedAt: T0S, plannedAt: T0S + DAY, finishedAt: T0S + 60, projectId: null,
      }),
    );
    expect(await getTask(user.token, abandonedTask.id)).toEqual(
      taskDoc({
        id: abandonedTask.id, userId: user.id, label: 'abandoned', order: 5, state: 'abandoned',
        startedAt: T0S + 60, abandonedAt: T0S + 60, projectId: null,
      }),
    );
    expect(await getTask(user.token, keptTask.id)).toEqual(
      taskDoc({ id: keptTask.id, userId: user.id, label: 'kept', order: 6, state: 'newed', projectId: keep.id }),
    );

    expectError(await app.request('GET', `/api/projects/${p.id}`, { token: user.token }), 404, 'record_not_found', { pointer: '/project' });
    expectError(await app.request('DELETE', `/api/projects/${p.id}`, { token: user.token }), 404, 'record_not_found', { pointer: '/project' });
    expectError(await putState(user.token, p.id, { state: 'paused' }), 404, 'record_not_found', { pointer: '/project' });
    expectError(await patch(user.token, p.id, { description: 'x' }), 404, 'record_not_found', { pointer: '/project' });

    const list = await listProjects(user.token);
    expect(list.body.data).toEqual([projectJson({ id: keep.id, userId: user.id, name: 'kept', tasks: [keptTask.id] })]);

    // The name is free again.
    const again = await createProjectRes(user.token, { project: { name: 'DOOMED' } });
    expect(again.status, again.text).toBe(201);
  });

  it('deletes a newed project without tasks', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'empty');
    const res = await app.request('DELETE', `/api/projects/${p.id}`, { token: user.token });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect((await listProjects(user.token)).body.data).toEqual([]);
  });
});
