/**
 * The requests the project and task tests make over and over, on one test app: each either
 * answers the response as it is (`…Res`, `put…`, `patch…`, `list…`) or checks the success
 * status and answers the resource.
 */
import { expect } from 'vitest';
import { MAX_OPERATIONS } from '../../src/batch/batch.schema.js';
import type { ApiResponse } from './http.js';
import type { TaskState } from './envelope.js';
import type { TestApp } from './test-app.js';
import { DUE, NEXT_MIDNIGHT } from './times.js';

export type TestUser = Awaited<ReturnType<TestApp['register']>>;

export const PROJECTS = '/api/users/me/projects';
export const TASKS = '/api/users/me/tasks';

/** 1..n */
export const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

/**
 * Creates a user's items through the service, in order, as batches (POST /api/batch) of up to
 * MAX_OPERATIONS creates each instead of one request each: the same rows, for tests about
 * reading or writing them, not about making them. Returns their ids, in order.
 */
export async function createInBatches(app: TestApp, token: string, op: 'projects.create' | 'tasks.create', inputs: readonly unknown[]): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < inputs.length; i += MAX_OPERATIONS) {
    const operations = inputs.slice(i, i + MAX_OPERATIONS).map((input) => ({ op, input }));
    const res: ApiResponse = await app.request('POST', '/api/batch', { token, body: { operations } });
    const statuses = Array.isArray(res.body?.data) ? res.body.data.map((r: any) => r.status) : [];
    if (res.status !== 200 || statuses.length !== operations.length || statuses.some((s: number) => s !== 201)) {
      throw new Error(`fixture batch of ${operations.length} ${op}: ${res.status} ${res.text.slice(0, 600)}`);
    }
    ids.push(...res.body.data.map((r: any) => r.body.data.id as number));
  }
  return ids;
}

export function apiSteps(app: TestApp) {
  // Projects -----------------------------------------------------------------------------
  const createProjectRes = (token: string, body: unknown) => app.request('POST', PROJECTS, { token, body });

  async function createProject(token: string, name: string): Promise<any> {
    const res = await createProjectRes(token, { project: { name } });
    expect(res.status, res.text).toBe(201);
    return res.body.data;
  }

  async function getProject(token: string, id: number): Promise<any> {
    const res = await app.request('GET', `/api/projects/${id}`, { token });
    expect(res.status, res.text).toBe(200);
    return res.body;
  }

  /** PATCH /api/projects/:id with these members of `project`. */
  const patchProject = (token: string, id: number, project: unknown) => app.request('PATCH', `/api/projects/${id}`, { token, body: { project } });

  /** PUT /api/projects/:id/state with these members of `project`. */
  const putProjectState = (token: string, id: number, project: unknown) =>
    app.request('PUT', `/api/projects/${id}/state`, { token, body: { project } });

  async function changeProjectState(token: string, id: number, project: Record<string, unknown>): Promise<any> {
    const res = await putProjectState(token, id, project);
    expect(res.status, res.text).toBe(200);
    return res.body.data;
  }

  const startProject = (token: string, id: number, dueAt = DUE) => changeProjectState(token, id, { state: 'started', due_at: dueAt });
  const pauseProject = (token: string, id: number) => changeProjectState(token, id, { state: 'paused' });
  const finishProject = (token: string, id: number) => changeProjectState(token, id, { state: 'finished' });

  const listProjects = (token: string, query = ''): Promise<ApiResponse> => app.request('GET', `${PROJECTS}${query}`, { token });
  const projectsPageUrl = (n: number) => `${app.baseUrl}${PROJECTS}?page=${n}`;

  let projects = 0;
  /** The id of a new project of the user, in the given state. */
  async function projectIn(token: string, state: 'newed' | 'started' | 'paused' | 'finished'): Promise<number> {
    const id = (await createProject(token, `proj_${++projects}`)).id as number;
    if (state === 'newed') return id;
    await changeProjectState(token, id, { state: 'started', due_at: DUE });
    if (state === 'paused') await changeProjectState(token, id, { state: 'paused' });
    if (state === 'finished') await changeProjectState(token, id, { state: 'finished' });
    return id;
  }

  // Tasks --------------------------------------------------------------------------------
  const createTaskRes = (token: string, body: unknown) => app.request('POST', TASKS, { token, body });

  async function createTask(token: string, task: Record<string, unknown>): Promise<any> {
    const res = await createTaskRes(token, { task });
    expect(res.status, res.text).toBe(201);
    return res.body.data;
  }

  /** Ids of n new tasks labelled <prefix>1..<prefix>n, made one after the other. */
  async function createTasks(token: string, n: number, prefix = 't'): Promise<number[]> {
    const ids: number[] = [];
    for (let i = 1; i <= n; i++) ids.push((await createTask(token, { label: `${prefix}${i}` })).id);
    return ids;
  }

  async function getTask(token: string, id: number): Promise<any> {
    const res = await app.request('GET', `/api/tasks/${id}`, { token });
    expect(res.status, res.text).toBe(200);
    return res.body;
  }

  /** PATCH /api/tasks/:id with this whole body. */
  const patchTask = (token: string, id: number | string, body: unknown) => app.request('PATCH', `/api/tasks/${id}`, { token, body });
  /** PUT /api/tasks/:id/state with these members of `task`. */
  const putTaskState = (token: string, id: number | string, task: unknown) => app.request('PUT', `/api/tasks/${id}/state`, { token, body: { task } });
  const putTaskOrder = (token: string, id: number | string, order: unknown) =>
    app.request('PUT', `/api/tasks/${id}/order`, { token, body: { task: { order } } });

  async function changeTaskState(token: string, id: number, state: string): Promise<any> {
    const res = await putTaskState(token, id, { state });
    expect(res.status, res.text).toBe(200);
    return res.body.data;
  }

  const listTasks = (token: string, page?: number | string): Promise<ApiResponse> =>
    app.request('GET', page === undefined ? TASKS : `${TASKS}?page=${page}`, { token });

  /** Ids of the first page of the task list, in the order given. */
  async function listedTaskIds(token: string): Promise<number[]> {
    const res = await listTasks(token);
    expect(res.status, res.text).toBe(200);
    return res.body.data.map((t: any) => t.id);
  }

  /** [id, order] of every listed task, across all pages. */
  async function listedTaskOrders(token: string): Promise<Array<[number, number]>> {
    const all: Array<[number, number]> = [];
    for (let page = 1; ; page++) {
      const res = await listTasks(token, page);
      expect(res.status, res.text).toBe(200);
      if (res.body.data.length === 0) break;
      for (const t of res.body.data) all.push([t.id, t.attributes.order]);
      if (!res.body.links.next) break;
    }
    return all;
  }

  /** A task of the user brought to the given state at the current clock time. */
  async function taskIn(user: TestUser, state: TaskState, newedProject?: number): Promise<any> {
    switch (state) {
      case 'newed':
        return createTask(user.token, { label: 'in newed', project_id: newedProject ?? (await projectIn(user.token, 'newed')) });
      case 'started':
        return createTask(user.token, { label: 'in started' });
      case 'planned':
        return createTask(user.token, { label: 'in planned', planned_at: NEXT_MIDNIGHT });
      case 'finished': {
        const t = await createTask(user.token, { label: 'in finished', planned_at: NEXT_MIDNIGHT });
        return changeTaskState(user.token, t.id, 'finished');
      }
      case 'abandoned': {
        const t = await createTask(user.token, { label: 'in abandoned' });
        return changeTaskState(user.token, t.id, 'abandoned');
      }
    }
  }

  return {
    createProjectRes, createProject, getProject, patchProject, putProjectState, changeProjectState,
    startProject, pauseProject, finishProject, listProjects, projectsPageUrl, projectIn,
    createTaskRes, createTask, createTasks, getTask, patchTask, putTaskState, putTaskOrder, changeTaskState,
    listTasks, listedTaskIds, listedTaskOrders, taskIn,
  };
}
