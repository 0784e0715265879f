/**
 * Black-box tests of the project endpoints (SPEC.md 4.1–4.4, API-CONTRACT.md §2, §4, §6, §7, §8):
 * full success bodies, name and description rules, the state machine on the injected clock,
 * the limit of 3 started projects (also under concurrent requests), the effects on tasks,
 * pagination, ownership, and the same scenarios through the tRPC client.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DAY, T0, seconds, startTestApp, type ApiResponse, type TestApp } from './helpers/test-app.js';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});
beforeEach(() => {
  app.clock.set(T0);
});

// ---------------------------------------------------------------------------------------------
// Time: T0 is 2026-06-15T12:00:00Z.
const T0S = seconds(T0);
/** 2026-06-16T00:00:00Z: the first instant that is "after today" at T0. */
const NEXT_MIDNIGHT = T0S + 12 * 3600;
/** 2026-06-15T23:59:59Z: the last second of "today" at T0. */
const END_OF_TODAY = NEXT_MIDNIGHT - 1;
/** A due date comfortably after today. */
const DUE = NEXT_MIDNIGHT + 7 * DAY;
const HOUR = 3600;

const META = { stability: 'unstable', notice: 'This output may change soon.' };
const JSON_CT = 'application/json; charset=utf-8';
const LIST = '/api/users/me/projects';

type ProjectState = 'newed' | 'started' | 'paused' | 'finished';

interface ProjectExpectation {
  id: number;
  userId: number;
  name: string;
  description?: string;
  state?: ProjectState;
  startedAt?: number;
  dueAt?: number;
  pausedAt?: number;
  finishedAt?: number;
  tasks?: number[];
}

/** A project resource as SPEC.md 2.1 and API-CONTRACT.md §6 describe it. */
function projectJson(p: ProjectExpectation) {
  const state = p.state ?? 'newed';
  return {
    type: 'project',
    id: p.id,
    attributes: {
      name: p.name,
      slug: p.name.toLowerCase(),
      description: p.description ?? '',
      state,
      startedAt: p.startedAt ?? 0,
      dueAt: p.dueAt ?? 0,
      pausedAt: p.pausedAt ?? 0,
      finishedAt: p.finishedAt ?? 0,
      isInProgress: state === 'started',
    },
    relationships: {
      user: { data: { type: 'user', id: p.userId } },
      tasks: { data: (p.tasks ?? []).map((id) => ({ type: 'task', id })) },
    },
  };
}

function projectDoc(p: ProjectExpectation) {
  return { data: projectJson(p), meta: META };
}

interface TaskExpectation {
  id: number;
  userId: number;
  label: string;
  order: number;
  state: 'newed' | 'started' | 'planned' | 'finished' | 'abandoned';
  plannedCount?: number;
  startedAt?: number;
  plannedAt?: number;
  finishedAt?: number;
  abandonedAt?: number;
  projectId: number | null;
}

function taskDoc(t: TaskExpectation) {
  return {
    data: {
      type: 'task',
      id: t.id,
      attributes: {
        label: t.label,
        order: t.order,
        plannedCount: t.plannedCount ?? 0,
        state: t.state,
        startedAt: t.startedAt ?? 0,
        plannedAt: t.plannedAt ?? 0,
        finishedAt: t.finishedAt ?? 0,
        abandonedAt: t.abandonedAt ?? 0,
      },
      relationships: {
        user: { data: { type: 'user', id: t.userId } },
        project: { data: t.projectId === null ? null : { type: 'project', id: t.projectId } },
      },
    },
    meta: META,
  };
}

interface Source {
  pointer?: string;
  parameter?: string;
}

/** Asserts the exact envelope of API-CONTRACT.md §2 with a single error. */
function expectError(res: ApiResponse, status: number, code: string, source?: Source) {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toBe(JSON_CT);
  const error: Record<string, unknown> = {
    status: String(status),
    code,
    title: expect.stringMatching(/\S/),
    detail: expect.stringMatching(/\S/),
  };
  if (source) error.source = source;
  expect(res.body).toEqual({ errors: [error] });
}

/** Asserts a 422 with exactly these [code, pointer] errors, in any order. */
function expectErrors(res: ApiResponse, expected: Array<[string, string]>) {
  expect(res.status, res.text).toBe(422);
  expect(Object.keys(res.body)).toEqual(['errors']);
  for (const e of res.body.errors) {
    expect(e).toEqual({
      status: '422',
      code: expect.any(String),
      title: expect.stringMatching(/\S/),
      detail: expect.stringMatching(/\S/),
      source: { pointer: expect.any(String) },
    });
  }
  const actual = res.body.errors.map((e: any) => [e.code, e.source.pointer] as [string, string]);
  const sort = (list: Array<[string, string]>) => [...list].sort((a, b) => (a.join(' ') < b.join(' ') ? -1 : 1));
  expect(sort(actual)).toEqual(sort(expected));
}

// ---------------------------------------------------------------------------------------------
// Request helpers.

async function createProjectRes(token: string, body: unknown) {
  return app.request('POST', LIST, { token, body });
}

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

function patch(token: string, id: number, project: unknown) {
  return app.request('PATCH', `/api/projects/${id}`, { token, body: { project } });
}

function putState(token: string, id: number, project: unknown) {
  return app.request('PUT', `/api/projects/${id}/state`, { token, body: { project } });
}

async function changeState(token: string, id: number, project: Record<string, unknown>): Promise<any> {
  const res = await putState(token, id, project);
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}

const start = (token: string, id: number, dueAt = DUE) => changeState(token, id, { state: 'started', due_at: dueAt });
const pause = (token: string, id: number) => changeState(token, id, { state: 'paused' });
const finish = (token: string, id: number) => changeState(token, id, { state: 'finished' });

async function createTask(token: string, task: Record<string, unknown>): Promise<any> {
  const res = await app.request('POST', '/api/users/me/tasks', { token, body: { task } });
  expect(res.status, res.text).toBe(201);
  return res.body.data;
}

async function getTask(token: string, id: number): Promise<any> {
  const res = await app.request('GET', `/api/tasks/${id}`, { token });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

async function taskState(token: string, id: number, state: string): Promise<any> {
  const res = await app.request('PUT', `/api/tasks/${id}/state`, { token, body: { task: { state } } });
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}

async function listProjects(token: string, query = ''): Promise<ApiResponse> {
  return app.request('GET', `${LIST}${query}`, { token });
}

const pageUrl = (n: number) => `${app.baseUrl}${LIST}?page=${n}`;

// =============================================================================================

describe('POST /api/users/me/projects', () => {
  it('creates a newed project and answers 201 with the full body', async () => {
    const user = await app.register();
    const res = await createProjectRes(user.token, { project: { name: 'Coffee_Break-2' } });
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    expect(res.body).toEqual(projectDoc({ id: expect.any(Number) as unknown as number, userId: user.id, name: 'Coffee_Break-2' }));
    const id = res.body.data.id;
    expect(Number.isInteger(id) && id >= 1).toBe(true);
    expect(res.body.data.attributes.slug).toBe('coffee_break-2');

    // The same project is then readable.
    const got = await app.request('GET', `/api/projects/${id}`, { token: user.token });
    expect(got.status).toBe(200);
    expect(got.headers.get('content-type')).toBe(JSON_CT);
    expect(got.body).toEqual(projectDoc({ id, userId: user.id, name: 'Coffee_Break-2' }));
  });

  it('gives increasing ids', async () => {
    const user = await app.register();
    const a = await createProject(user.token, 'first');
    const b = await createProject(user.token, 'second');
    expect(b.id).toBeGreaterThan(a.id);
  });

  it('ignores unknown extra members', async () => {
    const user = await app.register();
    const res = await createProjectRes(user.token, { project: { name: 'extra', foo: 1, state: 'started' }, bar: true });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual(projectDoc({ id: res.body.data.id, userId: user.id, name: 'extra' }));
  });

  it('accepts a name of exactly 100 characters and refuses 101 as too_long', async () => {
    const user = await app.register();
    const name100 = 'a'.repeat(50) + 'B'.repeat(25) + '0123456789_-_-_-_-_-_-_-_';
    expect(name100).toHaveLength(100);
    const ok = await createProjectRes(user.token, { project: { name: name100 } });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.body).toEqual(projectDoc({ id: ok.body.data.id, userId: user.id, name: name100 }));

    const tooLong = await createProjectRes(user.token, { project: { name: 'x'.repeat(101) } });
    expectError(tooLong, 422, 'too_long', { pointer: '/project/name' });
  });

  it('reports both invalid and too_long for a 120-character name with a space', async () => {
    const user = await app.register();
    const res = await createProjectRes(user.token, { project: { name: 'a'.repeat(60) + ' ' + 'b'.repeat(59) } });
    expectErrors(res, [
      ['invalid', '/project/name'],
      ['too_long', '/project/name'],
    ]);
  });

  it('counts the name length in code points (99 letters and an emoji is only invalid)', async () => {
    const user = await app.register();
    const res = await createProjectRes(user.token, { project: { name: 'a'.repeat(99) + '😀' } });
    expectError(res, 422, 'invalid', { pointer: '/project/name' });
  });

  it.each([
    ['a space', 'has space'],
    ['a dot', 'dot.name'],
    ['an accented letter', 'café'],
    ['an emoji', 'rocket🚀'],
    ['a slash', 'a/b'],
    ['a tab', 'tab\tname'],
    ['a trailing newline', 'name\n'],
    ['a NUL', 'nul\u0000'],
    ['nothing', ''],
  ])('refuses a name with %s as invalid', async (_what, name) => {
    const user = await app.register();
    const res = await createProjectRes(user.token, { project: { name } });
    expectError(res, 422, 'invalid', { pointer: '/project/name' });
  });

  it('accepts letters, digits, underscores and hyphens', async () => {
    const user = await app.register();
    for (const name of ['abc', 'XYZ', '123', '_', '-', 'a-b_C9']) {
      const res = await createProjectRes(user.token, { project: { name } });
      expect(res.status, `${name}: ${res.text}`).toBe(201);
      expect(res.body.data.attributes).toMatchObject({ name, slug: name.toLowerCase() });
    }
  });

  it('refuses a name already used by the user, regardless of case, as taken', async () => {
    const user = await app.register();
    await createProject(user.token, 'Coffee');
    for (const name of ['Coffee', 'coffee', 'COFFEE', 'cOfFeE']) {
      const res = await createProjectRes(user.token, { project: { name } });
      expectError(res, 422, 'taken', { pointer: '/project/name' });
    }
    // Another user may use the name.
    const other = await app.register();
    const theirs = await createProjectRes(other.token, { project: { name: 'coffee' } });
    expect(theirs.status, theirs.text).toBe(201);
    // Only one project exists for the first user.
    const list = await listProjects(user.token);
    expect(list.body.data.map((p: any) => p.attributes.name)).toEqual(['Coffee']);
  });

  it.each([
    ['an empty body', {}],
    ['project null', { project: null }],
    ['project a string', { project: 'coffee' }],
    ['project a number', { project: 5 }],
    ['project an array', { project: [{ name: 'coffee' }] }],
    ['name outside the wrapper', { name: 'coffee' }],
  ])('answers parameter_missing on /project for %s', async (_what, body) => {
    const user = await app.register();
    const res = await createProjectRes(user.token, body);
    expectError(res, 422, 'parameter_missing', { pointer: '/project' });
  });

  it.each([
    ['an empty project', {}],
    ['only a description', { description: 'x' }],
  ])('answers parameter_missing on /project/name for %s', async (_what, project) => {
    const user = await app.register();
    const res = await createProjectRes(user.token, { project });
    expectError(res, 422, 'parameter_missing', { pointer: '/project/name' });
  });

  it.each([
    ['a number', 123],
    ['null', null],
    ['true', true],
    ['an array', ['coffee']],
    ['an object', { value: 'coffee' }],
  ])('refuses a name that is %s as invalid', async (_what, name) => {
    const user = await app.register();
    const res = await createProjectRes(user.token, { project: { name } });
    expectError(res, 422, 'invalid', { pointer: '/project/name' });
  });
});

// =============================================================================================

describe('GET /api/projects/:id', () => {
  it('answers 404 record_not_found for an unknown id', async () => {
    const user = await app.register();
    const res = await app.request('GET', '/api/projects/2147483000', { token: user.token });
    expectError(res, 404, 'record_not_found', { pointer: '/project' });
  });

  const malformed = ['abc', '0', '-1', '1.5', '99999999999999999999', '2147483648', '%20'];
  const calls: Array<[string, string, unknown]> = [
    ['GET', '', undefined],
    ['PATCH', '', { project: { name: 'renamed' } }],
    ['PUT', '/state', { project: { state: 'started', due_at: DUE } }],
    ['DELETE', '', undefined],
  ];
  const cases = malformed.flatMap((id) => calls.map(([method, suffix, body]) => [method, id, suffix, body] as const));
  it.each(cases)('%s /api/projects/%s%s answers 404 record_not_found', async (method, id, suffix, body) => {
    const user = await app.register();
    await createProject(user.token, 'existing');
    const res = await app.request(method, `/api/projects/${id}${suffix}`, { token: user.token, body });
    expectError(res, 404, 'record_not_found', { pointer: '/project' });
  });
});

// =============================================================================================

describe('PATCH /api/projects/:id', () => {
  it('renames and describes a project, answering the full body', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'Coffee');
    const res = await patch(user.token, p.id, { name: 'Tea_Time', description: 'Brew some tea.\nTwice.' });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    const expected = projectDoc({ id: p.id, userId: user.id, name: 'Tea_Time', description: 'Brew some tea.\nTwice.' });
    expect(res.body).toEqual(expected);
    expect(res.body.data.attributes.slug).toBe('tea_time');
    expect(await getProject(user.token, p.id)).toEqual(expected);
    // The old name is free again, the new one is taken.
    expect((await createProjectRes(user.token, { project: { name: 'coffee' } })).status).toBe(201);
    expectError(await createProjectRes(user.token, { project: { name: 'TEA_TIME' } }), 422, 'taken', { pointer: '/project/name' });
  });

  it('changes nothing for an empty project and ignores unknown members', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'Same');
    const res = await patch(user.token, p.id, { foo: 'bar' });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'Same' }));
    const empty = await patch(user.token, p.id, {});
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'Same' }));
  });

  it('allows renaming a project to its own name in another case', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'coffee');
    const res = await patch(user.token, p.id, { name: 'COFFEE' });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'COFFEE' }));
    expect(res.body.data.attributes.slug).toBe('coffee');
  });

  it("refuses another project's name in any case as taken and leaves the project unchanged", async () => {
    const user = await app.register();
    await createProject(user.token, 'Coffee');
    const p = await createProject(user.token, 'Tea');
    const res = await patch(user.token, p.id, { name: 'cOFFEE' });
    expectError(res, 422, 'taken', { pointer: '/project/name' });
    expect(await getProject(user.token, p.id)).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'Tea' }));
  });

  it('applies the name rules of creation', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'named');
    expectError(await patch(user.token, p.id, { name: 'n'.repeat(101) }), 422, 'too_long', { pointer: '/project/name' });
    expectError(await patch(user.token, p.id, { name: 'two words' }), 422, 'invalid', { pointer: '/project/name' });
    expectError(await patch(user.token, p.id, { name: '' }), 422, 'invalid', { pointer: '/project/name' });
    expectErrors(await patch(user.token, p.id, { name: 'a b'.repeat(40) }), [
      ['invalid', '/project/name'],
      ['too_long', '/project/name'],
    ]);
    const ok = await patch(user.token, p.id, { name: 'N'.repeat(100) });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'N'.repeat(100) }));
  });

  it('accepts a description of 10,000 code points and refuses 10,001 as too_long', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'described');

    const plain = 'd'.repeat(10_000);
    const ok = await patch(user.token, p.id, { description: plain });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'described', description: plain }));

    expectError(await patch(user.token, p.id, { description: 'd'.repeat(10_001) }), 422, 'too_long', {
      pointer: '/project/description',
    });

    // An emoji is one character: 10,000 emoji (20,000 UTF-16 units) fit, and come back intact.
    const emoji = '😀'.repeat(10_000);
    const emojiOk = await patch(user.token, p.id, { description: emoji });
    expect(emojiOk.status, emojiOk.text).toBe(200);
    expect(emojiOk.body.data.attributes.description).toBe(emoji);
    expect((await getProject(user.token, p.id)).data.attributes.description).toBe(emoji);

    const mixed = 'd'.repeat(9_999) + '🚀';
    const mixedOk = await patch(user.token, p.id, { description: mixed });
    expect(mixedOk.status, mixedOk.text).toBe(200);
    expect(mixedOk.body.data.attributes.description).toBe(mixed);

    expectError(await patch(user.token, p.id, { description: 'd'.repeat(10_000) + '🚀' }), 422, 'too_long', {
      pointer: '/project/description',
    });
    expectError(await patch(user.token, p.id, { description: '😀'.repeat(10_001) }), 422, 'too_long', {
      pointer: '/project/description',
    });
    // The refused descriptions did not replace the last accepted one.
    expect((await getProject(user.token, p.id)).data.attributes.description).toBe(mixed);

    // An empty description is fine.
    const cleared = await patch(user.token, p.id, { description: '' });
    expect(cleared.body).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'described' }));
  });

  it.each([
    ['a NUL character', 'before\u0000after'],
    ['an unpaired surrogate', 'broken \ud800 text'],
  ])('refuses a description with %s as invalid', async (_what, description) => {
    const user = await app.register();
    const p = await createProject(user.token, 'described');
    expectError(await patch(user.token, p.id, { description }), 422, 'invalid', { pointer: '/project/description' });
  });

  it.each([
    ['name', 123],
    ['name', null],
    ['name', true],
    ['description', 5],
    ['description', null],
    ['description', ['x']],
    ['due_at', '123'],
    ['due_at', String(DUE)],
    ['due_at', null],
    ['due_at', true],
    ['due_at', 1.5],
    ['due_at', -1],
    ['due_at', { at: DUE }],
  ])('refuses %s = %j as invalid', async (field, value) => {
    const user = await app.register();
    const p = await createProject(user.token, 'typed');
    await start(user.token, p.id);
    const res = await patch(user.token, p.id, { [field]: value });
    expectError(res, 422, 'invalid', { pointer: `/project/${field}` });
    expect(await getProject(user.token, p.id)).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'typed', state: 'started', startedAt: T0S, dueAt: DUE }),
    );
  });

  it.each([
    ['an empty body', {}],
    ['project a string', { project: 'x' }],
    ['project null', { project: null }],
  ])('answers parameter_missing on /project for %s', async (_what, body) => {
    const user = await app.register();
    const p = await createProject(user.token, 'wrapped');
    const res = await app.request('PATCH', `/api/projects/${p.id}`, { token: user.token, body });
    expectError(res, 422, 'parameter_missing', { pointer: '/project' });
  });

  it('reports a taken name and a cannot_be_set due_at together', async () => {
    const user = await app.register();
    await createProject(user.token, 'Taken');
    const p = await createProject(user.token, 'Mine');
    const res = await patch(user.token, p.id, { name: 'taken', due_at: DUE });
    expectErrors(res, [
      ['taken', '/project/name'],
      ['cannot_be_set', '/project/due_at'],
    ]);
    expect(await getProject(user.token, p.id)).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'Mine' }));
  });

  it('checks uniqueness against stored names once the request is well-formed', async () => {
    // Format and length errors are all reported together; `taken` needs the database and is
    // checked (together with the due_at rules) only for a well-formed request.
    const user = await app.register();
    await createProject(user.token, 'Taken');
    const p = await createProject(user.token, 'Mine');
    const res = await patch(user.token, p.id, { name: 'taken', description: 'd'.repeat(10_001) });
    expectErrors(res, [['too_long', '/project/description']]);
    const again = await patch(user.token, p.id, { name: 'taken', description: 'd'.repeat(10_000) });
    expectErrors(again, [['taken', '/project/name']]);
    expect((await getProject(user.token, p.id)).data.attributes).toMatchObject({ name: 'Mine', description: '' });
  });
});

// =============================================================================================

describe('PATCH due_at', () => {
  it('cannot be set while the project is newed, paused or finished', async () => {
    const user = await app.register();
    const newed = await createProject(user.token, 'newed');
    expectError(await patch(user.token, newed.id, { due_at: DUE }), 422, 'cannot_be_set', { pointer: '/project/due_at' });
    expect(await getProject(user.token, newed.id)).toEqual(projectDoc({ id: newed.id, userId: user.id, name: 'newed' }));

    const paused = await createProject(user.token, 'paused');
    await start(user.token, paused.id);
    app.clock.advance(HOUR);
    await pause(user.token, paused.id);
    expectError(await patch(user.token, paused.id, { due_at: DUE + DAY }), 422, 'cannot_be_set', { pointer: '/project/due_at' });
    expect(await getProject(user.token, paused.id)).toEqual(
      projectDoc({ id: paused.id, userId: user.id, name: 'paused', state: 'paused', startedAt: T0S, dueAt: DUE, pausedAt: T0S + HOUR }),
    );

    const finished = await createProject(user.token, 'finished');
    await start(user.token, finished.id);
    await finish(user.token, finished.id);
    expectError(await patch(user.token, finished.id, { due_at: DUE + DAY }), 422, 'cannot_be_set', { pointer: '/project/due_at' });
    expect((await getProject(user.token, finished.id)).data.attributes.dueAt).toBe(DUE);
  });

  it('can be changed while started, but not to before startedAt', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'due');
    await start(user.token, p.id); // startedAt = T0S
    app.clock.advance(2 * DAY);

    expectError(await patch(user.token, p.id, { due_at: T0S - 1 }), 422, 'cannot_be_before_started_at', {
      pointer: '/project/due_at',
    });
    expectError(await patch(user.token, p.id, { due_at: 0 }), 422, 'cannot_be_before_started_at', { pointer: '/project/due_at' });
    expect((await getProject(user.token, p.id)).data.attributes.dueAt).toBe(DUE);

    const later = await patch(user.token, p.id, { due_at: DUE + 3 * DAY });
    expect(later.status, later.text).toBe(200);
    expect(later.body).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'due', state: 'started', startedAt: T0S, dueAt: DUE + 3 * DAY }),
    );

    const atStart = await patch(user.token, p.id, { due_at: T0S });
    expect(atStart.status, atStart.text).toBe(200);
    expect(atStart.body.data.attributes.dueAt).toBe(T0S);
  });

  it('changes name, description and due_at of a started project together', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'all');
    await start(user.token, p.id);
    const res = await patch(user.token, p.id, { name: 'All_Three', description: 'everything', due_at: DUE + DAY });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(
      projectDoc({
        id: p.id, userId: user.id, name: 'All_Three', description: 'everything',
        state: 'started', startedAt: T0S, dueAt: DUE + DAY,
      }),
    );
  });
});

// =============================================================================================

describe('PUT /api/projects/:id/state', () => {
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

  it('needs due_at to start (must_be_set /project/due_at)', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'nodue');
    expectError(await putState(user.token, p.id, { state: 'started' }), 422, 'must_be_set', { pointer: '/project/due_at' });
    expect(await getProject(user.token, p.id)).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'nodue' }));
  });

  it('needs a due_at after today: the next UTC midnight is accepted, one second before is refused', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'edge');
    for (const dueAt of [END_OF_TODAY, T0S, T0S - DAY, 0]) {
      expectError(await putState(user.token, p.id, { state: 'started', due_at: dueAt }), 422, 'cannot_be_before_started_at', {
        pointer: '/project/due_at',
      });
    }
    expect(await getProject(user.token, p.id)).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'edge' }));
    const ok = await putState(user.token, p.id, { state: 'started', due_at: NEXT_MIDNIGHT });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'edge', state: 'started', startedAt: T0S, dueAt: NEXT_MIDNIGHT }),
    );
  });

  it('follows the clock: at 23:59:59 the next midnight is after today, at midnight it is not', async () => {
    const user = await app.register();
    const late = await createProject(user.token, 'late');
    const midnight = await createProject(user.token, 'midnight');

    app.clock.set(END_OF_TODAY * 1000);
    const ok = await putState(user.token, late.id, { state: 'started', due_at: NEXT_MIDNIGHT });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.data.attributes).toMatchObject({ startedAt: END_OF_TODAY, dueAt: NEXT_MIDNIGHT });

    app.clock.set(NEXT_MIDNIGHT * 1000);
    expectError(await putState(user.token, midnight.id, { state: 'started', due_at: NEXT_MIDNIGHT }), 422, 'cannot_be_before_started_at', {
      pointer: '/project/due_at',
    });
    expectError(await putState(user.token, midnight.id, { state: 'started', due_at: NEXT_MIDNIGHT + DAY - 1 }), 422, 'cannot_be_before_started_at', {
      pointer: '/project/due_at',
    });
    const next = await putState(user.token, midnight.id, { state: 'started', due_at: NEXT_MIDNIGHT + DAY });
    expect(next.status, next.text).toBe(200);
    expect(next.body).toEqual(
      projectDoc({ id: midnight.id, userId: user.id, name: 'midnight', state: 'started', startedAt: NEXT_MIDNIGHT, dueAt: NEXT_MIDNIGHT + DAY }),
    );
  });

  it('pauses, restarts without due_at and with due_at, then finishes', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'Cycle');
    await start(user.token, p.id);

    app.clock.advance(HOUR);
    const paused = await putState(user.token, p.id, { state: 'paused' });
    expect(paused.status, paused.text).toBe(200);
    expect(paused.body).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'Cycle', state: 'paused', startedAt: T0S, dueAt: DUE, pausedAt: T0S + HOUR }),
    );

    app.clock.advance(HOUR);
    const restarted = await putState(user.token, p.id, { state: 'started' });
    expect(restarted.status, restarted.text).toBe(200);
    expect(restarted.body).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'Cycle', state: 'started', startedAt: T0S, dueAt: DUE }),
    );

    app.clock.advance(HOUR);
    await pause(user.token, p.id);
    app.clock.advance(DAY); // 2026-06-16T15:00:00Z; next midnight is 2026-06-17T00:00:00Z
    const tomorrow = NEXT_MIDNIGHT + DAY;
    expectError(await putState(user.token, p.id, { state: 'started', due_at: tomorrow - 1 }), 422, 'cannot_be_before_started_at', {
      pointer: '/project/due_at',
    });
    expect((await getProject(user.token, p.id)).data.attributes).toMatchObject({ state: 'paused', pausedAt: T0S + 3 * HOUR, dueAt: DUE });
    const withDue = await putState(user.token, p.id, { state: 'started', due_at: tomorrow });
    expect(withDue.status, withDue.text).toBe(200);
    expect(withDue.body).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'Cycle', state: 'started', startedAt: T0S, dueAt: tomorrow }),
    );

    app.clock.advance(HOUR);
    const finished = await putState(user.token, p.id, { state: 'finished' });
    expect(finished.status, finished.text).toBe(200);
    const expected = projectDoc({
      id: p.id, userId: user.id, name: 'Cycle', state: 'finished',
      startedAt: T0S, dueAt: tomorrow, finishedAt: T0S + 3 * HOUR + DAY + HOUR,
    });
    expect(finished.body).toEqual(expected);
    expect(await getProject(user.token, p.id)).toEqual(expected);
  });

  it('checks finished_at: between startedAt and the end of today, both inclusive', async () => {
    const user = await app.register();
    const [a, b, c] = [await createProject(user.token, 'a'), await createProject(user.token, 'b'), await createProject(user.token, 'c')];
    for (const p of [a, b, c]) await start(user.token, p.id); // startedAt = T0S
    app.clock.advance(DAY); // 2026-06-16T12:00:00Z
    const endOfToday = END_OF_TODAY + DAY;

    for (const finishedAt of [T0S - 1, 0]) {
      expectError(await putState(user.token, a.id, { state: 'finished', finished_at: finishedAt }), 422, 'cannot_be_before_started_at', {
        pointer: '/project/finished_at',
      });
    }
    for (const finishedAt of [endOfToday + 1, endOfToday + DAY]) {
      expectError(await putState(user.token, a.id, { state: 'finished', finished_at: finishedAt }), 422, 'cannot_be_after_today', {
        pointer: '/project/finished_at',
      });
    }
    expect((await getProject(user.token, a.id)).data.attributes).toMatchObject({ state: 'started', finishedAt: 0 });

    const atStart = await putState(user.token, a.id, { state: 'finished', finished_at: T0S });
    expect(atStart.status, atStart.text).toBe(200);
    expect(atStart.body).toEqual(
      projectDoc({ id: a.id, userId: user.id, name: 'a', state: 'finished', startedAt: T0S, dueAt: DUE, finishedAt: T0S }),
    );

    const atEnd = await putState(user.token, b.id, { state: 'finished', finished_at: endOfToday });
    expect(atEnd.status, atEnd.text).toBe(200);
    expect(atEnd.body).toEqual(
      projectDoc({ id: b.id, userId: user.id, name: 'b', state: 'finished', startedAt: T0S, dueAt: DUE, finishedAt: endOfToday }),
    );

    const now = await putState(user.token, c.id, { state: 'finished' });
    expect(now.status, now.text).toBe(200);
    expect(now.body).toEqual(
      projectDoc({ id: c.id, userId: user.id, name: 'c', state: 'finished', startedAt: T0S, dueAt: DUE, finishedAt: T0S + DAY }),
    );
  });

  it('refuses due_at on pause and finish, finished_at on start and pause, and unknown members, as cannot_be_set', async () => {
    const user = await app.register();
    const newed = await createProject(user.token, 'newed');
    const started = await createProject(user.token, 'started');
    await start(user.token, started.id);
    const paused = await createProject(user.token, 'paused');
    await start(user.token, paused.id);
    await pause(user.token, paused.id);
    const before = await Promise.all([newed, started, paused].map((p) => getProject(user.token, p.id)));

    const cases: Array<[number, Record<string, unknown>, string]> = [
      [started.id, { state: 'paused', due_at: DUE }, '/project/due_at'],
      [started.id, { state: 'finished', due_at: DUE }, '/project/due_at'],
      [started.id, { state: 'paused', finished_at: T0S }, '/project/finished_at'],
      [newed.id, { state: 'started', due_at: DUE, finished_at: T0S }, '/project/finished_at'],
      [paused.id, { state: 'started', finished_at: T0S }, '/project/finished_at'],
      [paused.id, { state: 'started', due_at: DUE, finished_at: T0S }, '/project/finished_at'],
      [newed.id, { state: 'started', due_at: DUE, foo: 1 }, '/project/foo'],
      [started.id, { state: 'paused', foo: 'bar' }, '/project/foo'],
      [started.id, { state: 'finished', foo: null }, '/project/foo'],
      [paused.id, { state: 'started', name: 'renamed' }, '/project/name'],
      [started.id, { state: 'paused', paused_at: T0S }, '/project/paused_at'],
    ];
    for (const [id, project, pointer] of cases) {
      const res = await putState(user.token, id, project);
      expectError(res, 422, 'cannot_be_set', { pointer });
    }
    const after = await Promise.all([newed, started, paused].map((p) => getProject(user.token, p.id)));
    expect(after).toEqual(before);
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
  });

  it('answers invalid_transition for every move that is not in the state machine', async () => {
    const user = await app.register();
    const newed = await createProject(user.token, 'newed');
    const started = await createProject(user.token, 'started');
    await start(user.token, started.id);
    const paused = await createProject(user.token, 'paused');
    await start(user.token, paused.id);
    await pause(user.token, paused.id);
    const finished = await createProject(user.token, 'finished');
    await start(user.token, finished.id);
    await finish(user.token, finished.id);
    const projects = { newed, started, paused, finished };
    const before = await Promise.all(Object.values(projects).map((p) => getProject(user.token, p.id)));

    const valid = new Set(['newed>started', 'started>paused', 'paused>started', 'started>finished']);
    const requested = ['newed', 'started', 'paused', 'finished', 'abandoned', 'planned', 'foo', 'STARTED', 'Started', ' started', ''];
    let checked = 0;
    for (const [from, p] of Object.entries(projects)) {
      for (const to of requested) {
        if (valid.has(`${from}>${to}`)) continue;
        // Members that the move would need are given, so that only the transition is wrong.
        const project: Record<string, unknown> = { state: to };
        if (to === 'started') project.due_at = DUE;
        const res = await putState(user.token, p.id, project);
        expect(res.body?.errors?.[0]?.code, `${from} -> ${JSON.stringify(to)}: ${res.text}`).toBe('invalid_transition');
        expectError(res, 422, 'invalid_transition', { pointer: '/project/state' });
        checked++;
      }
    }
    expect(checked).toBe(4 * requested.length - 4);
    const after = await Promise.all(Object.values(projects).map((p) => getProject(user.token, p.id)));
    expect(after).toEqual(before);
  });

  it.each([
    ['a number', 1],
    ['null', null],
    ['true', true],
    ['an object', { to: 'started' }],
    ['an array', ['started']],
  ])('refuses a state that is %s as invalid on /project/state', async (_what, state) => {
    const user = await app.register();
    const p = await createProject(user.token, 'typed');
    expectError(await putState(user.token, p.id, { state, due_at: DUE }), 422, 'invalid', { pointer: '/project/state' });
    expect(await getProject(user.token, p.id)).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'typed' }));
  });

  it.each([
    ['an empty project', {}],
    ['only due_at', { due_at: DUE }],
    ['only finished_at and an unknown member', { finished_at: T0S, foo: 1 }],
  ])('answers must_be_set on /project/state for %s', async (_what, project) => {
    const user = await app.register();
    const p = await createProject(user.token, 'nostate');
    expectError(await putState(user.token, p.id, project), 422, 'must_be_set', { pointer: '/project/state' });
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

  it.each([
    ['due_at', '123'],
    ['due_at', String(DUE)],
    ['due_at', null],
    ['due_at', true],
    ['due_at', 1.5],
    ['due_at', DUE + 0.5],
    ['due_at', -1],
    ['due_at', [DUE]],
    ['finished_at', '123'],
    ['finished_at', null],
    ['finished_at', false],
    ['finished_at', -5],
  ])('refuses %s = %j as invalid', async (field, value) => {
    const user = await app.register();
    const p = await createProject(user.token, 'typed');
    const project: Record<string, unknown> =
      field === 'due_at' ? { state: 'started', due_at: value } : { state: 'started', due_at: DUE, finished_at: value };
    expectError(await putState(user.token, p.id, project), 422, 'invalid', { pointer: `/project/${field}` });
    expect(await getProject(user.token, p.id)).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'typed' }));
  });

  it('checks in the order of API-CONTRACT §2', async () => {
    const user = await app.register();
    const newed = await createProject(user.token, 'newed');
    const finished = await createProject(user.token, 'finished');
    await start(user.token, finished.id);
    await finish(user.token, finished.id);
    const started = await createProject(user.token, 'started');
    await start(user.token, started.id);

    const cases: Array<[string, number, Record<string, unknown>, string, string]> = [
      // invalid_transition before cannot_be_set / must_be_set
      ['newed -> paused with due_at', newed.id, { state: 'paused', due_at: DUE }, 'invalid_transition', '/project/state'],
      ['newed -> finished with finished_at', newed.id, { state: 'finished', finished_at: T0S }, 'invalid_transition', '/project/state'],
      ['newed -> unknown with an unknown member', newed.id, { state: 'foo', foo: 1 }, 'invalid_transition', '/project/state'],
      ['finished -> started without due_at', finished.id, { state: 'started' }, 'invalid_transition', '/project/state'],
      ['finished -> started with finished_at', finished.id, { state: 'started', finished_at: T0S }, 'invalid_transition', '/project/state'],
      ['started -> started without due_at', started.id, { state: 'started' }, 'invalid_transition', '/project/state'],
      // cannot_be_set before date rules
      ['start with a past due_at and finished_at', newed.id, { state: 'started', due_at: 0, finished_at: T0S }, 'cannot_be_set', '/project/finished_at'],
      ['start with a past due_at and an unknown member', newed.id, { state: 'started', due_at: 0, foo: 1 }, 'cannot_be_set', '/project/foo'],
      ['finish with due_at and a finished_at after today', started.id, { state: 'finished', due_at: DUE, finished_at: DUE }, 'cannot_be_set', '/project/due_at'],
      ['pause with a past due_at', started.id, { state: 'paused', due_at: 0 }, 'cannot_be_set', '/project/due_at'],
      // must_be_set before dates
      ['start without due_at', newed.id, { state: 'started' }, 'must_be_set', '/project/due_at'],
    ];
    for (const [what, id, project, code, pointer] of cases) {
      const res = await putState(user.token, id, project);
      expect(res.body?.errors?.[0]?.code, `${what}: ${res.text}`).toBe(code);
      expectError(res, 422, code, { pointer });
    }
  });
});

// =============================================================================================

describe('limit of 3 started projects', () => {
  it('refuses a 4th start and a restart with reached_max_started; pausing or finishing frees a slot', async () => {
    const user = await app.register();
    const ps = [];
    for (const name of ['one', 'two', 'three', 'four', 'five']) ps.push(await createProject(user.token, name));
    const [p1, p2, p3, p4, p5] = ps as [any, any, any, any, any];
    await start(user.token, p1.id);
    await start(user.token, p2.id);
    await start(user.token, p3.id);

    const fourth = await putState(user.token, p4.id, { state: 'started', due_at: DUE });
    expectError(fourth, 422, 'reached_max_started', { pointer: '/project/state' });
    expect(await getProject(user.token, p4.id)).toEqual(projectDoc({ id: p4.id, userId: user.id, name: 'four' }));

    // Pausing one frees a slot...
    app.clock.advance(HOUR);
    await pause(user.token, p1.id);
    const p4Started = await start(user.token, p4.id);
    expect(p4Started.attributes).toMatchObject({ state: 'started', startedAt: T0S + HOUR });

    // ...so restarting the paused one now hits the limit.
    const restart = await putState(user.token, p1.id, { state: 'started' });
    expectError(restart, 422, 'reached_max_started', { pointer: '/project/state' });
    expectError(await putState(user.token, p1.id, { state: 'started', due_at: DUE + DAY }), 422, 'reached_max_started', {
      pointer: '/project/state',
    });
    expect(await getProject(user.token, p1.id)).toEqual(
      projectDoc({ id: p1.id, userId: user.id, name: 'one', state: 'paused', startedAt: T0S, dueAt: DUE, pausedAt: T0S + HOUR }),
    );

    // Date rules and must_be_set come before the limit.
    expectError(await putState(user.token, p5.id, { state: 'started' }), 422, 'must_be_set', { pointer: '/project/due_at' });
    expectError(await putState(user.token, p5.id, { state: 'started', due_at: END_OF_TODAY }), 422, 'cannot_be_before_started_at', {
      pointer: '/project/due_at',
    });
    expectError(await putState(user.token, p1.id, { state: 'started', due_at: END_OF_TODAY }), 422, 'cannot_be_before_started_at', {
      pointer: '/project/due_at',
    });
    expectError(await putState(user.token, p1.id, { state: 'started', finished_at: T0S }), 422, 'cannot_be_set', {
      pointer: '/project/finished_at',
    });

    // Finishing one frees a slot for the restart.
    await finish(user.token, p2.id);
    const restarted = await putState(user.token, p1.id, { state: 'started' });
    expect(restarted.status, restarted.text).toBe(200);
    expect(restarted.body.data.attributes).toMatchObject({ state: 'started', pausedAt: 0, startedAt: T0S });
    expectError(await putState(user.token, p5.id, { state: 'started', due_at: DUE }), 422, 'reached_max_started', {
      pointer: '/project/state',
    });

    const list = await listProjects(user.token);
    expect(list.body.data.map((p: any) => [p.attributes.name, p.attributes.state])).toEqual([
      ['one', 'started'],
      ['two', 'finished'],
      ['three', 'started'],
      ['four', 'started'],
      ['five', 'newed'],
    ]);
  });

  it("counts only the user's own started projects", async () => {
    const alice = await app.register();
    const bob = await app.register();
    for (const name of ['a1', 'a2', 'a3']) await start(alice.token, (await createProject(alice.token, name)).id);
    for (const name of ['b1', 'b2', 'b3']) {
      const p = await createProject(bob.token, name);
      const res = await putState(bob.token, p.id, { state: 'started', due_at: DUE });
      expect(res.status, res.text).toBe(200);
    }
  });

  it('frees a slot when a started project is deleted', async () => {
    const user = await app.register();
    const ids = [];
    for (const name of ['d1', 'd2', 'd3', 'd4']) ids.push((await createProject(user.token, name)).id);
    for (const id of ids.slice(0, 3)) await start(user.token, id);
    expectError(await putState(user.token, ids[3]!, { state: 'started', due_at: DUE }), 422, 'reached_max_started', {
      pointer: '/project/state',
    });
    expect((await app.request('DELETE', `/api/projects/${ids[0]}`, { token: user.token })).status).toBe(204);
    expect((await start(user.token, ids[3]!)).attributes.state).toBe('started');
  });

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

// =============================================================================================

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

// =============================================================================================

describe('GET /api/users/me/projects', () => {
  /** Creates n projects whose names sort the other way round from their ids. */
  async function createMany(token: string, n: number) {
    const created = [];
    for (let i = 0; i < n; i++) created.push(await createProject(token, `p${String(n - i).padStart(2, '0')}`));
    return created as any[];
  }

  it('lists nothing with 0 projects', async () => {
    const user = await app.register();
    const res = await listProjects(user.token);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    expect(res.body).toEqual({ data: [], links: { first: pageUrl(1), last: pageUrl(1) }, meta: META });
    expect((await listProjects(user.token, '?page=1')).body).toEqual(res.body);
    expect((await listProjects(user.token, '?page=2')).body).toEqual({
      data: [],
      links: { first: pageUrl(1), last: pageUrl(1), prev: pageUrl(1) },
      meta: META,
    });
  });

  it('lists 1 project with its full body', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'Solo');
    await start(user.token, p.id);
    const t = await createTask(user.token, { label: 'work', project_id: p.id });
    const res = await listProjects(user.token);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: [projectJson({ id: p.id, userId: user.id, name: 'Solo', state: 'started', startedAt: T0S, dueAt: DUE, tasks: [t.id] })],
      links: { first: pageUrl(1), last: pageUrl(1) },
      meta: META,
    });
  });

  it('fits 25 projects on one page', async () => {
    const user = await app.register();
    const created = await createMany(user.token, 25);
    const res = await listProjects(user.token);
    expect(res.body).toEqual({
      data: created.map((p) => projectJson({ id: p.id, userId: user.id, name: p.attributes.name })),
      links: { first: pageUrl(1), last: pageUrl(1) },
      meta: META,
    });
    expect((await listProjects(user.token, '?page=2')).body).toEqual({
      data: [],
      links: { first: pageUrl(1), last: pageUrl(1), prev: pageUrl(1) },
      meta: META,
    });
  });

  it('splits 26 projects over two pages sorted by id', async () => {
    const user = await app.register();
    const created = await createMany(user.token, 26);
    const expected = created.map((p) => projectJson({ id: p.id, userId: user.id, name: p.attributes.name }));
    const ids = created.map((p) => p.id);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);

    const first = await listProjects(user.token);
    expect(first.body).toEqual({
      data: expected.slice(0, 25),
      links: { first: pageUrl(1), last: pageUrl(2), next: pageUrl(2) },
      meta: META,
    });
    expect(first.body.data[0].attributes.name).toBe('p26');
    expect((await listProjects(user.token, '?page=1')).body).toEqual(first.body);

    const second = await listProjects(user.token, '?page=2');
    expect(second.body).toEqual({
      data: expected.slice(25),
      links: { first: pageUrl(1), last: pageUrl(2), prev: pageUrl(1) },
      meta: META,
    });
    expect(second.body.data[0].attributes.name).toBe('p01');

    const beyond = await listProjects(user.token, '?page=3');
    expect(beyond.status).toBe(200);
    expect(beyond.body).toEqual({
      data: [],
      links: { first: pageUrl(1), last: pageUrl(2), prev: pageUrl(2) },
      meta: META,
    });
  });

  it.each(['0', '-1', 'abc', '1.5', '', '1,2'])('answers 400 invalid on parameter page for page=%s', async (page) => {
    const user = await app.register();
    const res = await listProjects(user.token, `?page=${page}`);
    expectError(res, 400, 'invalid', { parameter: 'page' });
  });

  it("never shows another user's projects", async () => {
    const alice = await app.register();
    const bob = await app.register();
    const a1 = await createProject(alice.token, 'shared');
    const b1 = await createProject(bob.token, 'shared');
    const a2 = await createProject(alice.token, 'alice_only');
    const b2 = await createProject(bob.token, 'bob_only');
    expect((await listProjects(alice.token)).body.data).toEqual([
      projectJson({ id: a1.id, userId: alice.id, name: 'shared' }),
      projectJson({ id: a2.id, userId: alice.id, name: 'alice_only' }),
    ]);
    expect((await listProjects(bob.token)).body.data).toEqual([
      projectJson({ id: b1.id, userId: bob.id, name: 'shared' }),
      projectJson({ id: b2.id, userId: bob.id, name: 'bob_only' }),
    ]);
  });
});

// =============================================================================================

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
      ['GET', LIST, undefined],
      ['POST', LIST, { project: { name: 'x' } }],
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

describe('wire details', () => {
  it('keeps names unique under concurrent creation: one 201, the others taken', async () => {
    const user = await app.register();
    const names = ['Race', 'race', 'RACE', 'rAcE', 'RaCe', 'racE'];
    const responses = await Promise.all(names.map((name) => createProjectRes(user.token, { project: { name } })));
    const created = responses.filter((r) => r.status === 201);
    expect(created, responses.map((r) => r.text).join('\n')).toHaveLength(1);
    for (const r of responses.filter((x) => x.status !== 201)) expectError(r, 422, 'taken', { pointer: '/project/name' });
    expect((await listProjects(user.token)).body.data).toEqual([created[0]!.body.data]);
  });

  it('keeps names unique under concurrent renames: one 200, the other taken', async () => {
    const user = await app.register();
    const a = await createProject(user.token, 'left');
    const b = await createProject(user.token, 'right');
    const responses = await Promise.all([patch(user.token, a.id, { name: 'Center' }), patch(user.token, b.id, { name: 'center' })]);
    expect(responses.map((r) => r.status).sort()).toEqual([200, 422]);
    expectError(responses.find((r) => r.status === 422)!, 422, 'taken', { pointer: '/project/name' });
    const names = (await listProjects(user.token)).body.data.map((p: any) => p.attributes.slug).sort();
    expect(names).toEqual(['center', responses[0]!.status === 200 ? 'right' : 'left'].sort());
  });

  it('builds page links from the Host of the request and ignores untrusted X-Forwarded-* headers', async () => {
    const user = await app.register();
    const port = new URL(app.baseUrl).port;
    const res = await new Promise<{ status: number; body: any }>((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port: Number(port),
          path: `${LIST}?page=2`,
          method: 'GET',
          headers: { Host: `localhost:${port}`, Authorization: user.token },
        },
        (response) => {
          let text = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => (text += chunk));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) }));
        },
      );
      req.on('error', reject);
      req.end();
    });
    expect(res.status).toBe(200);
    expect(res.body.links).toEqual({
      first: `http://localhost:${port}${LIST}?page=1`,
      last: `http://localhost:${port}${LIST}?page=1`,
      prev: `http://localhost:${port}${LIST}?page=1`,
    });

    const forwarded = await app.request('GET', LIST, {
      token: user.token,
      headers: { 'X-Forwarded-Host': 'evil.example', 'X-Forwarded-Proto': 'https' },
    });
    expect(forwarded.body.links).toEqual({ first: pageUrl(1), last: pageUrl(1) });
  });

  it('answers 415 for a body that is not JSON and 400 for broken JSON', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'wire');
    const textPlain = await app.request('POST', LIST, {
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

  it('accepts a far-future due_at (the largest year-9999 second)', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'far');
    const res = await putState(user.token, p.id, { state: 'started', due_at: 253_402_300_799 });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.attributes.dueAt).toBe(253_402_300_799);
  });

  it('accepts timestamps up to the end of year 9999 and refuses later ones as invalid (documented maximum)', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'farther');
    const late = await putState(user.token, p.id, { state: 'started', due_at: 253_402_300_800 });
    expectError(late, 422, 'invalid', { pointer: '/project/due_at' });
    const res = await putState(user.token, p.id, { state: 'started', due_at: 253_402_300_799 });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.attributes.dueAt).toBe(253_402_300_799);
  });

  it('treats any integer page >= 1 as valid (API-CONTRACT §2, §7): page=2147483648 is an empty page', async () => {
    const user = await app.register();
    await createProject(user.token, 'one');
    const res = await listProjects(user.token, '?page=2147483648');
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({
      data: [],
      links: { first: pageUrl(1), last: pageUrl(1), prev: pageUrl(2147483647) },
      meta: META,
    });
  });

  it('answers missing_endpoint for a wrong method on a project path', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'routes');
    expectError(await app.request('POST', `/api/projects/${p.id}`, { token: user.token, body: { project: {} } }), 404, 'missing_endpoint');
    expectError(await app.request('GET', `/api/projects/${p.id}/state`, { token: user.token }), 404, 'missing_endpoint');
  });
});

// =============================================================================================

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
