/**
 * The tRPC door takes the inputs REST takes, with the same answers (API-CONTRACT.md §8):
 * a list with no input is page 1; a `null` (or any non-object) input to a create is
 * `parameter_missing` on its wrapper, as a `null` REST body is.
 */
import { TRPCClientError } from '@trpc/client';
import { beforeAll, describe, expect, it } from 'vitest';
import { onlyError, useTestApp } from '../helpers/test-app.js';

const app = useTestApp();
let token: string;
beforeAll(async () => {
  ({ token } = await app.register());
});

async function trpcFailure(call: Promise<unknown>) {
  const error = await call.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(TRPCClientError);
  return (error as TRPCClientError<any>).data;
}

describe('lists without input', () => {
  it('projects.list() and tasks.list() are page 1, like REST without ?page', async () => {
    // A user of its own: other tests of this file add tasks to the shared one.
    const { token: own } = await app.register();
    await app.request('POST', '/api/users/me/projects', { token: own, body: { project: { name: 'Listed' } } });
    await app.request('POST', '/api/users/me/tasks', { token: own, body: { task: { label: 'Listed' } } });
    const api = app.trpc(own);
    const projects = await api.projects.list.query();
    const tasks = await api.tasks.list.query();
    const restProjects = await app.request('GET', '/api/users/me/projects', { token: own });
    const restTasks = await app.request('GET', '/api/users/me/tasks', { token: own });
    expect(projects.data.map((p) => p.attributes.name)).toEqual(['Listed']);
    expect(tasks.data.map((t) => t.attributes.label)).toEqual(['Listed']);
    expect(JSON.parse(JSON.stringify(projects))).toEqual(restProjects.body);
    expect(JSON.parse(JSON.stringify(tasks))).toEqual(restTasks.body);
  });

  it('an explicit {} is page 1 too, and a bad page is still 400 invalid', async () => {
    const api = app.trpc(token);
    expect((await api.tasks.list.query({})).links.first).toMatch(/page=1$/);
    expect(await trpcFailure(api.tasks.list.query({ page: 0 }))).toMatchObject({ code: 'invalid', httpStatus: 400 });
  });
});

describe('a null input', () => {
  it.each([
    ['projects.create', '/api/users/me/projects', '/project'],
    ['tasks.create', '/api/users/me/tasks', '/task'],
    ['users.register', '/api/users', '/user'],
  ])('%s(null) is 422 parameter_missing on the wrapper, as REST answers a null body', async (procedure, path, pointer) => {
    const [namespace, name] = procedure.split('.') as [string, string];
    const client = app.trpc(token) as any;
    for (const input of [null, 42, 'text', [1, 2]]) {
      const trpc = await trpcFailure(client[namespace][name].mutate(input));
      const rest = await app.request('POST', path, { token, rawBody: JSON.stringify(input), headers: { 'Content-Type': 'application/json' } });
      expect(rest.status, rest.text).toBe(422);
      expect(onlyError(rest.body)).toMatchObject({ code: 'parameter_missing', source: { pointer } });
      expect(trpc, JSON.stringify(input)).toMatchObject({ code: 'parameter_missing', httpStatus: 422, errors: rest.body.errors });
    }
  });

  it('a procedure that takes no input ignores one, as REST ignores a body there (API-CONTRACT.md §8)', async () => {
    expect(await (app.trpc(token) as any).users.me.query(null)).toEqual(await app.trpc(token).users.me.query());
  });
});

describe('ids and pages that are not JSON integers', () => {
  // trpc-to-openapi switches `coerce` on for number schemas during every REST call, on the
  // schema objects /trpc shares; the REST calls here come first so that a leak would show.
  it('are refused on /trpc as on REST, also after REST calls: ids record_not_found, pages invalid', async () => {
    const created = await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'Target' } } });
    const id = created.body.data.id as number;
    expect((await app.request('GET', `/api/tasks/${id}`, { token })).status).toBe(200);
    expect((await app.request('GET', '/api/users/me/tasks?page=2', { token })).status).toBe(200);
    expect((await app.request('GET', `/api/projects/${id}`, { token })).status).toBe(404);

    const api = app.trpc(token) as any;
    expect((await api.tasks.get.query({ id })).data.attributes.label).toBe('Target');
    for (const bad of [`0x${id.toString(16)}`, [id], ` ${id} `, String(id), `${id}.0`, true]) {
      expect(await trpcFailure(api.tasks.get.query({ id: bad })), JSON.stringify(bad)).toMatchObject({ code: 'record_not_found', httpStatus: 404 });
      expect(await trpcFailure(api.tasks.update.mutate({ id: bad, task: { label: 'Moved' } })), JSON.stringify(bad)).toMatchObject({ code: 'record_not_found' });
    }
    for (const bad of ['2', ' 2', [2], '0x2', true]) {
      const data = await trpcFailure(api.tasks.list.query({ page: bad }));
      expect(data, JSON.stringify(bad)).toMatchObject({ code: 'invalid', httpStatus: 400, errors: [{ source: { parameter: 'page' } }] });
      expect(await trpcFailure(api.projects.list.query({ page: bad })), JSON.stringify(bad)).toMatchObject({ code: 'invalid', httpStatus: 400 });
    }
    expect((await app.request('GET', `/api/tasks/${id}`, { token })).body.data.attributes.label).toBe('Target');
  });
});
