/**
 * openapi.json as a contract: every documented operation is driven over HTTP against the
 * real app, for its success and for every error status it documents (500 and 503 aside:
 * test/system/outage.test.ts owns those), and every response is validated with ajv against the
 * schema the document declares for that method, path and status. A status the document
 * does not declare fails; an error code outside the status's `x-error-codes` fails; a
 * declared required header that is missing fails. What the document says of itself (its
 * operations, examples and parameters) is checked in test/rules/contract.test.ts.
 */
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyLock } from '../../src/writes/idempotency.js';
import { rawRequest } from '../helpers/http.js';
import { operationById, operations, resolveHeader, schemaErrors, type Json, type Operation } from '../helpers/openapi-document.js';
import { DAY, T0, seconds, startTestApp, type ApiResponse, type TestApp } from '../helpers/test-app.js';

// --- Calls through the document. ----------------------------------------------------------
/** `${operationId} ${status}` of every response seen. */
const seen = new Set<string>();

interface CallOptions {
  id?: number | string;
  query?: string;
  token?: string;
  body?: unknown;
  rawBody?: string;
  headers?: Record<string, string>;
}

function urlOf(operation: Operation, options: CallOptions): string {
  let url = operation.path;
  if (url.includes('{id}')) {
    if (options.id === undefined) throw new Error(`${operation.id} needs an id`);
    url = url.replace('{id}', encodeURIComponent(String(options.id)));
  }
  return options.query ? `${url}?${options.query}` : url;
}

/** Checks one response against what the document declares for its operation and status. */
function checkAgainstDocument(operation: Operation, res: { status: number; headers: Headers; text: string; body: any }, what: string) {
  const declared = operation.op.responses[String(res.status)];
  if (!declared) {
    throw new Error(
      `${what}: status ${res.status} is not documented for ${operation.method.toUpperCase()} ${operation.path} ` +
        `(documented: ${Object.keys(operation.op.responses).join(', ')}); body ${res.text}`,
    );
  }
  seen.add(`${operation.id} ${res.status}`);
  for (const [name, header] of Object.entries((declared.headers ?? {}) as Json)) {
    if (resolveHeader(header).required) expect(res.headers.get(name), `${what}: header ${name}`).toBeTruthy();
  }
  const schema = declared.content?.['application/json']?.schema;
  if (!schema) {
    expect(res.text, `${what}: ${res.status} declares no body`).toBe('');
    return;
  }
  expect(res.headers.get('content-type'), what).toBe('application/json; charset=utf-8');
  const problems = schemaErrors(`${operation.id} ${res.status}`, schema, res.body);
  expect(problems, `${what}: ${res.status} body ${res.text}`).toBeNull();
  if (res.status >= 400) {
    const codes: string[] = declared['x-error-codes'];
    for (const error of res.body.errors) {
      expect(error.status, what).toBe(String(res.status));
      expect(codes, `${what}: code ${error.code} documented for ${res.status}`).toContain(error.code);
    }
  }
}

function codesOf(res: ApiResponse): string[] {
  return (res.body?.errors ?? []).map((e: Json) => e.code);
}

const BIG_BODY = JSON.stringify({ padding: 'x'.repeat(101 * 1024) });
const json = () => 'application/json';

// One walk through the document, in its order: each operation's test uses what the ones
// before it created (users, tokens, projects, tasks, webhooks, a revoked token), and the last
// one checks that together they met every documented status. So its order is kept under
// --sequence.shuffle; the file's other block and the files around it are shuffled.
describe('openapi.json describes what the service answers', { shuffle: false }, () => {
  let app: TestApp;
  let token: string;
  let username: string;
  let otherToken: string;
  let revokedToken: string;
  /** A personal token of the main user, with tasks:read and tokens:manage. */
  let personalSecret: string;
  const ids: Record<string, number> = {};

  async function call(operationId: string, options: CallOptions = {}, what = operationId): Promise<ApiResponse> {
    const operation = operationById.get(operationId);
    if (!operation) throw new Error(`no operation ${operationId} in openapi.json`);
    const res = await app.request(operation.method.toUpperCase(), urlOf(operation, options), {
      token: options.token,
      body: options.body,
      rawBody: options.rawBody,
      headers: options.headers,
    });
    checkAgainstDocument(operation, res, what);
    // What the service accepted, the document accepts too.
    const requestSchema = operation.op.requestBody?.content?.['application/json']?.schema;
    if (res.status < 300 && requestSchema && options.body !== undefined) {
      expect(schemaErrors(`${operationId} request`, requestSchema, options.body), `${what}: accepted body ${JSON.stringify(options.body)}`).toBeNull();
    }
    return res;
  }

  /** A call with a body as written (fetch refuses a body on a GET). */
  async function rawCall(operation: Operation, options: CallOptions, body: string, contentType: string | undefined, what: string) {
    const url = new URL(urlOf(operation, options), app.baseUrl);
    const headers: Record<string, string> = {};
    if (options.token) headers.Authorization = options.token;
    if (contentType) headers['Content-Type'] = contentType;
    const res = await rawRequest(url, operation.method.toUpperCase(), headers, body);
    checkAgainstDocument(operation, res, what);
    return res;
  }

  /** A call that must answer `status`, with exactly these codes when given. */
  async function expectStatus(operationId: string, status: number, options: CallOptions, codes?: string[], what = operationId) {
    const res = await call(operationId, options, what);
    expect(res.status, `${what}: ${res.text}`).toBe(status);
    if (codes) expect(codesOf(res), what).toEqual(codes);
    return res;
  }

  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it('users-register: 201, and 422 with its codes', async () => {
    username = `alice_${Date.now().toString(36)}`;
    const res = await expectStatus('users-register', 201, { body: { user: { username, password: 'correct horse battery staple' } } });
    token = res.body.meta.token;
    expect(res.body.data.attributes.username).toBe(username);
    await expectStatus('users-register', 422, { body: { user: { username, password: 'correct horse battery staple' } } }, ['taken']);
    await expectStatus('users-register', 422, { body: { user: { username: `Bad Name${'x'.repeat(50)}`, password: 'short' } } }, [
      'invalid',
      'too_long',
      'too_short',
    ]);
    await expectStatus('users-register', 422, { body: { username: 'bob' } }, ['parameter_missing']);
    otherToken = (await app.register()).token;
  });

  it('users-authorize: 201, 401 login_failed, 422', async () => {
    const res = await expectStatus('users-authorize', 201, { body: { username, password: 'correct horse battery staple' } });
    expect(res.body.meta.token).not.toBe(token);
    revokedToken = res.body.meta.token;
    await expectStatus('users-authorize', 401, { body: { username, password: 'wrong password' } }, ['login_failed']);
    await expectStatus('users-authorize', 401, { body: { username: 'nobody_at_all', password: 'whatever1' } }, ['login_failed']);
    await expectStatus('users-authorize', 422, { body: { username } }, ['parameter_missing']);
    await expectStatus('users-authorize', 422, { body: { username: 42, password: 'x' } }, ['invalid']);
  });

  it('users-me: 200 with either header form', async () => {
    const res = await expectStatus('users-me', 200, { token });
    expect(res.body.data.attributes.username).toBe(username);
    await expectStatus('users-me', 200, { token: `Bearer ${token}` });
  });

  it('users-update: 200 with the new time zone, and 422 with its codes', async () => {
    const res = await expectStatus('users-update', 200, { token, body: { user: { time_zone: 'america/new_york' } } });
    expect(res.body.data.attributes).toEqual({ username, timeZone: 'America/New_York' });
    expect((await expectStatus('users-me', 200, { token })).body.data.attributes.timeZone).toBe('America/New_York');
    await expectStatus('users-update', 422, { token, body: { user: { time_zone: 'Mars/Olympus_Mons' } } }, ['invalid']);
    await expectStatus('users-update', 422, { token, body: { user: { time_zone: '+01:00' } } }, ['invalid']);
    await expectStatus('users-update', 422, { token, body: { zone: 'UTC' } }, ['parameter_missing']);
    await expectStatus('users-update', 200, { token, body: { user: { time_zone: 'UTC' } } });
  });

  it('users-revoke: 204, then the token is 401; 422 for a malformed Idempotency-Key', async () => {
    await expectStatus('users-revoke', 422, { token: revokedToken, headers: { 'Idempotency-Key': 'a b' } }, ['invalid']);
    const res = await expectStatus('users-revoke', 204, { token: revokedToken, headers: { 'Idempotency-Key': 'revoke' } });
    expect(res.text).toBe('');
    await expectStatus('users-me', 401, { token: revokedToken }, ['unauthorized'], 'users-me with a revoked token');
    await expectStatus('users-revoke', 401, { token: revokedToken }, ['unauthorized']);
  });

  it('users-changePassword: 204, then the new password logs in; 401 and 422 with its codes', async () => {
    const own = await app.register();
    const res = await expectStatus('users-changePassword', 204, { token: own.token, body: { user: { current_password: 'correct horse', password: 'correct horse battery' } } });
    expect(res.text).toBe('');
    await expectStatus('users-authorize', 201, { body: { username: own.username, password: 'correct horse battery' } }, undefined, 'users-authorize with the new password');
    await expectStatus('users-changePassword', 401, { body: { user: { current_password: 'correct horse battery', password: 'correct horse' } } }, ['unauthorized']);
    await expectStatus('users-changePassword', 422, { token: own.token, body: { user: { current_password: 'wrong horse', password: 'correct horse' } } }, ['invalid']);
    await expectStatus('users-changePassword', 422, { token: own.token, body: { user: { current_password: 'correct horse battery', password: 'short' } } }, ['too_short']);
    await expectStatus('users-changePassword', 422, { token: own.token, body: { user: { current_password: 'correct horse battery', password: 'p'.repeat(201) } } }, ['too_long']);
    await expectStatus('users-changePassword', 422, { token: own.token, body: { password: 'correct horse' } }, ['parameter_missing']);
  });

  it('users-delete: 204, then the token is 401; 422 with its codes', async () => {
    const own = await app.register();
    await expectStatus('users-delete', 422, { token: own.token, body: { user: { password: 'wrong horse' } } }, ['invalid']);
    await expectStatus('users-delete', 422, { token: own.token, body: { user: {} } }, ['parameter_missing']);
    // A malformed Idempotency-Key, refused before anything runs: the user is still there.
    await expectStatus('users-delete', 422, { token: own.token, body: { user: { password: 'correct horse' } }, headers: { 'Idempotency-Key': '' } }, ['invalid']);
    await expectStatus('users-me', 200, { token: own.token }, undefined, 'users-me after a refused deletion');
    const res = await expectStatus('users-delete', 204, { token: own.token, body: { user: { password: 'correct horse' } } });
    expect(res.text).toBe('');
    await expectStatus('users-me', 401, { token: own.token }, ['unauthorized'], 'users-me after the deletion');
    await expectStatus('users-delete', 401, { token: own.token, body: { user: { password: 'correct horse' } } }, ['unauthorized']);
  });

  it('projects-create: 201 and 422', async () => {
    const res = await expectStatus('projects-create', 201, { token, body: { project: { name: 'Coffee' } } });
    expect(res.body.data.attributes).toMatchObject({ name: 'Coffee', slug: 'coffee', state: 'newed', description: '' });
    expect(res.body.meta).toEqual({ stability: 'unstable', notice: 'This output may change soon.' });
    ids.project = res.body.data.id;
    ids.otherProject = (await call('projects-create', { token: otherToken, body: { project: { name: 'Theirs' } } })).body.data.id;
    await expectStatus('projects-create', 422, { token, body: { project: { name: 'coffee' } } }, ['taken']);
    await expectStatus('projects-create', 422, { token, body: { project: { name: `a b${'c'.repeat(120)}` } } }, ['invalid', 'too_long']);
    await expectStatus('projects-create', 422, { token, body: { project: {} } }, ['parameter_missing']);
    await expectStatus('projects-create', 422, { token, body: { name: 'Coffee' } }, ['parameter_missing']);
  });

  it('projects-list: 200 with links on every page, and 400 for a bad page', async () => {
    for (let i = 1; i <= 25; i++) await call('projects-create', { token, body: { project: { name: `p${i}` } } });
    const first = await expectStatus('projects-list', 200, { token });
    expect(first.body.data).toHaveLength(25);
    expect(first.body.links).toEqual({
      first: `${app.baseUrl}/api/users/me/projects?page=1`,
      last: `${app.baseUrl}/api/users/me/projects?page=2`,
      next: `${app.baseUrl}/api/users/me/projects?page=2`,
    });
    const second = await expectStatus('projects-list', 200, { token, query: 'page=2' });
    expect(second.body.data).toHaveLength(1);
    expect(second.body.links.prev).toBe(`${app.baseUrl}/api/users/me/projects?page=1`);
    expect(second.body.links.next).toBeUndefined();
    const beyond = await expectStatus('projects-list', 200, { token, query: 'page=9' });
    expect(beyond.body.data).toEqual([]);
    for (const page of ['0', '-1', 'abc', '1.5', '']) {
      const res = await expectStatus('projects-list', 400, { token, query: `page=${page}` }, ['invalid'], `projects-list page=${page}`);
      expect(res.body.errors[0].source).toEqual({ parameter: 'page' });
    }
  });

  it('projects-get: 200', async () => {
    const res = await expectStatus('projects-get', 200, { token, id: ids.project });
    expect(res.body.data.relationships.tasks.data).toEqual([]);
  });

  it('projects-update: 200 and 422', async () => {
    const res = await expectStatus('projects-update', 200, { token, id: ids.project, body: { project: { description: 'Beans' } } });
    expect(res.body.data.attributes.description).toBe('Beans');
    await expectStatus('projects-update', 422, { token, id: ids.project, body: { project: { name: 'P1' } } }, ['taken']);
    await expectStatus('projects-update', 422, { token, id: ids.project, body: { project: { due_at: seconds(T0) + 9 * DAY } } }, ['cannot_be_set']);
    await expectStatus('projects-update', 422, { token, id: ids.project, body: { project: { description: 'x'.repeat(10_001) } } }, ['too_long']);
    await expectStatus('projects-update', 422, { token, id: ids.project, body: { project: { name: 'no spaces' } } }, ['invalid']);
    await expectStatus('projects-update', 422, { token, id: ids.project, body: {} }, ['parameter_missing']);
  });

  it('projects-changeState: every move answers 200, every refused one 422 with its code', async () => {
    const due = seconds(T0) + 30 * DAY;
    const id = ids.project;
    await expectStatus('projects-changeState', 422, { token, id, body: { project: {} } }, ['must_be_set']);
    await expectStatus('projects-changeState', 422, { token, id, body: { project: { state: 7 } } }, ['invalid']);
    await expectStatus('projects-changeState', 422, { token, id, body: { project: { state: 'paused' } } }, ['invalid_transition']);
    await expectStatus('projects-changeState', 422, { token, id, body: { project: { state: 'started' } } }, ['must_be_set']);
    await expectStatus('projects-changeState', 422, { token, id, body: { project: { state: 'started', due_at: due, finished_at: due } } }, ['cannot_be_set']);
    await expectStatus('projects-changeState', 422, { token, id, body: { project: { state: 'started', due_at: seconds(T0) } } }, ['cannot_be_before_started_at']);
    const started = await expectStatus('projects-changeState', 200, { token, id, body: { project: { state: 'started', due_at: due } } });
    expect(started.body.data.attributes).toMatchObject({ state: 'started', dueAt: due, isInProgress: true });
    await expectStatus('projects-update', 422, { token, id, body: { project: { due_at: seconds(T0) - DAY } } }, ['cannot_be_before_started_at']);
    await expectStatus('projects-update', 200, { token, id, body: { project: { due_at: due + DAY } } });
    await expectStatus('projects-changeState', 200, { token, id, body: { project: { state: 'paused' } } });
    await expectStatus('projects-changeState', 200, { token, id, body: { project: { state: 'started' } } });
    await expectStatus('projects-changeState', 422, { token, id, body: { project: { state: 'finished', finished_at: seconds(T0) + 2 * DAY } } }, ['cannot_be_after_today']);
    await expectStatus('projects-changeState', 422, { token, id, body: { project: { state: 'finished', finished_at: seconds(T0) - DAY } } }, ['cannot_be_before_started_at']);
    const list = (await call('projects-list', { token })).body.data as Json[];
    const others = list.filter((p) => p.id !== id).slice(0, 3).map((p) => p.id as number);
    for (const other of others.slice(0, 2)) await expectStatus('projects-changeState', 200, { token, id: other, body: { project: { state: 'started', due_at: due } } });
    await expectStatus('projects-changeState', 422, { token, id: others[2], body: { project: { state: 'started', due_at: due } } }, ['reached_max_started']);
    const finished = await expectStatus('projects-changeState', 200, { token, id, body: { project: { state: 'finished' } } });
    expect(finished.body.data.attributes).toMatchObject({ state: 'finished', finishedAt: seconds(T0) });
    ids.startedProject = others[0]!;
  });

  it('tasks-create: 201 in each initial state, and 422', async () => {
    const started = await expectStatus('tasks-create', 201, { token, body: { task: { label: 'Buy beans', project_id: ids.startedProject } } });
    expect(started.body.data.attributes.state).toBe('started');
    ids.task = started.body.data.id;
    const planned = await expectStatus('tasks-create', 201, { token, body: { task: { label: 'Plan', planned_at: seconds(T0) + DAY } } });
    expect(planned.body.data.attributes).toMatchObject({ state: 'planned', plannedCount: 1 });
    const newed = await expectStatus('tasks-create', 201, { token, body: { task: { label: 'Later', project_id: ids.project } } });
    expect(newed.body.data.attributes.state).toBe('newed');
    ids.newedTask = newed.body.data.id;
    ids.otherTask = (await call('tasks-create', { token: otherToken, body: { task: { label: 'Theirs' } } })).body.data.id;
    await expectStatus('tasks-create', 422, { token, body: { task: { label: 'x', project_id: ids.otherProject } } }, ['record_not_found']);
    await expectStatus('tasks-create', 422, { token, body: { task: {} } }, ['parameter_missing']);
    await expectStatus('tasks-create', 422, { token, body: { task: { label: 'x', planned_at: 'tomorrow' } } }, ['invalid']);
    await expectStatus('tasks-create', 422, { token, body: { task: { label: 'x'.repeat(1001) } } }, ['too_long']);
  });

  it('tasks-list: 200 with links, and 400 for a bad page', async () => {
    const res = await expectStatus('tasks-list', 200, { token });
    expect(res.body.data.map((t: Json) => t.id)).toContain(ids.task);
    expect(res.body.links).toEqual({ first: `${app.baseUrl}/api/users/me/tasks?page=1`, last: `${app.baseUrl}/api/users/me/tasks?page=1` });
    expect((await expectStatus('tasks-list', 200, { token, query: 'page=2' })).body.data).toEqual([]);
    await expectStatus('tasks-list', 400, { token, query: 'page=0' }, ['invalid']);
  });

  it('events-list: 200 with the newest id, a page after a cursor, 400 for a bad cursor, 410 for an expired one', async () => {
    const start = await expectStatus('events-list', 200, { token });
    expect(start.body.data).toEqual([]);
    const newest = start.body.meta.last_event_id;
    expect(Number(newest)).toBeGreaterThan(0);
    const page = await expectStatus('events-list', 200, { token, query: 'after=0' });
    expect(page.body.data.length).toBeGreaterThan(0);
    await expectStatus('events-list', 400, { token, query: 'after=-1' }, ['invalid']);
    const expired = await expectStatus('events-list', 410, { token, query: `after=${Number(newest) + 1000}` }, ['cursor_expired']);
    expect(expired.body.meta).toEqual({ last_event_id: newest });
  });

  it('events-ticket: 201 with a ticket', async () => {
    const res = await expectStatus('events-ticket', 201, { token });
    expect(res.body.data.attributes.ticket).toMatch(/^[A-Za-z0-9_-]{20,}$/);
  });

  it('tasks-get: 200', async () => {
    const res = await expectStatus('tasks-get', 200, { token, id: ids.task });
    expect(res.body.data.relationships.project.data).toEqual({ type: 'project', id: ids.startedProject });
  });

  it('tasks-update: 200 and 422', async () => {
    const res = await expectStatus('tasks-update', 200, { token, id: ids.task, body: { task: { label: 'Buy green beans', project_id: null } } });
    expect(res.body.data.relationships.project.data).toBeNull();
    await expectStatus('tasks-update', 422, { token, id: ids.task, body: { task: { project_id: ids.otherProject } } }, ['record_not_found']);
    await expectStatus('tasks-update', 422, { token, id: ids.task, body: { task: { label: '' } } }, ['invalid']);
    await expectStatus('tasks-update', 422, { token, id: ids.task, body: { task: { label: 'x'.repeat(1001) } } }, ['too_long']);
    await expectStatus('tasks-update', 422, { token, id: ids.task, body: { label: 'x' } }, ['parameter_missing']);
  });

  it('tasks-changeState: 200 and 422', async () => {
    const res = await expectStatus('tasks-changeState', 200, { token, id: ids.task, body: { task: { state: 'planned' } } });
    expect(res.body.data.attributes).toMatchObject({ state: 'planned', plannedCount: 1 });
    await expectStatus('tasks-changeState', 422, { token, id: ids.newedTask, body: { task: { state: 'finished' } } }, ['invalid_transition']);
    await expectStatus('tasks-changeState', 422, { token, id: ids.newedTask, body: { task: {} } }, ['must_be_set']);
    await expectStatus('tasks-changeState', 422, { token, id: ids.newedTask, body: { task: { state: 'started', planned_at: 1 } } }, ['cannot_be_set']);
    await expectStatus('tasks-changeState', 422, { token, id: ids.newedTask, body: { task: { state: false } } }, ['invalid']);
    await expectStatus('tasks-changeState', 422, { token, id: ids.newedTask, body: {} }, ['parameter_missing']);
  });

  it('tasks-reorder: 200 and 422', async () => {
    const res = await expectStatus('tasks-reorder', 200, { token, id: ids.newedTask, body: { task: { order: 1 } } });
    expect(res.body.data.map((t: Json) => t.attributes.order)).toEqual([1, 2, 3]);
    expect(res.body.data[0]).toEqual({ type: 'task', id: ids.newedTask, attributes: { order: 1 } });
    await expectStatus('tasks-reorder', 422, { token, id: ids.newedTask, body: { task: {} } }, ['parameter_missing']);
    await expectStatus('tasks-reorder', 422, { token, id: ids.newedTask, body: { task: { order: 0 } } }, ['invalid']);
    await expectStatus('tasks-reorder', 422, { token, id: ids.newedTask, body: { task: { order: '2' } } }, ['invalid']);
  });

  it('batch-apply: 200, 404, 412 and 422', async () => {
    const res = await expectStatus('batch-apply', 200, {
      token,
      body: {
        operations: [
          { op: 'projects.create', ref: 'b', input: { project: { name: 'Batched' } } },
          { op: 'tasks.create', input: { task: { label: 'batched', project_id: { ref: 'b' } } } },
        ],
      },
    });
    expect(res.body.data.map((r: Json) => r.status)).toEqual([201, 201]);
    const one = (operation: Json) => ({ token, body: { operations: [operation] } });
    await expectStatus('batch-apply', 404, one({ op: 'tasks.update', input: { id: ids.otherTask, task: { label: 'x' } } }), ['record_not_found']);
    await expectStatus('batch-apply', 412, one({ op: 'tasks.update', input: { id: ids.task, task: { label: 'x' } }, if_match: '"stale"' }), ['precondition_failed']);
    await expectStatus('batch-apply', 422, { token, body: {} }, ['parameter_missing']);
    await expectStatus('batch-apply', 422, { token, body: { operations: [] } }, ['invalid']);
    await expectStatus('batch-apply', 422, one({ op: 'projects.create', input: { project: { name: 'Batched' } } }), ['taken']);
    await expectStatus('batch-apply', 422, one({ op: 'tasks.create', input: { task: { label: 'x', project_id: ids.otherProject } } }), ['record_not_found']);
  });

  // --- Webhooks (API-CONTRACT.md §14). No deliverer runs in a test app: what the service
  // stores for one (a queued test event, the previous secret, attempts) is read in its rows.
  const HOOK = 'https://hooks.example.com/contract';
  const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;
  let firstSecret = '';
  const sql = <T = Json>(statement: string, params: unknown[] = []) => app.orm.em.fork().execute<T[]>(statement, params);
  const userIdOf = async (userToken: string) => (await app.request('GET', '/api/users/me', { token: userToken })).body.data.id as number;

  it('webhooks-create: 201 with its secret, 422 with its codes, and limit_reached at the 11th', async () => {
    const newest = (await call('events-list', { token })).body.meta.last_event_id;
    const res = await expectStatus('webhooks-create', 201, { token, body: { webhook: { url: HOOK, events: ['project.created', 'task.*'], description: 'Contract' } } });
    expect(res.body.data.attributes).toEqual({
      url: HOOK, events: ['task.*', 'project.created'], description: 'Contract', state: 'enabled', disabledReason: null,
      createdAt: seconds(T0), lastEventId: newest,
    });
    expect(res.body.meta.secret).toMatch(SECRET);
    expect(Buffer.from(res.body.meta.secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
    firstSecret = res.body.meta.secret;
    ids.webhook = res.body.data.id;
    const defaults = await expectStatus('webhooks-create', 201, { token, body: { webhook: { url: 'https://hooks.example.com/spare' } } });
    expect(defaults.body.data.attributes).toMatchObject({ events: ['*'], description: '' });
    expect(defaults.body.meta.secret).not.toBe(firstSecret);
    ids.spareWebhook = defaults.body.data.id;
    ids.otherWebhook = (await expectStatus('webhooks-create', 201, { token: otherToken, body: { webhook: { url: 'https://hooks.example.com/theirs' } } })).body.data.id;

    const refused = async (webhook: unknown, codes: string[], pointer: string) => {
      const r = await expectStatus('webhooks-create', 422, { token, body: webhook === undefined ? {} : { webhook } }, codes, `webhooks-create ${JSON.stringify(webhook)?.slice(0, 80)}`);
      expect(r.body.errors.map((e: Json) => e.source?.pointer)).toEqual(codes.map(() => pointer));
    };
    await refused(undefined, ['parameter_missing'], '/webhook');
    await refused({ events: ['*'] }, ['parameter_missing'], '/webhook/url');
    for (const url of [
      'http://hooks.example.com/x', 'https://user:pass@hooks.example.com/x', 'hooks.example.com/x',
      'https://ten.private.test/x', 'https://mixed.private.test/x', 'https://127.0.0.1/x', 'https://[::1]/x', 'https://unknown.invalid/x', 'https://hooks.example.com/\u0000',
    ]) {
      await refused({ url }, ['invalid'], '/webhook/url');
    }
    await refused({ url: HOOK, events: [] }, ['invalid'], '/webhook/events');
    await refused({ url: HOOK, events: 'task.*' }, ['invalid'], '/webhook/events');
    await refused({ url: HOOK, events: ['task.deleted'] }, ['invalid'], '/webhook/events/0');
    await refused({ url: `https://hooks.example.com/${'x'.repeat(2_048)}` }, ['invalid'], '/webhook/url');
    await refused({ url: HOOK, description: 'x'.repeat(1_001) }, ['too_long'], '/webhook/description');

    // At most 10 a user: the 11th is refused, and deleting one makes room again.
    const filler = await app.register();
    const made: number[] = [];
    for (let i = 0; i < 10; i++) made.push((await expectStatus('webhooks-create', 201, { token: filler.token, body: { webhook: { url: `${HOOK}/${i}` } } })).body.data.id);
    const eleventh = { token: filler.token, body: { webhook: { url: `${HOOK}/10` } } };
    const full = await expectStatus('webhooks-create', 422, eleventh, ['limit_reached']);
    expect(full.body.errors[0].source).toEqual({ pointer: '/webhook' });
    expect((await expectStatus('webhooks-list', 200, { token: filler.token })).body.data.map((w: Json) => w.id)).toEqual(made);
    await expectStatus('webhooks-delete', 204, { token: filler.token, id: made[0] });
    await expectStatus('webhooks-create', 201, eleventh);
    await expectStatus('webhooks-create', 422, eleventh, ['limit_reached']);
  });

  it('webhooks-list: 200 with the user\'s webhooks only, oldest first', async () => {
    const res = await expectStatus('webhooks-list', 200, { token });
    expect(res.body.data.map((w: Json) => w.id)).toEqual([ids.webhook, ids.spareWebhook]);
    expect(res.body.data.every((w: Json) => w.type === 'webhook' && !('secret' in w.attributes))).toBe(true);
    expect((await expectStatus('webhooks-list', 200, { token: otherToken })).body.data.map((w: Json) => w.id)).toEqual([ids.otherWebhook]);
  });

  it('webhooks-get: 200', async () => {
    const res = await expectStatus('webhooks-get', 200, { token, id: ids.webhook });
    expect(res.body.data).toMatchObject({ type: 'webhook', id: ids.webhook, attributes: { url: HOOK, state: 'enabled' } });
  });

  it('webhooks-update: 200 and 422; enabling when its next event is no longer kept is 410, until a replay from a kept id', async () => {
    const id = ids.webhook;
    const moved = await expectStatus('webhooks-update', 200, { token, id, body: { webhook: { url: `${HOOK}/moved`, events: ['project.*'], description: 'Moved' } } });
    expect(moved.body.data.attributes).toMatchObject({ url: `${HOOK}/moved`, events: ['project.*'], description: 'Moved', state: 'enabled' });
    const disabled = await expectStatus('webhooks-update', 200, { token, id, body: { webhook: { state: 'disabled' } } });
    expect(disabled.body.data.attributes).toMatchObject({ state: 'disabled', disabledReason: null });
    expect((await expectStatus('webhooks-update', 200, { token, id, body: { webhook: { state: 'enabled' } } })).body.data.attributes.state).toBe('enabled');
    await expectStatus('webhooks-update', 200, { token, id, body: { webhook: { url: HOOK, events: ['task.*', 'project.created'], description: 'Contract' } } });
    await expectStatus('webhooks-update', 422, { token, id, body: {} }, ['parameter_missing']);
    await expectStatus('webhooks-update', 422, { token, id, body: { webhook: { url: 'https://loopback.private.test/x' } } }, ['invalid']);
    await expectStatus('webhooks-update', 422, { token, id, body: { webhook: { state: 'paused' } } }, ['invalid']);
    await expectStatus('webhooks-update', 422, { token, id, body: { webhook: { events: ['*', 'nothing'] } } }, ['invalid']);
    await expectStatus('webhooks-update', 422, { token, id, body: { webhook: { description: 'x'.repeat(1_001) } } }, ['too_long']);
    expect((await call('webhooks-get', { token, id })).body.data.attributes).toMatchObject({ url: HOOK, description: 'Contract', state: 'enabled' });

    // A user with one event; its webhook starts after it, is disabled, and retention then removes
    // the first two events, the one after its place among them.
    const u = await app.register();
    await expectStatus('tasks-create', 201, { token: u.token, body: { task: { label: 'first' } } });
    const hook = (await expectStatus('webhooks-create', 201, { token: u.token, body: { webhook: { url: HOOK } } })).body.data;
    expect(hook.attributes.lastEventId).toBe('1');
    await expectStatus('webhooks-update', 200, { token: u.token, id: hook.id, body: { webhook: { state: 'disabled' } } });
    for (const label of ['second', 'third']) await expectStatus('tasks-create', 201, { token: u.token, body: { task: { label } } });
    await sql(`update events set at = at - interval '40 days' where user_id = ? and seq <= 2`, [u.id]);
    const { pruneEvents } = await import('../../src/changes/event.store.js');
    expect(await pruneEvents(app.orm.em.fork(), new Date(T0 - 30 * DAY * 1000))).toBe(2);
    const expired = await expectStatus('webhooks-update', 410, { token: u.token, id: hook.id, body: { webhook: { state: 'enabled' } } }, ['cursor_expired']);
    expect(expired.body.meta).toEqual({ last_event_id: '3' });
    expect((await call('webhooks-get', { token: u.token, id: hook.id })).body.data.attributes).toMatchObject({ state: 'disabled', lastEventId: '1' });
    const older = await expectStatus('webhooks-replay', 410, { token: u.token, id: hook.id, body: { replay: { after: '1' } } }, ['cursor_expired']);
    expect(older.body).toMatchObject({ errors: [{ source: { pointer: '/replay/after' } }], meta: { last_event_id: '3' } });
    const replayed = await expectStatus('webhooks-replay', 202, { token: u.token, id: hook.id, body: { replay: { after: '2' } } });
    expect(replayed.body.data.attributes).toMatchObject({ state: 'disabled', lastEventId: '2' });
    const enabled = await expectStatus('webhooks-update', 200, { token: u.token, id: hook.id, body: { webhook: { state: 'enabled' } } });
    expect(enabled.body.data.attributes).toMatchObject({ state: 'enabled', disabledReason: null, lastEventId: '2' });
  });

  it('webhooks-deliveries: 200 with the attempts newest first, 50 a page, and 400 for a bad page', async () => {
    const empty = await expectStatus('webhooks-deliveries', 200, { token, id: ids.webhook });
    const path = `${app.baseUrl}/api/webhooks/${ids.webhook}/deliveries`;
    expect(empty.body).toEqual({ data: [], links: { first: `${path}?page=1`, last: `${path}?page=1` } });
    // 51 attempts as the deliverer records them: delivered, failed (with its next attempt) and blocked in turn.
    await sql(
      `insert into webhook_deliveries (user_id, webhook_id, event_id, event_type, attempt, at, outcome, http_status, error, duration_ms, next_attempt_at)
       select ?, ?, (100 + g)::text, 'task.updated', 1 + g % 3, ?::timestamptz + g * interval '1 second',
              (array['delivered', 'failed', 'blocked'])[1 + g % 3], (array[204, 503, null])[1 + g % 3],
              (array[null, 'HTTP 503', 'The URL''s host resolves to 10.1.2.3, a private address; webhooks go to public addresses only.'])[1 + g % 3],
              10 + g, case when g % 3 = 1 then ?::timestamptz + (g + 60) * interval '1 second' end
         from generate_series(1, 51) g`,
      [await userIdOf(token), ids.webhook, new Date(T0), new Date(T0)],
    );
    const first = await expectStatus('webhooks-deliveries', 200, { token, id: ids.webhook });
    expect(first.body.data).toHaveLength(50);
    expect(first.body.links).toEqual({ first: `${path}?page=1`, last: `${path}?page=2`, next: `${path}?page=2` });
    expect(first.body.data.map((d: Json) => d.attributes.eventId)).toEqual(Array.from({ length: 50 }, (_, i) => String(151 - i)));
    expect(first.body.data.slice(0, 3).map((d: Json) => d.attributes)).toEqual([
      { eventId: '151', eventType: 'task.updated', attempt: 1, at: seconds(T0) + 51, outcome: 'delivered', httpStatus: 204, error: null, durationMs: 61, nextAttemptAt: 0 },
      { eventId: '150', eventType: 'task.updated', attempt: 3, at: seconds(T0) + 50, outcome: 'blocked', httpStatus: null, error: expect.stringContaining('public addresses only'), durationMs: 60, nextAttemptAt: 0 },
      { eventId: '149', eventType: 'task.updated', attempt: 2, at: seconds(T0) + 49, outcome: 'failed', httpStatus: 503, error: 'HTTP 503', durationMs: 59, nextAttemptAt: seconds(T0) + 109 },
    ]);
    const second = await expectStatus('webhooks-deliveries', 200, { token, id: ids.webhook, query: 'page=2' });
    expect(second.body.data.map((d: Json) => d.attributes.eventId)).toEqual(['101']);
    expect(second.body.links).toEqual({ first: `${path}?page=1`, last: `${path}?page=2`, prev: `${path}?page=1` });
    expect((await expectStatus('webhooks-deliveries', 200, { token, id: ids.spareWebhook })).body.data).toEqual([]);
    for (const page of ['0', '-1', 'abc', '01', '']) {
      const res = await expectStatus('webhooks-deliveries', 400, { token, id: ids.webhook, query: `page=${page}` }, ['invalid'], `webhooks-deliveries page=${page}`);
      expect(res.body.errors[0].source).toEqual({ parameter: 'page' });
    }
  });

  it('webhooks-replay: 202 moving its place back, 410 beyond the log, and 422', async () => {
    const newest = (await call('events-list', { token })).body.meta.last_event_id as string;
    const res = await expectStatus('webhooks-replay', 202, { token, id: ids.webhook, body: { replay: { after: '0' } } });
    expect(res.body.data).toMatchObject({ id: ids.webhook, attributes: { state: 'enabled', lastEventId: '0' } });
    const beyond = await expectStatus('webhooks-replay', 410, { token, id: ids.webhook, body: { replay: { after: String(Number(newest) + 1) } } }, ['cursor_expired']);
    expect(beyond.body).toMatchObject({ errors: [{ source: { pointer: '/replay/after' } }], meta: { last_event_id: newest } });
    await expectStatus('webhooks-replay', 422, { token, id: ids.webhook, body: {} }, ['parameter_missing']);
    await expectStatus('webhooks-replay', 422, { token, id: ids.webhook, body: { replay: {} } }, ['parameter_missing']);
    for (const after of ['01', '-1', 'abc', 5, null]) {
      const r = await expectStatus('webhooks-replay', 422, { token, id: ids.webhook, body: { replay: { after } } }, ['invalid'], `webhooks-replay after ${JSON.stringify(after)}`);
      expect(r.body.errors[0].source).toEqual({ pointer: '/replay/after' });
    }
  });

  it('webhooks-test: 202, a webhook.test event of its own queued', async () => {
    const res = await expectStatus('webhooks-test', 202, { token, id: ids.webhook });
    expect(res.body.data.id).toBe(ids.webhook);
    const [row] = await sql<{ test_events: Json }>('select test_events from webhooks where id = ?', [ids.webhook]);
    expect(row!.test_events).toEqual([{ id: expect.stringMatching(/^msg_[A-Za-z0-9_-]{16}$/), at: seconds(T0) }]);
  });

  it('webhooks-rotateSecret: 201 with a new secret, the previous one signing beside it for 24 hours', async () => {
    const res = await expectStatus('webhooks-rotateSecret', 201, { token, id: ids.webhook });
    expect(res.body.data.id).toBe(ids.webhook);
    expect(res.body.meta.secret).toMatch(SECRET);
    expect(res.body.meta.secret).not.toBe(firstSecret);
    const [row] = await sql<{ secret: string; retired_secrets: string[]; retired_until: Date[] }>(
      'select secret, retired_secrets, retired_until from webhooks where id = ?', [ids.webhook],
    );
    expect(row).toMatchObject({ secret: res.body.meta.secret, retired_secrets: [firstSecret] });
    expect(row!.retired_until.map((d) => new Date(d).getTime())).toEqual([T0 + 24 * 3_600_000]);
  });

  it('tokens-create: 201 with its secret, 422 with its codes, limit_reached at the 51st live one, 403 beyond the maker\'s scopes', async () => {
    const expires_at = seconds(T0) + 30 * DAY;
    const res = await expectStatus('tokens-create', 201, { token, body: { token: { name: 'Contract', scopes: ['tasks:read', 'tokens:manage'], expires_at } } });
    expect(res.body.data.attributes).toEqual({ name: 'Contract', kind: 'personal', scopes: ['tasks:read', 'tokens:manage'], createdAt: seconds(T0), expiresAt: expires_at, lastUsedAt: 0, current: false });
    expect(res.body.meta.secret).toMatch(/^plnr_/);
    ids.token = res.body.data.id;
    personalSecret = res.body.meta.secret;
    ids.spareToken = (await expectStatus('tokens-create', 201, { token, body: { token: { name: 'Spare', scopes: ['events:read'], expires_at } } })).body.data.id;
    ids.otherToken = (await expectStatus('tokens-create', 201, { token: otherToken, body: { token: { name: 'Theirs', scopes: ['tasks:read'], expires_at } } })).body.data.id;
    await expectStatus('tokens-create', 422, { token, body: {} }, ['parameter_missing']);
    await expectStatus('tokens-create', 422, { token, body: { token: { name: 'x'.repeat(101), scopes: ['tasks:read'], expires_at } } }, ['too_long']);
    await expectStatus('tokens-create', 422, { token, body: { token: { name: 'x', scopes: ['tasks:read'], expires_at: seconds(T0) - 1 } } }, ['invalid']);
    // A personal token gives no scope it lacks, and never tokens:manage or account.
    const minted = await expectStatus('tokens-create', 403, { token: personalSecret, body: { token: { name: 'x', scopes: ['tasks:write'], expires_at } } }, ['insufficient_scope']);
    expect(minted.body.meta).toEqual({ required_scope: 'tasks:write' });
    // The 51st live personal token of a user.
    const crowded = (await app.request('POST', '/api/users', { body: { user: { username: 'crowded', password: 'correct horse' } } })).body.meta.token as string;
    for (let i = 0; i < 50; i++) await expectStatus('tokens-create', 201, { token: crowded, body: { token: { name: `t${i}`, scopes: ['tasks:read'], expires_at } } });
    const full = await expectStatus('tokens-create', 422, { token: crowded, body: { token: { name: 't50', scopes: ['tasks:read'], expires_at } } }, ['limit_reached']);
    expect(full.body.errors[0].source).toEqual({ pointer: '/token' });
  });

  it('tokens-list, tokens-current, tokens-get and tokens-revoke: 200 and 204; 400 for a bad page, 404 for another user\'s id', async () => {
    const list = await expectStatus('tokens-list', 200, { token });
    expect(list.body.data.map((t: Json) => t.id)).toEqual(expect.arrayContaining([ids.token, ids.spareToken]));
    await expectStatus('tokens-list', 400, { token, query: 'page=0' }, ['invalid']);
    const current = await expectStatus('tokens-current', 200, { token: personalSecret });
    expect(current.body.data).toMatchObject({ id: ids.token, attributes: { current: true, lastUsedAt: seconds(T0) } });
    await expectStatus('tokens-get', 200, { token, id: ids.token });
    await expectStatus('tokens-get', 404, { token, id: ids.otherToken }, ['record_not_found']);
    const doomed = (await expectStatus('tokens-create', 201, { token, body: { token: { name: 'Doomed', scopes: ['tasks:read'], expires_at: seconds(T0) + DAY } } })).body.data.id;
    expect((await expectStatus('tokens-revoke', 204, { token, id: doomed })).text).toBe('');
    await expectStatus('tokens-revoke', 404, { token, id: doomed }, ['record_not_found']);
  });

  it('every operation that needs a scope is 403 insufficient_scope, with WWW-Authenticate and meta.required_scope, for a token without it', async () => {
    const expires_at = seconds(T0) + DAY;
    const narrow: Record<string, string> = {};
    for (const scope of ['events:read', 'tasks:read'] as const) {
      narrow[scope] = (await expectStatus('tokens-create', 201, { token, body: { token: { name: scope, scopes: [scope], expires_at } } })).body.meta.secret;
    }
    const scoped = operations.filter((o) => o.op.responses['403']);
    expect(scoped.length).toBeGreaterThan(25);
    for (const operation of scoped) {
      // A token with another scope: events:read, or for the change log's operations tasks:read.
      const other = operation.id.startsWith('events-') ? narrow['tasks:read']! : narrow['events:read']!;
      const body = operation.id === 'batch-apply' ? { operations: [{ op: 'tasks.create', input: { task: { label: 'x' } } }] } : operation.op.requestBody ? {} : undefined;
      const res = await expectStatus(operation.id, 403, { token: other, id: 1, body }, ['insufficient_scope']);
      const scope = res.body.meta.required_scope;
      expect(operation.op.security, operation.id).toEqual([{ token: [operation.id === 'batch-apply' ? [] : scope].flat() }]);
      expect(res.headers.get('www-authenticate'), operation.id).toBe(`Bearer error="insufficient_scope", scope="${scope}"`);
    }
  });

  it('every protected operation is 401 without a token, with an unknown one, and with a revoked one', async () => {
    const secured = operations.filter((o) => o.op.security?.length);
    // Every operation but registration and login (API-CONTRACT.md §3).
    expect(secured).toHaveLength(operations.length - 2);
    for (const operation of secured) {
      for (const bad of [undefined, 'not-a-token', revokedToken]) {
        await expectStatus(
          operation.id, 401,
          { token: bad, id: ids.project, body: operation.op.requestBody ? {} : undefined },
          ['unauthorized'], `${operation.id} with token ${bad}`,
        );
      }
    }
  });

  it('every operation on a path id is 404 for an unknown, malformed or foreign id', async () => {
    const withId = operations.filter((o) => o.path.includes('{id}'));
    expect(withId).toHaveLength(17);
    const foreignIds: Record<string, number> = { project: ids.otherProject!, task: ids.otherTask!, webhook: ids.otherWebhook!, token: ids.otherToken! };
    // Bodies the operation accepts, so that only the id is at fault.
    const bodies: Record<string, unknown> = { 'webhooks-update': { webhook: { description: 'x' } }, 'webhooks-replay': { replay: { after: '0' } } };
    const theirs = (await expectStatus('webhooks-get', 200, { token: otherToken, id: ids.otherWebhook })).body;
    for (const operation of withId) {
      const resource = { projects: 'project', tasks: 'task', webhooks: 'webhook', tokens: 'token' }[operation.path.split('/')[2]!]!;
      const body = bodies[operation.id] ?? (operation.method === 'patch' ? { [resource]: { label: 'x' } } : operation.op.requestBody ? { [resource]: { state: 'started', order: 1 } } : undefined);
      for (const id of [2_147_483_647, 99_999_999_999, foreignIds[resource]!, 'abc', '0', '01', '1.0', '-1']) {
        const res = await expectStatus(operation.id, 404, { token, id, body }, ['record_not_found'], `${operation.id} id ${id}`);
        expect(res.body.errors[0].source).toEqual({ pointer: `/${resource}` });
      }
    }
    // Another user's webhook is as it was: not changed, replayed, tested, given a new secret or deleted.
    expect((await expectStatus('webhooks-get', 200, { token: otherToken, id: ids.otherWebhook })).body).toEqual(theirs);
    const [row] = await app.orm.em.fork().execute<Array<{ test_events: unknown; retired_secrets: unknown }>>(
      'select test_events, retired_secrets from webhooks where id = ?', [ids.otherWebhook],
    );
    expect(row).toEqual({ test_events: [], retired_secrets: [] });
  });

  it('every operation is 400 invalid_json, 413 and 415 on a broken, big or non-JSON body, and ignores a valid body it does not take', async () => {
    expect(operations.filter((o) => o.op.requestBody)).toHaveLength(17);
    for (const operation of operations) {
      if (operation.id === 'users-revoke') continue; // its success would end the session; covered below
      // The webhook a delete with an ignored body removes is a spare one; the others stay.
      const webhook = operation.id === 'webhooks-delete' ? ids.spareWebhook : ids.webhook;
      // A token read or revoked with an ignored body is a spare one.
      const id = operation.path.startsWith('/api/projects') ? ids.startedProject : operation.path.startsWith('/api/webhooks') ? webhook
        : operation.path.startsWith('/api/tokens') ? ids.spareToken : ids.task;
      const send = (body: string, contentType: string | undefined, what: string) => rawCall(operation, { token, id }, body, contentType, what);
      const json = 'application/json';
      expect((await send('{"project": ', json, `${operation.id} broken JSON`)).status).toBe(400);
      expect((await send(BIG_BODY, json, `${operation.id} big body`)).status).toBe(413);
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/jsonx', undefined]) {
        const res = await send('{}', type, `${operation.id} ${type ?? 'no content type'}`);
        expect(res.status, `${operation.id} ${type}: ${res.text}`).toBe(415);
        expect(codesOf(res)).toEqual(['unsupported_media_type']);
      }
      if (!operation.op.requestBody) {
        // A valid JSON body on a GET or DELETE is read and ignored.
        const res = await send('{"ignored": true}', 'application/json; charset=utf-8', `${operation.id} with an ignored body`);
        expect(res.status, `${operation.id}: ${res.text}`).toBeLessThan(300);
      }
      if (operation.id.endsWith('-list')) {
        // Ignored means ignored: a body naming another page does not change the answer.
        const plain = await call(operation.id, { token }, `${operation.id} without a body`);
        const withBody = await send('{"page": 2, "id": 1}', 'application/json', `${operation.id} with a page in its body`);
        expect(withBody.body).toEqual(plain.body);
      }
    }
    for (const [body, type, status] of [['nope', json(), 400], [BIG_BODY, json(), 413], ['{}', 'text/plain', 415]] as const) {
      const res = await rawCall(operationById.get('users-revoke')!, { token }, body, type, `users-revoke with body ${body.slice(0, 10)}`);
      expect(res.status).toBe(status);
    }
    await expectStatus('users-me', 200, { token }, undefined, 'users-me after the refused revokes');
  });

  it('projects-delete: 204, then 404', async () => {
    const res = await expectStatus('projects-delete', 204, { token, id: ids.project });
    expect(res.text).toBe('');
    await expectStatus('projects-delete', 404, { token, id: ids.project }, ['record_not_found']);
    const task = await expectStatus('tasks-get', 200, { token, id: ids.newedTask });
    expect(task.body.data.attributes.state).toBe('abandoned');
  });

  it('webhooks-delete: 204, its attempts gone with it, then 404', async () => {
    const id = (await expectStatus('webhooks-create', 201, { token, body: { webhook: { url: `${HOOK}/doomed` } } })).body.data.id;
    await sql(
      `insert into webhook_deliveries (user_id, webhook_id, event_id, event_type, attempt, at, outcome, http_status, error, duration_ms, next_attempt_at)
       values (?, ?, '1', 'task.created', 1, ?, 'delivered', 200, null, 5, null)`,
      [await userIdOf(token), id, new Date(T0)],
    );
    expect((await expectStatus('webhooks-deliveries', 200, { token, id })).body.data).toHaveLength(1);
    const res = await expectStatus('webhooks-delete', 204, { token, id });
    expect(res.text).toBe('');
    await expectStatus('webhooks-delete', 404, { token, id }, ['record_not_found']);
    await expectStatus('webhooks-deliveries', 404, { token, id }, ['record_not_found']);
    expect(await sql('select 1 from webhook_deliveries where webhook_id = ?', [id])).toEqual([]);
    expect((await expectStatus('webhooks-list', 200, { token })).body.data.map((w: Json) => w.id)).toEqual([ids.webhook]);
  });

  it('answers random requests only with documented statuses and codes (never a 5xx)', async () => {
    const value = fc.oneof(
      fc.integer({ min: -3, max: 3 }),
      fc.constantFrom(seconds(T0) - DAY, seconds(T0) + 30 * DAY, 2 ** 31, 2 ** 53, 1.5, -0),
      fc.string({ maxLength: 12 }),
      fc.constantFrom('started', 'paused', 'finished', 'planned', 'newed', 'abandoned', 'x'.repeat(120), 'a b', '\u0000', ''),
      fc.constantFrom(null, true, false, [], {}, [1], { a: 1 }),
      // Webhooks: URLs public, private and unknown, event patterns good and bad, event ids.
      fc.constantFrom(HOOK, 'https://ten.private.test/x', 'https://unknown.invalid/x', 'http://hooks.example.com/x', ['*'], ['task.*', 'x'], '0', '01', 'enabled', 'disabled'),
    );
    const members = fc.dictionary(
      fc.oneof(
        fc.constantFrom('name', 'description', 'due_at', 'finished_at', 'state', 'label', 'planned_at', 'project_id', 'order', 'username', 'password', 'url', 'events', 'after'),
        fc.string({ maxLength: 6 }),
      ),
      value,
      { maxKeys: 4 },
    );
    const body = fc.oneof(
      { weight: 4, arbitrary: fc.tuple(fc.constantFrom('project', 'task', 'user', 'webhook', 'replay'), members).map(([wrapper, m]) => ({ [wrapper]: m })) },
      { weight: 1, arbitrary: members },
      { weight: 1, arbitrary: value },
    );
    const id = fc.oneof(fc.constantFrom(ids.startedProject, ids.task, ids.otherProject, ids.otherTask, ids.webhook, ids.otherWebhook, 1), fc.string({ maxLength: 5 }));
    const page = fc.oneof(fc.integer({ min: -2, max: 4 }).map(String), fc.string({ maxLength: 5 }));
    for (const operation of operations) {
      // These would end the session the other calls use (a token's id is any small number).
      if (operation.id === 'users-revoke' || operation.id === 'tokens-revoke') continue;
      await fc.assert(
        fc.asyncProperty(body, id, page, async (b, i, p) => {
          const options: CallOptions = { token, id: operation.path.includes('{id}') ? i : undefined };
          if (operation.op.requestBody) options.body = b;
          if (operation.id.endsWith('-list') || operation.id === 'webhooks-deliveries') options.query = `page=${encodeURIComponent(p)}`;
          if (typeof options.id === 'string' && (options.id === '' || options.id.includes('/') || options.id === '.' || options.id === '..')) return;
          const res = await call(operation.id, options, `${operation.id} ${JSON.stringify(options)}`);
          expect(res.status, `${operation.id} ${JSON.stringify(options)}: ${res.text}`).toBeLessThan(500);
        }),
        { numRuns: 40 },
      );
    }
  });

  it('304 for a current If-None-Match on a read, 412 for a matching one on a write and for a stale If-Match, 409 while a key runs, 422 for a bad key or a reused one', async () => {
    const userId = (await app.request('GET', '/api/users/me', { token })).body.data.id as number;
    const project = (await expectStatus('projects-create', 201, { token, body: { project: { name: 'Conditional' } } })).body.data.id;
    const task = (await expectStatus('tasks-create', 201, { token, body: { task: { label: 'conditional', project_id: project } } })).body.data.id;
    const bodies: Record<string, unknown> = {
      'projects-create': { project: { name: 'Conditional2' } },
      'projects-update': { project: { description: 'c' } },
      'projects-changeState': { project: { state: 'paused' } },
      'tasks-create': { task: { label: 'c' } },
      'tasks-update': { task: { label: 'c' } },
      'tasks-changeState': { task: { state: 'planned' } },
      'tasks-reorder': { task: { order: 1 } },
      'batch-apply': { operations: [{ op: 'tasks.create', input: { task: { label: 'c' } } }] },
      'webhooks-create': { webhook: { url: 'https://hooks.example.com/conditional' } },
      'webhooks-update': { webhook: { description: 'c' } },
      'webhooks-replay': { replay: { after: '0' } },
      'users-update': { user: { time_zone: 'Europe/Paris' } },
      'tokens-create': { token: { name: 'Keyed2', scopes: ['tasks:read'], expires_at: seconds(T0) + DAY } },
      // The password stays what it was: later tests log in with it.
      'users-changePassword': { user: { current_password: 'correct horse battery staple', password: 'correct horse battery staple' } },
    };
    const hook = (await expectStatus('webhooks-create', 201, { token, body: { webhook: { url: 'https://hooks.example.com/keyed' } } })).body.data.id;
    const revoked = (await expectStatus('tokens-create', 201, { token, body: { token: { name: 'Keyed', scopes: ['tasks:read'], expires_at: seconds(T0) + DAY } } })).body.data.id;
    const idFor = (operation: Operation) =>
      operation.path.startsWith('/api/projects') ? project : operation.path.startsWith('/api/webhooks') ? hook : operation.path.startsWith('/api/tokens') ? revoked : task;
    const headersOf = (operation: Operation) => (operation.op.parameters ?? []).filter((p: Json) => p.in === 'header').map((p: Json) => p.name);
    const db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
    try {
      // Deletes last: they end the project the others use.
      for (const operation of [...operations].sort((a, b) => Number(a.method === 'delete') - Number(b.method === 'delete'))) {
        const headers = headersOf(operation);
        const base = { token, id: operation.path.includes('{id}') ? idFor(operation) : undefined, body: bodies[operation.id] };
        if (headers.includes('If-None-Match') && operation.method === 'get') {
          const first = await expectStatus(operation.id, 200, base);
          const etag = first.headers.get('etag')!;
          await expectStatus(operation.id, 304, { ...base, headers: { 'If-None-Match': etag } });
        } else if (headers.includes('If-None-Match')) {
          // On a write, a tag that matches (`*` matches any resource) is 412, never 304.
          await expectStatus(operation.id, 412, { ...base, headers: { 'If-None-Match': '*' } }, ['precondition_failed']);
        }
        if (headers.includes('If-Match')) {
          await expectStatus(operation.id, 412, { ...base, headers: { 'If-Match': '"stale"' } }, ['precondition_failed']);
        }
        if (headers.includes('Idempotency-Key')) {
          await expectStatus(operation.id, 422, { ...base, headers: { 'Idempotency-Key': '' } }, ['invalid']);
          const key = `contract-${operation.id}`;
          const lock = keyLock(userId, key);
          await db.query('select pg_advisory_lock($1::bigint)', [lock]);
          try {
            await expectStatus(operation.id, 409, { ...base, headers: { 'Idempotency-Key': key } }, ['request_in_progress']);
          } finally {
            await db.query('select pg_advisory_unlock($1::bigint)', [lock]);
          }
          const ran = await call(operation.id, { ...base, headers: { 'Idempotency-Key': key } });
          const replayed = await call(operation.id, { ...base, headers: { 'Idempotency-Key': key } });
          expect([replayed.status, replayed.text], operation.id).toEqual([ran.status, ran.text]);
          expect(replayed.headers.get('idempotent-replayed'), operation.id).toBe('true');
          // Another body, or for an operation that takes none (a delete, a webhook's test) another
          // path; one with neither (a stream ticket) is the only request of its procedure: the
          // key sent to another procedure is reused there.
          if (!operation.op.requestBody && !operation.path.includes('{id}')) {
            await expectStatus('users-update', 422, { token, body: bodies['users-update'], headers: { 'Idempotency-Key': key } }, ['idempotency_key_reused']);
          } else {
            const other = !operation.op.requestBody ? { ...base, id: idFor(operation) + 1000 } : { ...base, body: { ...(base.body as object), other: true } };
            await expectStatus(operation.id, 422, { ...other, headers: { 'Idempotency-Key': key } }, ['idempotency_key_reused']);
          }
        }
      }
    } finally {
      await db.end();
    }
  });

  it('covered the success and every documented error status of every operation (but 429, 500, 503)', () => {
    const missing: string[] = [];
    for (const { id, op } of operations) {
      for (const status of Object.keys(op.responses)) {
        if (['429', '500', '503'].includes(status)) continue;
        if (!seen.has(`${id} ${status}`)) missing.push(`${id} ${status}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it("left no entity in the ORM's root entity manager: every operation's unit of work ran in a fork", () => {
    // Requests share the root (src/http/app.ts): an entity left in it would be seen by the next request.
    expect([...app.orm.em.getUnitOfWork(false).getIdentityMap()].map((e) => e.constructor.name)).toEqual([]);
  });
});

describe('429 rate_limited, as documented on every operation', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ rateLimits: { authPerMinute: 2, perMinute: 1 } });
  });
  afterAll(async () => {
    await app?.close();
  });

  it('answers 429 with Retry-After and the envelope once the limit is spent', async () => {
    const registered = await app.request('POST', '/api/users', { body: { user: { username: 'limited', password: 'correct horse' } } });
    expect(registered.status).toBe(201);
    const token = registered.body.meta.token as string;
    const login = await app.request('POST', '/api/users/authorizations', { body: { username: 'limited', password: 'correct horse' } });
    expect(login.status).toBe(201);
    expect((await app.request('GET', '/api/users/me', { token })).status).toBe(200);
    for (const operation of operations) {
      const resource = operation.path.startsWith('/api/projects') ? 'project' : 'task';
      const res = await app.request(operation.method.toUpperCase(), urlOf(operation, { id: 1 }), {
        token,
        body: operation.op.requestBody ? { [resource]: {}, user: {} } : undefined,
      });
      checkAgainstDocument(operation, res, `${operation.id} over the limit`);
      expect(res.status, `${operation.id}: ${res.text}`).toBe(429);
      expect(codesOf(res)).toEqual(['rate_limited']);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
  });
});
