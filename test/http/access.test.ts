/**
 * Who may touch what (API-CONTRACT.md §2, §3, §9):
 *
 *   - ownership, table-driven: for every endpoint that takes an id, through both doors,
 *     another user gets exactly the 404 record_not_found of an unknown id, and the owner's
 *     data is byte for byte what it was; a foreign project cannot be attached to a task;
 *     lists never show another user's rows;
 *   - tokens: revoked, malformed and expired ones are 401 unauthorized on both doors;
 *   - security headers on every kind of response, and no x-powered-by;
 *   - no token and no password ever reaches the logs (a real pino logger at trace level);
 *   - rate limits: per client address on login and registration, per token elsewhere, with
 *     the RateLimit headers and Retry-After, counted in the database (shared by two app
 *     instances), reset by the clock, and switched off by 0.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { TRPCClientError } from '@trpc/client';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { DAY, T0, seconds, startTestApp, type ApiResponse, type TestApp } from '../helpers/test-app.js';

const NOW = seconds(T0);
const JSON_UTF8 = 'application/json; charset=utf-8';

let app: TestApp;
afterAll(async () => {
  await app?.close();
});

interface Owner {
  id: number;
  username: string;
  token: string;
  projectId: number;
  taskId: number;
  looseTaskId: number;
}

let a: Owner;
let b: Owner;

/** A user with a started project holding one task, and a loose task. */
async function owner(name: string): Promise<Owner> {
  const user = await app.register(name);
  const call = async (method: string, path: string, body: unknown) => {
    const res = await app.request(method, path, { token: user.token, body });
    if (res.status >= 300) throw new Error(`setup ${method} ${path}: ${res.status} ${res.text}`);
    return res.body;
  };
  const projectId = (await call('POST', '/api/users/me/projects', { project: { name: `${name}_plan` } })).data.id as number;
  await call('PATCH', `/api/projects/${projectId}`, { project: { description: `private notes of ${name}` } });
  await call('PUT', `/api/projects/${projectId}/state`, { project: { state: 'started', due_at: NOW + 10 * DAY } });
  const taskId = (await call('POST', '/api/users/me/tasks', { task: { label: `${name} task`, project_id: projectId } })).data.id as number;
  const looseTaskId = (await call('POST', '/api/users/me/tasks', { task: { label: `${name} loose` } })).data.id as number;
  return { ...user, projectId, taskId, looseTaskId };
}

beforeAll(async () => {
  app = await startTestApp();
  a = await owner('alice');
  b = await owner('bob');
});

async function listPages(token: string, path: string): Promise<string[]> {
  const pages: string[] = [];
  for (let page = 1; page <= 20; page++) {
    const res = await app.request('GET', `${path}?page=${page}`, { token });
    expect(res.status, res.text).toBe(200);
    pages.push(res.text);
    if (!res.body.links.next) break;
  }
  return pages;
}

/** Everything the owner can see of their own data, as raw response texts, and their rows. */
async function viewOf(user: Owner) {
  const get = async (path: string) => {
    const res = await app.request('GET', path, { token: user.token });
    expect(res.status, `${path}: ${res.text}`).toBe(200);
    return res.text;
  };
  const em = app.orm.em.fork();
  const [rows] = await em.execute(
    `select (select md5(coalesce(string_agg(p::text, '|' order by p.id), '')) from projects p where p.user_id = ?) as projects,
            (select md5(coalesce(string_agg(t::text, '|' order by t.id), '')) from tasks t where t.user_id = ?) as tasks,
            (select count(*)::int from access_tokens k where k.user_id = ?) as tokens`,
    [user.id, user.id, user.id],
  );
  return {
    project: await get(`/api/projects/${user.projectId}`),
    task: await get(`/api/tasks/${user.taskId}`),
    looseTask: await get(`/api/tasks/${user.looseTaskId}`),
    projects: await listPages(user.token, '/api/users/me/projects'),
    tasks: await listPages(user.token, '/api/users/me/tasks'),
    rows,
  };
}

/** The tRPC error data of a call that must fail. */
async function trpcError(call: Promise<unknown>): Promise<{ code: string; httpStatus: number; errors: unknown[] }> {
  const error = await call.then(
    (value) => {
      throw new Error(`expected a tRPC error, got ${JSON.stringify(value)?.slice(0, 300)}`);
    },
    (e: unknown) => e,
  );
  if (!(error instanceof TRPCClientError) || !error.data) throw error;
  return error.data as { code: string; httpStatus: number; errors: unknown[] };
}

function notFound(resource: 'project' | 'task') {
  return {
    errors: [
      { status: '404', code: 'record_not_found', title: 'Record not found', detail: `No ${resource} with this id exists for the current user.`, source: { pointer: `/${resource}` } },
    ],
  };
}

// ---------------------------------------------------------------------------------------------
// Ownership
// ---------------------------------------------------------------------------------------------

type Client = ReturnType<TestApp['trpc']>;

interface IdCase {
  name: string;
  resource: 'project' | 'task';
  method: string;
  path: (target: Owner) => string;
  body?: (target: Owner, actor: Owner) => unknown;
  trpc: (client: Client, target: Owner, actor: Owner) => Promise<unknown>;
}

/** Every endpoint that takes an id, with a request the owner would be allowed to make. */
const ID_CASES: IdCase[] = [
  {
    name: 'GET /api/projects/:id', resource: 'project', method: 'GET',
    path: (t) => `/api/projects/${t.projectId}`,
    trpc: (c, t) => c.projects.get.query({ id: t.projectId }),
  },
  {
    name: 'PATCH /api/projects/:id (name and description)', resource: 'project', method: 'PATCH',
    path: (t) => `/api/projects/${t.projectId}`,
    body: () => ({ project: { name: 'Stolen', description: 'pwned' } }),
    trpc: (c, t) => c.projects.update.mutate({ id: t.projectId, project: { name: 'Stolen', description: 'pwned' } }),
  },
  {
    name: 'PATCH /api/projects/:id (due_at)', resource: 'project', method: 'PATCH',
    path: (t) => `/api/projects/${t.projectId}`,
    body: () => ({ project: { due_at: NOW + 30 * DAY } }),
    trpc: (c, t) => c.projects.update.mutate({ id: t.projectId, project: { due_at: NOW + 30 * DAY } }),
  },
  {
    name: 'PUT /api/projects/:id/state (pause)', resource: 'project', method: 'PUT',
    path: (t) => `/api/projects/${t.projectId}/state`,
    body: () => ({ project: { state: 'paused' } }),
    trpc: (c, t) => c.projects.changeState.mutate({ id: t.projectId, project: { state: 'paused' } }),
  },
  {
    name: 'PUT /api/projects/:id/state (finish)', resource: 'project', method: 'PUT',
    path: (t) => `/api/projects/${t.projectId}/state`,
    body: () => ({ project: { state: 'finished' } }),
    trpc: (c, t) => c.projects.changeState.mutate({ id: t.projectId, project: { state: 'finished' } }),
  },
  {
    name: 'DELETE /api/projects/:id', resource: 'project', method: 'DELETE',
    path: (t) => `/api/projects/${t.projectId}`,
    trpc: (c, t) => c.projects.delete.mutate({ id: t.projectId }),
  },
  {
    name: 'GET /api/tasks/:id', resource: 'task', method: 'GET',
    path: (t) => `/api/tasks/${t.taskId}`,
    trpc: (c, t) => c.tasks.get.query({ id: t.taskId }),
  },
  {
    name: 'PATCH /api/tasks/:id (label, detach)', resource: 'task', method: 'PATCH',
    path: (t) => `/api/tasks/${t.taskId}`,
    body: () => ({ task: { label: 'stolen', project_id: null } }),
    trpc: (c, t) => c.tasks.update.mutate({ id: t.taskId, task: { label: 'stolen', project_id: null } }),
  },
  {
    name: "PATCH /api/tasks/:id (into the actor's own project)", resource: 'task', method: 'PATCH',
    path: (t) => `/api/tasks/${t.taskId}`,
    body: (_t, actor) => ({ task: { project_id: actor.projectId } }),
    trpc: (c, t, actor) => c.tasks.update.mutate({ id: t.taskId, task: { project_id: actor.projectId } }),
  },
  {
    name: 'PUT /api/tasks/:id/state (abandon)', resource: 'task', method: 'PUT',
    path: (t) => `/api/tasks/${t.taskId}/state`,
    body: () => ({ task: { state: 'abandoned' } }),
    trpc: (c, t) => c.tasks.changeState.mutate({ id: t.taskId, task: { state: 'abandoned' } }),
  },
  {
    name: 'PUT /api/tasks/:id/state (plan)', resource: 'task', method: 'PUT',
    path: (t) => `/api/tasks/${t.looseTaskId}/state`,
    body: () => ({ task: { state: 'planned' } }),
    trpc: (c, t) => c.tasks.changeState.mutate({ id: t.looseTaskId, task: { state: 'planned' } }),
  },
  {
    name: 'PUT /api/tasks/:id/order', resource: 'task', method: 'PUT',
    path: (t) => `/api/tasks/${t.looseTaskId}/order`,
    body: () => ({ task: { order: 1 } }),
    trpc: (c, t) => c.tasks.reorder.mutate({ id: t.looseTaskId, task: { order: 1 } }),
  },
];

describe('ownership: another user gets 404 record_not_found and changes nothing', () => {
  describe.each(ID_CASES)('$name', (c) => {
    it('REST: the same answer as an unknown id, and the owner sees the same bytes afterwards', async () => {
      const before = await viewOf(a);
      const res = await app.request(c.method, c.path(a), { token: b.token, body: c.body?.(a, b) });
      expect(res.status, res.text).toBe(404);
      expect(res.headers.get('content-type')).toBe(JSON_UTF8);
      expect(res.body).toEqual(notFound(c.resource));
      // Not an oracle: an id that exists for nobody answers exactly the same.
      const nobody = { ...a, projectId: 2_147_483_647, taskId: 2_147_483_647, looseTaskId: 2_147_483_647 };
      const unknown = await app.request(c.method, c.path(nobody), { token: b.token, body: c.body?.(nobody, b) });
      expect(unknown.status).toBe(404);
      expect(unknown.text).toBe(res.text);
      expect(await viewOf(a)).toEqual(before);
    });

    it('tRPC: the same error data as REST, and nothing changes', async () => {
      const before = await viewOf(a);
      const error = await trpcError(c.trpc(app.trpc(b.token), a, b));
      expect(error).toMatchObject({ code: 'record_not_found', httpStatus: 404 });
      expect(error.errors).toEqual(notFound(c.resource).errors);
      expect(await viewOf(a)).toEqual(before);
    });
  });

  it('the owner is allowed each of these requests (so the 404s above are about ownership)', async () => {
    const mine = await app.request('GET', `/api/projects/${a.projectId}`, { token: a.token });
    expect(mine.status).toBe(200);
    expect(mine.body.data.attributes.description).toBe('private notes of alice');
    expect(mine.body.data.relationships.tasks.data).toEqual([{ type: 'task', id: a.taskId }]);
    const task = await app.request('GET', `/api/tasks/${a.taskId}`, { token: a.token });
    expect(task.body.data.relationships.project.data).toEqual({ type: 'project', id: a.projectId });
    // Each request, made by the owner of a fresh user shaped like alice, succeeds.
    for (const [i, c] of ID_CASES.entries()) {
      const twin = await owner(`twin${i}`);
      const res = await app.request(c.method, c.path(twin), { token: twin.token, body: c.body?.(twin, twin) });
      expect(res.status, `${c.name}: ${res.text}`).toBeLessThan(300);
    }
  });

  it.each(['rest', 'trpc'])("through %s, B cannot attach A's project to a task: 422 record_not_found on /task/project_id", async (door) => {
    const beforeA = await viewOf(a);
    const beforeB = await viewOf(b);
    const expected = {
      status: '422', code: 'record_not_found', title: 'Record not found',
      detail: 'No project with this id exists for the current user.', source: { pointer: '/task/project_id' },
    };
    if (door === 'rest') {
      const created = await app.request('POST', '/api/users/me/tasks', { token: b.token, body: { task: { label: 'hijack', project_id: a.projectId } } });
      expect(created.status, created.text).toBe(422);
      expect(created.body).toEqual({ errors: [expected] });
      const moved = await app.request('PATCH', `/api/tasks/${b.looseTaskId}`, { token: b.token, body: { task: { project_id: a.projectId } } });
      expect(moved.status, moved.text).toBe(422);
      expect(moved.body).toEqual({ errors: [expected] });
      const both = await app.request('PATCH', `/api/tasks/${b.looseTaskId}`, { token: b.token, body: { task: { label: 'renamed', project_id: a.projectId } } });
      expect(both.status).toBe(422);
    } else {
      const client = app.trpc(b.token);
      const created = await trpcError(client.tasks.create.mutate({ task: { label: 'hijack', project_id: a.projectId } }));
      expect(created).toMatchObject({ code: 'record_not_found', httpStatus: 422, errors: [expected] });
      const moved = await trpcError(client.tasks.update.mutate({ id: b.looseTaskId, task: { label: 'renamed', project_id: a.projectId } }));
      expect(moved).toMatchObject({ code: 'record_not_found', httpStatus: 422, errors: [expected] });
    }
    expect(await viewOf(a)).toEqual(beforeA);
    // B's own task did not change either (not even the label sent with the refused project).
    expect(await viewOf(b)).toEqual(beforeB);
  });

  it("B's lists never contain A's rows, through both doors; A's lists likewise", async () => {
    // Enough rows for several pages of B's lists.
    for (let i = 0; i < 30; i++) {
      await app.request('POST', '/api/users/me/projects', { token: b.token, body: { project: { name: `b_extra_${i}` } } });
    }
    for (let i = 0; i < 55; i++) {
      await app.request('POST', '/api/users/me/tasks', { token: b.token, body: { task: { label: `b extra ${i}` } } });
    }
    const idsOf = async (user: Owner, kind: 'projects' | 'tasks') => {
      const rest = (await listPages(user.token, `/api/users/me/${kind}`)).flatMap((text) => JSON.parse(text).data);
      const client = app.trpc(user.token);
      const viaTrpc: any[] = [];
      for (let page = 1; page <= 10; page++) {
        const res = kind === 'projects' ? await client.projects.list.query({ page }) : await client.tasks.list.query({ page });
        viaTrpc.push(...res.data);
        if (!res.links.next) break;
      }
      expect(viaTrpc).toEqual(rest);
      for (const item of rest) expect(item.relationships.user.data).toEqual({ type: 'user', id: user.id });
      return rest.map((item: any) => item.id as number);
    };
    const bProjects = await idsOf(b, 'projects');
    const bTasks = await idsOf(b, 'tasks');
    // B's own first project and tasks count as other tests (run in any order) left them.
    const stillListed = async (path: string, listed: (body: any) => boolean) => {
      const res = await app.request('GET', path, { token: b.token });
      return res.status === 200 && listed(res.body) ? 1 : 0;
    };
    const bFirstProject = await stillListed(`/api/projects/${b.projectId}`, () => true);
    const bFirstTasks =
      (await stillListed(`/api/tasks/${b.taskId}`, (body) => body.data.attributes.state !== 'abandoned')) +
      (await stillListed(`/api/tasks/${b.looseTaskId}`, (body) => body.data.attributes.state !== 'abandoned'));
    expect(bProjects).toHaveLength(30 + bFirstProject);
    expect(bTasks).toHaveLength(55 + bFirstTasks);
    expect(bProjects).not.toContain(a.projectId);
    expect(bTasks).not.toContain(a.taskId);
    expect(bTasks).not.toContain(a.looseTaskId);
    const aProjects = await idsOf(a, 'projects');
    const aTasks = await idsOf(a, 'tasks');
    expect(aProjects).toEqual([a.projectId]);
    expect(aTasks).toEqual([a.taskId, a.looseTaskId]);
  });

  it("B reordering and abandoning B's own tasks does not move A's", async () => {
    const before = await viewOf(a);
    const moved = await app.request('PUT', `/api/tasks/${b.looseTaskId}/order`, { token: b.token, body: { task: { order: 1 } } });
    expect(moved.status, moved.text).toBe(200);
    expect(moved.body.data.map((t: any) => t.id)).not.toContain(a.taskId);
    const abandoned = await app.request('PUT', `/api/tasks/${b.taskId}/state`, { token: b.token, body: { task: { state: 'abandoned' } } });
    expect(abandoned.status).toBe(200);
    // A project of B's made for this test: b's own fixture stays whole for the other tests,
    // whatever order they run in.
    const spare = await app.request('POST', '/api/users/me/projects', { token: b.token, body: { project: { name: 'bob_spare' } } });
    const deleted = await app.request('DELETE', `/api/projects/${spare.body.data.id}`, { token: b.token });
    expect(deleted.status).toBe(204);
    expect(await viewOf(a)).toEqual(before);
  });
});

// ---------------------------------------------------------------------------------------------
// Tokens
// ---------------------------------------------------------------------------------------------

const UNAUTHORIZED = {
  errors: [{ status: '401', code: 'unauthorized', title: 'Unauthorized', detail: expect.any(String) }],
};

/** Requests covering every kind of authenticated endpoint; ids are the caller's own. */
function authedRequests(user: Owner): Array<[string, string, unknown?]> {
  return [
    ['GET', '/api/users/me'],
    ['GET', '/api/users/me/projects'],
    ['POST', '/api/users/me/projects', { project: { name: 'WithBadToken' } }],
    ['GET', `/api/projects/${user.projectId}`],
    ['PATCH', `/api/projects/${user.projectId}`, { project: { description: 'changed' } }],
    ['PUT', `/api/projects/${user.projectId}/state`, { project: { state: 'paused' } }],
    ['DELETE', `/api/projects/${user.projectId}`],
    ['GET', '/api/users/me/tasks'],
    ['POST', '/api/users/me/tasks', { task: { label: 'with bad token' } }],
    ['GET', `/api/tasks/${user.taskId}`],
    ['PATCH', `/api/tasks/${user.taskId}`, { task: { label: 'changed' } }],
    ['PUT', `/api/tasks/${user.taskId}/state`, { task: { state: 'abandoned' } }],
    ['PUT', `/api/tasks/${user.looseTaskId}/order`, { task: { order: 1 } }],
    ['DELETE', '/api/users/me/authorizations/current'],
  ];
}

/** The same through the typed tRPC client. */
function authedCalls(client: Client, user: Owner): Array<[string, () => Promise<unknown>]> {
  return [
    ['users.me', () => client.users.me.query()],
    ['projects.list', () => client.projects.list.query({})],
    ['projects.create', () => client.projects.create.mutate({ project: { name: 'WithBadToken' } })],
    ['projects.get', () => client.projects.get.query({ id: user.projectId })],
    ['projects.update', () => client.projects.update.mutate({ id: user.projectId, project: { description: 'changed' } })],
    ['projects.changeState', () => client.projects.changeState.mutate({ id: user.projectId, project: { state: 'paused' } })],
    ['projects.delete', () => client.projects.delete.mutate({ id: user.projectId })],
    ['tasks.list', () => client.tasks.list.query({})],
    ['tasks.create', () => client.tasks.create.mutate({ task: { label: 'with bad token' } })],
    ['tasks.get', () => client.tasks.get.query({ id: user.taskId })],
    ['tasks.update', () => client.tasks.update.mutate({ id: user.taskId, task: { label: 'changed' } })],
    ['tasks.changeState', () => client.tasks.changeState.mutate({ id: user.taskId, task: { state: 'abandoned' } })],
    ['tasks.reorder', () => client.tasks.reorder.mutate({ id: user.looseTaskId, task: { order: 1 } })],
    ['users.revoke', () => client.users.revoke.mutate()],
  ];
}

/**
 * Every request with this Authorization header is 401 on both doors, and the user's data
 * stays (read with `viewer`, a valid token of the same user).
 */
async function expectRefusedEverywhere(user: Owner, header: string, viewer: Owner = user) {
  const before = await viewOf(viewer);
  for (const [method, path, body] of authedRequests(user)) {
    const res = await app.request(method, path, { body, headers: { Authorization: header } });
    expect(res.status, `${method} ${path} with ${JSON.stringify(header.slice(0, 60))}: ${res.text}`).toBe(401);
    expect(res.body).toEqual(UNAUTHORIZED);
  }
  const client = app.trpc(header);
  for (const [name, call] of authedCalls(client, user)) {
    const error = await trpcError(call());
    expect(error, `${name} with ${JSON.stringify(header.slice(0, 60))}`).toMatchObject({ code: 'unauthorized', httpStatus: 401 });
  }
  expect(await viewOf(viewer)).toEqual(before);
}

describe('a body refused on an id the user has no record of', () => {
  // The id names what a request is about: 404 whatever the body, as with a valid one (API-CONTRACT.md §2).
  const bodies = (p: number, t: number): Array<[string, string, unknown, 'project' | 'task' | 'webhook']> => [
    ['PATCH', `/api/projects/${p}`, { project: { description: 5 } }, 'project'],
    ['PATCH', `/api/projects/${p}`, { project: { name: 'a b' } }, 'project'],
    ['PUT', `/api/projects/${p}/state`, { project: {} }, 'project'],
    ['PUT', `/api/projects/${p}/state`, { project: { state: 5, due_at: 'x' } }, 'project'],
    ['PATCH', `/api/tasks/${t}`, { task: { label: '' } }, 'task'],
    ['PUT', `/api/tasks/${t}/state`, { task: {} }, 'task'],
    ['PUT', `/api/tasks/${t}/order`, { task: {} }, 'task'],
    ['PATCH', `/api/webhooks/${p}`, { webhook: { url: 5 } }, 'webhook'],
  ];

  it('is 404 record_not_found for another user\'s id and an unknown one, the body\'s 422 for the owner\'s, changing nothing', async () => {
    const before = await viewOf(a);
    for (const [p, t, owned] of [[a.projectId, a.taskId, false], [999_999, 999_999, false], [b.projectId, b.taskId, true]] as const) {
      for (const [method, path, body, resource] of bodies(p, t)) {
        const res = await app.request(method, path, { token: b.token, body });
        const what = `${method} ${path} ${JSON.stringify(body)}: ${res.text}`;
        // B has no webhook: its own id is unknown too. Its own project and task: the body's 422.
        if (owned && resource !== 'webhook') expect(res.status, what).toBe(422);
        else expect(res.body.errors, what).toEqual([expect.objectContaining({ status: '404', code: 'record_not_found', source: { pointer: `/${resource}` } })]);
      }
    }
    expect(await viewOf(a)).toEqual(before);
  });

  it('is the same on /trpc', async () => {
    const trpc = app.trpc(b.token);
    for (const id of [a.projectId, 999_999]) {
      const refused = await trpcError(trpc.projects.update.mutate({ id, project: { name: 'a b' } }));
      expect(refused).toMatchObject({ code: 'record_not_found', httpStatus: 404 });
    }
    for (const id of [a.taskId, 999_999]) {
      expect(await trpcError(trpc.tasks.changeState.mutate({ id, task: {} } as never))).toMatchObject({ code: 'record_not_found', httpStatus: 404 });
    }
    expect(await trpcError(trpc.projects.update.mutate({ id: b.projectId, project: { name: 'a b' } }))).toMatchObject({ code: 'invalid', httpStatus: 422 });
  });

  it('is looked up for a batch\'s operation at its turn, once the operations before it ran, on both doors', async () => {
    const operations = [{ op: 'projects.update', input: { id: a.projectId, project: { name: 'a b' } } }];
    const refused = await app.request('POST', '/api/batch', { token: b.token, body: { operations } });
    expect([refused.status, refused.body.errors], refused.text).toEqual([404, [expect.objectContaining({ code: 'record_not_found', source: { pointer: '/operations/0/project' } })]]);
    expect(await trpcError(app.trpc(b.token).batch.apply.mutate({ operations } as never))).toMatchObject({ code: 'record_not_found', httpStatus: 404 });
    // Its own project: the body's refusal.
    const own = await app.request('POST', '/api/batch', { token: b.token, body: { operations: [{ ...operations[0], input: { id: b.projectId, project: { name: 'a b' } } }] } });
    expect([own.status, own.body.errors], own.text).toEqual([422, [expect.objectContaining({ code: 'invalid', source: { pointer: '/operations/0/project/name' } })]]);
  });
});

describe('tokens', () => {
  let dave: Owner;
  beforeAll(async () => {
    dave = await owner('dave');
  });

  it('a revoked token is 401 on every endpoint of both doors; the user\'s other token still works', async () => {
    const second = await app.request('POST', '/api/users/authorizations', { body: { username: dave.username, password: 'correct horse' } });
    expect(second.status).toBe(201);
    const revokedToken = second.body.meta.token as string;
    const revoke = await app.request('DELETE', '/api/users/me/authorizations/current', { token: revokedToken });
    expect(revoke.status).toBe(204);
    await expectRefusedEverywhere(dave, revokedToken);
    await expectRefusedEverywhere(dave, `Bearer ${revokedToken}`);
    expect((await app.request('GET', '/api/users/me', { token: dave.token })).status).toBe(200);
  });

  it('a token revoked through tRPC is refused through REST', async () => {
    const login = await app.trpc().users.authorize.mutate({ username: dave.username, password: 'correct horse' });
    await app.trpc(login.meta.token).users.revoke.mutate();
    expect((await app.request('GET', '/api/users/me', { token: login.meta.token })).status).toBe(401);
  });

  it.each([
    ['too short (19 characters of the right alphabet)', (t: string) => t.slice(0, 19)],
    ['one character short', (t: string) => t.slice(0, -1)],
    ['one character more', (t: string) => `${t}A`],
    ['one character changed', (t: string) => `${t.slice(0, -1)}${t.endsWith('A') ? 'B' : 'A'}`],
    ['in the base64 alphabet instead of base64url', (t: string) => `+/${t.slice(2)}`],
    ['with padding', (t: string) => `${t}=`],
    ['with a Latin-1 letter', (t: string) => `${t.slice(0, -1)}é`],
    ['with a dot', (t: string) => `${t.slice(0, 20)}.${t.slice(21)}`],
    ["'Bearer' alone", () => 'Bearer'],
    ["'Bearer ' and spaces", () => 'Bearer    '],
    ["'Bearer' glued to the token", (t: string) => `Bearer${t}`],
    ['a space inside the token', (t: string) => `${t.slice(0, 20)} ${t.slice(20)}`],
    ['Bearer and a space inside the token', (t: string) => `Bearer ${t.slice(0, 20)} ${t.slice(20)}`],
    ['Bearer twice', (t: string) => `Bearer Bearer ${t}`],
    ['the token twice', (t: string) => `${t} ${t}`],
    ['the token twice, comma-separated', (t: string) => `${t}, ${t}`],
    ['the token and trailing garbage', (t: string) => `Bearer ${t} x`],
    ['another scheme', (t: string) => `Basic ${t}`],
    ['Basic credentials', () => `Basic ${Buffer.from('dave:correct horse').toString('base64')}`],
    ['the token in quotes', (t: string) => `"${t}"`],
    ['the token hash instead of the token', () => 'f'.repeat(64)],
    ['an empty-ish value', () => '-'],
  ])('a malformed Authorization header (%s) is 401 unauthorized everywhere', async (_what, make) => {
    await expectRefusedEverywhere(dave, make(dave.token));
  });

  it('the documented forms are accepted: the bare token, Bearer, bearer, several spaces after the scheme (RFC 9110 1*SP)', async () => {
    for (const header of [dave.token, `Bearer ${dave.token}`, `bearer ${dave.token}`, `BEARER ${dave.token}`, `Bearer   ${dave.token}`]) {
      const res = await app.request('GET', '/api/users/me', { headers: { Authorization: header } });
      expect(res.status, header).toBe(200);
    }
  });

  it('no Authorization header at all is 401 on every endpoint', async () => {
    for (const [method, path, body] of authedRequests(dave)) {
      const res = await app.request(method, path, { body });
      expect(res.status, `${method} ${path}`).toBe(401);
      expect(res.body).toEqual(UNAUTHORIZED);
    }
    for (const [name, call] of authedCalls(app.trpc(), dave)) {
      expect(await trpcError(call()), name).toMatchObject({ code: 'unauthorized', httpStatus: 401 });
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Security headers
// ---------------------------------------------------------------------------------------------

describe('security headers', () => {
  it('are on every kind of response, and x-powered-by is not', async () => {
    const user = await owner('erin');
    const json = { 'Content-Type': 'application/json' };
    const responses: Array<[string, ApiResponse | Response]> = [
      ['200 GET', await app.request('GET', '/api/users/me/projects', { token: user.token })],
      ['201 POST', await app.request('POST', '/api/users/me/tasks', { token: user.token, body: { task: { label: 'h' } } })],
      ['204 DELETE', await app.request('DELETE', `/api/projects/${user.projectId}`, { token: user.token })],
      ['400 invalid_json', await app.request('POST', '/api/users/me/tasks', { token: user.token, rawBody: '{', headers: json })],
      ['400 page', await app.request('GET', '/api/users/me/tasks?page=0', { token: user.token })],
      ['401', await app.request('GET', '/api/users/me')],
      ['404 record_not_found', await app.request('GET', '/api/projects/abc', { token: user.token })],
      ['404 missing_endpoint', await app.request('GET', '/nothing/here')],
      ['413', await app.request('POST', '/api/users/me/tasks', { token: user.token, rawBody: JSON.stringify({ task: { label: 'x'.repeat(200_000) } }), headers: json })],
      ['415', await app.request('POST', '/api/users/me/tasks', { token: user.token, rawBody: 'x', headers: { 'Content-Type': 'text/plain' } })],
      ['422', await app.request('POST', '/api/users/me/tasks', { token: user.token, body: { task: {} } })],
      ['healthz', await app.request('GET', '/healthz')],
      ['openapi.json', await app.request('GET', '/openapi.json')],
      ['tRPC 200', await fetch(`${app.baseUrl}/trpc/users.me`, { headers: { Authorization: user.token } })],
      ['tRPC 401', await fetch(`${app.baseUrl}/trpc/users.me`)],
      ['tRPC 404', await fetch(`${app.baseUrl}/trpc/no.such.procedure`)],
    ];
    for (const [what, res] of responses) {
      const h = res.headers;
      expect(h.get('x-content-type-options'), what).toBe('nosniff');
      const csp = h.get('content-security-policy') ?? '';
      expect(csp, what).toMatch(/default-src 'self'/);
      expect(csp, what).toMatch(/frame-ancestors '(self|none)'/);
      expect(csp, what).toMatch(/object-src 'none'/);
      expect(h.get('x-frame-options'), what).toMatch(/^(SAMEORIGIN|DENY)$/);
      expect(h.get('x-powered-by'), what).toBeNull();
      expect(h.get('referrer-policy'), what).toBeTruthy();
      expect(h.get('x-request-id'), what).toMatch(/^[A-Za-z0-9._:-]{1,128}$/);
      // No CORS unless configured: a browser on another origin may not read the answers.
      expect(h.get('access-control-allow-origin'), what).toBeNull();
    }
  });

  it('an answer Node-level refusals get (headers over 16 KiB, before Express) carries them too', async () => {
    const res = await fetch(`${app.baseUrl}/api/users/me`, { headers: { 'X-Padding': 'p'.repeat(20_000) } });
    expect(res.status).toBe(431);
    expect(res.headers.get('content-type')).toBe(JSON_UTF8);
    expect(res.headers.get('x-powered-by')).toBeNull();
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('content-security-policy') ?? '').toMatch(/frame-ancestors '(self|none)'/);
    expect(res.headers.get('x-frame-options')).toMatch(/^(SAMEORIGIN|DENY)$/);
  });

  it('a cross-origin preflight gets no CORS grant', async () => {
    const res = await fetch(`${app.baseUrl}/api/users/me/projects`, {
      method: 'OPTIONS',
      headers: { Origin: 'https://evil.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization,content-type' },
    });
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    expect(res.headers.get('access-control-allow-headers')).toBeNull();
  });
});

// ---------------------------------------------------------------------------------------------
// Logs
// ---------------------------------------------------------------------------------------------

describe('logs', () => {
  it('never contain a token or a password, even at trace level and on failures', async () => {
    const chunks: string[] = [];
    const stream = new Writable({
      write(chunk: Buffer | string, _encoding, callback) {
        chunks.push(chunk.toString());
        callback();
      },
    });
    const logged = await startTestApp({ logger: pino({ level: 'trace' }, stream) });
    try {
      const password = 'Tr0ub4dor&3-log-secret';
      const wrongPassword = 'Wr0ng-log-secret-password';
      const registered = await logged.request('POST', '/api/users', { body: { user: { username: 'logwatch', password } } });
      expect(registered.status).toBe(201);
      const token = registered.body.meta.token as string;
      const taken = await logged.request('POST', '/api/users', { body: { user: { username: 'logwatch', password: `${password}-again` } } });
      expect(taken.status).toBe(422);
      const login = await logged.request('POST', '/api/users/authorizations', { body: { username: 'logwatch', password } });
      expect(login.status).toBe(201);
      const token2 = login.body.meta.token as string;
      const failedLogin = await logged.request('POST', '/api/users/authorizations', { body: { username: 'logwatch', password: wrongPassword } });
      expect(failedLogin.status).toBe(401);
      const viaTrpc = await logged.trpc().users.authorize.mutate({ username: 'logwatch', password });
      const token3 = viaTrpc.meta.token;

      expect((await logged.request('GET', '/api/users/me', { token })).status).toBe(200);
      expect((await logged.request('GET', '/api/users/me', { headers: { Authorization: `Bearer ${token2}` } })).status).toBe(200);
      expect((await logged.trpc(token3).users.me.query()).data.attributes.username).toBe('logwatch');
      // Failing requests: validation, unknown id, unknown token shaped like a real one, bad JSON,
      // a tRPC validation error, and whatever the service answers to a malformed tRPC body.
      const forged = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;
      expect((await logged.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'bad name' } } })).status).toBe(422);
      expect((await logged.request('GET', '/api/projects/999999', { token: token2 })).status).toBe(404);
      expect((await logged.request('GET', '/api/users/me', { token: forged })).status).toBe(401);
      expect((await logged.request('POST', '/api/users/me/tasks', { token, rawBody: `{"task":{"label":"${token}"`, headers: { 'Content-Type': 'application/json' } })).status).toBe(400);
      await trpcError(logged.trpc(token3).projects.create.mutate({ project: { name: 'bad name' } }));
      await fetch(`${logged.baseUrl}/trpc/projects.create`, { method: 'POST', headers: { Authorization: token, 'Content-Type': 'application/json' }, body: '{' });
      expect((await logged.request('DELETE', '/api/users/me/authorizations/current', { token: token2 })).status).toBe(204);
      expect((await logged.request('GET', '/api/users/me', { token: token2 })).status).toBe(401);

      const text = chunks.join('');
      // The logger was really used: one line per request at least.
      expect(text.match(/"msg":"request"/g)?.length ?? 0).toBeGreaterThanOrEqual(14);
      for (const secret of [token, token2, token3, forged, password, wrongPassword, `${password}-again`]) {
        expect(text.includes(secret), `a secret (${secret.slice(0, 4)}…) is in the logs`).toBe(false);
      }
      // Not even a long piece of one.
      for (const secret of [token, token2, token3]) expect(text).not.toContain(secret.slice(0, 24));
      expect(text).not.toMatch(/bearer/i);
    } finally {
      await logged.close();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Rate limits
// ---------------------------------------------------------------------------------------------

describe('rate limits', () => {
  const LIMITS = { authPerMinute: 3, perMinute: 5 };
  const clock = new ManualClock(T0);
  let one: TestApp;
  let two: TestApp;
  let off: TestApp;

  beforeAll(async () => {
    one = await startTestApp({ rateLimits: LIMITS, clock });
    two = await startTestApp({ databaseUrl: one.databaseUrl, rateLimits: LIMITS, clock });
    off = await startTestApp({ databaseUrl: one.databaseUrl, rateLimits: { authPerMinute: 0, perMinute: 0 }, clock });
  });
  afterAll(async () => {
    await off?.close();
    await two?.close();
    await one?.close();
  });

  /**
   * Moves the shared clock to the first second of the minute after next: the windows are
   * sliding (the previous minute's hits still weigh on the current one), so a fresh budget
   * needs two window boundaries. RateLimit-Reset is then the seconds left in the window (60)
   * while requests remain, and once none remains the seconds until one fits again:
   * 60 + (1 - (limit - 1) / hits) * 60 for the hits of this window.
   */
  function nextWindow() {
    const now = seconds(clock.now().getTime());
    clock.advance(60 - (now % 60) + 60);
  }

  let users = 0;
  /** A user registered and logged in (a second token) in a window of its own. */
  async function limitedUser(on: TestApp = one) {
    nextWindow();
    const username = `limited${++users}`;
    const registered = await on.request('POST', '/api/users', { body: { user: { username, password: 'correct horse' } } });
    expect(registered.status, registered.text).toBe(201);
    const login = await on.request('POST', '/api/users/authorizations', { body: { username, password: 'correct horse' } });
    expect(login.status, login.text).toBe(201);
    nextWindow();
    return { username, token: registered.body.meta.token as string, token2: login.body.meta.token as string };
  }

  const login = (on: TestApp, username: string, password = 'correct horse') =>
    on.request('POST', '/api/users/authorizations', { body: { username, password } });

  function expectLimitHeaders(res: ApiResponse, limit: number, remaining: number, reset: number) {
    expect(res.headers.get('ratelimit-limit')).toBe(String(limit));
    expect(res.headers.get('ratelimit-remaining')).toBe(String(remaining));
    expect(res.headers.get('ratelimit-reset')).toBe(String(reset));
  }

  function expectRateLimited(res: ApiResponse, limit: number, reset: number) {
    expect(res.status, res.text).toBe(429);
    expect(res.headers.get('content-type')).toBe(JSON_UTF8);
    expect(res.body).toEqual({
      errors: [{ status: '429', code: 'rate_limited', title: 'Too many requests', detail: expect.any(String) }],
    });
    expect(res.headers.get('retry-after')).toBe(String(reset));
    expectLimitHeaders(res, limit, 0, reset);
  }

  async function tokenCount(username: string) {
    const [row] = await one.orm.em.fork().execute<{ n: number }[]>(
      'select count(*)::int as n from access_tokens t join users u on u.id = t.user_id where u.username = ?',
      [username],
    );
    return row!.n;
  }

  it('the 4th login attempt of a minute (failed ones count) is 429 rate_limited with Retry-After and RateLimit headers; the clock past the minute allows again', async () => {
    const { username } = await limitedUser();
    const first = await login(one, username);
    expect(first.status).toBe(201);
    expectLimitHeaders(first, 3, 2, 60);
    const wrong = await login(one, username, 'wrong horse');
    expect(wrong.status).toBe(401);
    expectLimitHeaders(wrong, 3, 1, 60);
    const third = await login(one, username);
    expect(third.status).toBe(201);
    expectLimitHeaders(third, 3, 0, 80);

    const tokens = await tokenCount(username);
    const fourth = await login(one, username);
    expectRateLimited(fourth, 3, 90);
    expect(await tokenCount(username), 'a refused login issues no token').toBe(tokens);

    // The same counter on the tRPC door and for registration.
    const viaTrpc = await trpcError(one.trpc().users.authorize.mutate({ username, password: 'correct horse' }));
    expect(viaTrpc).toMatchObject({ code: 'rate_limited', httpStatus: 429 });
    const register = await one.request('POST', '/api/users', { body: { user: { username: 'blocked_user', password: 'correct horse' } } });
    expectRateLimited(register, 3, 100);
    const [row] = await one.orm.em.fork().execute<{ n: number }[]>("select count(*)::int as n from users where username = 'blocked_user'");
    expect(row!.n).toBe(0);

    // Half a minute later: still refused (refused attempts count too). Waiting what its
    // Retry-After says lets the next attempt through.
    clock.advance(30);
    const later = await login(one, username);
    const retryAfter = Number(later.headers.get('retry-after'));
    expectRateLimited(later, 3, retryAfter);
    expect(retryAfter).toBeGreaterThan(30);
    clock.advance(retryAfter);
    const again = await login(one, username);
    expect(again.status, again.text).toBe(201);
    // Past two minutes of quiet: a fresh budget.
    nextWindow();
    expectLimitHeaders(await login(one, username), 3, 2, 60);
  });

  it('the 6th request of a minute with one token is 429 while another token of the same user works', async () => {
    const { token, token2 } = await limitedUser();
    for (let i = 1; i <= 5; i++) {
      const res = await one.request('GET', '/api/users/me/projects', { token });
      expect(res.status).toBe(200);
      expectLimitHeaders(res, 5, 5 - i, i < 5 ? 60 : 72);
    }
    const sixth = await one.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Blocked' } } });
    expectRateLimited(sixth, 5, 80);

    const other = await one.request('GET', '/api/users/me/projects', { token: token2 });
    expect(other.status).toBe(200);
    expectLimitHeaders(other, 5, 4, 60);
    expect(other.body.data, 'the refused POST created nothing').toEqual([]);

    // tRPC shares the counter; its answer carries the headers too.
    expect(await trpcError(one.trpc(token).projects.list.query({}))).toMatchObject({ code: 'rate_limited', httpStatus: 429 });
    const raw = await fetch(`${one.baseUrl}/trpc/users.me`, { headers: { Authorization: token } });
    expect(raw.status).toBe(429);
    expect(raw.headers.get('retry-after')).toBe('90');
    expect(raw.headers.get('ratelimit-remaining')).toBe('0');

    nextWindow();
    const later = await one.request('GET', '/api/users/me/projects', { token });
    expect(later.status).toBe(200);
    expectLimitHeaders(later, 5, 4, 60);
  });

  it('two app instances on the same database share the counters', async () => {
    const { username, token } = await limitedUser();
    for (let i = 0; i < 3; i++) expect((await login(one, username)).status).toBe(201);
    expectRateLimited(await login(two, username), 3, 90);

    nextWindow();
    for (let i = 0; i < 3; i++) expect((await one.request('GET', '/api/users/me', { token })).status).toBe(200);
    for (let i = 0; i < 2; i++) expect((await two.request('GET', '/api/users/me', { token })).status).toBe(200);
    expectRateLimited(await two.request('GET', '/api/users/me', { token }), 5, 80);
    expectRateLimited(await one.request('GET', '/api/users/me', { token }), 5, 86);
  });

  it('limits of 0 disable limiting (on the same database, while the counters say "exhausted")', async () => {
    const { username, token } = await limitedUser();
    for (let i = 0; i < 3; i++) await login(one, username);
    for (let i = 0; i < 5; i++) await one.request('GET', '/api/users/me', { token });
    expectRateLimited(await login(one, username), 3, 90);
    expectRateLimited(await one.request('GET', '/api/users/me', { token }), 5, 80);

    for (let i = 0; i < 10; i++) {
      const res = await login(off, username);
      expect(res.status, res.text).toBe(201);
      expect(res.headers.get('ratelimit-limit')).toBeNull();
      expect(res.headers.get('retry-after')).toBeNull();
    }
    for (let i = 0; i < 12; i++) {
      const res = await off.request('GET', '/api/users/me', { token });
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit-limit')).toBeNull();
    }
    // The default app of the tests has no limits either.
    for (let i = 0; i < 8; i++) expect((await app.request('GET', '/api/users/me', { token: a.token })).status).toBe(200);
  });
});

// ---------------------------------------------------------------------------------------------
// Expiry (it moves the main app's clock 30 days on, and back: the other tests' tokens were
// issued at T0 and must stay valid whatever the order the tests run in)
// ---------------------------------------------------------------------------------------------

describe('expired tokens', () => {
  let before: Date;
  beforeEach(() => {
    before = app.clock.now();
  });
  afterEach(() => {
    app.clock.set(before.getTime());
  });

  it('a token is refused everywhere 30 days after it was issued, on both doors; a new login works', async () => {
    const frank = await owner('frank');
    app.clock.advance(30 * DAY - 1);
    expect((await app.request('GET', '/api/users/me', { token: frank.token })).status).toBe(200);
    app.clock.advance(1);
    const login = await app.request('POST', '/api/users/authorizations', { body: { username: frank.username, password: 'correct horse' } });
    expect(login.status).toBe(201);
    const viewer = { ...frank, token: login.body.meta.token as string };
    await expectRefusedEverywhere(frank, frank.token, viewer);
    await expectRefusedEverywhere(frank, `Bearer ${frank.token}`, viewer);
    const fresh = await app.request('GET', `/api/projects/${frank.projectId}`, { token: viewer.token });
    expect(fresh.status).toBe(200);
    expect(fresh.body.data.attributes.description).toBe('private notes of frank');
    expect(fresh.body.data.attributes.state).toBe('started');
  });
});
