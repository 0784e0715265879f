/**
 * Every route of both doors, once each, against a running service at a URL (a deployment,
 * not the test app): each REST operation of openapi.json with its documented method and
 * path, each tRPC procedure through the typed client (src/client.ts), the REST event stream
 * (by token and by ticket), the tRPC subscription, and a webhook's test event reaching a
 * receiver. Each answer is checked against the status expected and, for REST, against the
 * schema openapi.json declares for it; the walk fails when an operation or a procedure was
 * not called, so a route added later is walked too (or the walk says which is missing).
 */
import { expect } from 'vitest';
import { createClient } from '../../src/client.js';
import { ACCESS } from '../../src/app/scopes.js';
import { eventually } from './eventually.js';
import { request, type ApiResponse } from './http.js';
import { operationById, operations, schemaErrors } from './openapi-document.js';
import { openStream } from './sse.js';
import type { Receiver } from './webhook-receiver.js';

interface Call {
  id?: number | string;
  query?: string;
  token?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface Walked {
  rest: string[];
  trpc: string[];
}

/**
 * Walks every route at `baseUrl` as a fresh user (`name`, two users in fact: the second is
 * deleted at the end). `receiver`: a webhook receiver the service may reach (its instances run
 * with WEBHOOK_ALLOW_PRIVATE_URLS=1 for a loopback one).
 */
export async function walkEveryRoute(baseUrl: string, name: string, receiver: Receiver): Promise<Walked> {
  const restCalled = new Set<string>();
  const trpcCalled = new Set<string>();
  const password = 'correct horse battery staple';
  const later = Math.floor(Date.now() / 1000) + 30 * 86_400;

  const rest = async (operationId: string, status: number, call: Call = {}): Promise<ApiResponse> => {
    const operation = operationById.get(operationId);
    if (!operation) throw new Error(`${operationId} is not in openapi.json`);
    let path = operation.path.replace('{id}', encodeURIComponent(String(call.id)));
    if (call.query) path += `?${call.query}`;
    const res = await request(baseUrl, operation.method.toUpperCase(), path, call);
    expect(res.status, `${operationId}: ${res.text.slice(0, 500)}`).toBe(status);
    const schema = operation.op.responses[String(status)]?.content?.['application/json']?.schema;
    if (schema && res.headers.get('content-type')?.startsWith('application/json')) {
      expect(schemaErrors(`${operationId} ${status}`, schema, res.body), `${operationId}: ${res.text.slice(0, 500)}`).toBeNull();
    }
    restCalled.add(operationId);
    return res;
  };

  // --- REST. ----------------------------------------------------------------------------
  const registered = await rest('users-register', 201, { body: { user: { username: `${name}_rest`, password } } });
  let token: string = registered.body.meta.token;
  await rest('users-me', 200, { token });
  await rest('users-update', 200, { token, body: { user: { time_zone: 'Europe/Paris' } } });
  const login = await rest('users-authorize', 201, { body: { username: `${name}_rest`, password } });
  await rest('users-revoke', 204, { token: login.body.meta.token });

  const created = await rest('tokens-create', 201, { token, body: { token: { name: 'walk', scopes: ['tasks:read'], expires_at: later } } });
  await rest('tokens-list', 200, { token });
  await rest('tokens-get', 200, { token, id: created.body.data.id });
  await rest('tokens-current', 200, { token: created.body.meta.secret });
  await rest('tokens-revoke', 204, { token, id: created.body.data.id });

  const project = (await rest('projects-create', 201, { token, body: { project: { name: 'Walk' } } })).body.data;
  await rest('projects-list', 200, { token });
  await rest('projects-get', 200, { token, id: project.id });
  await rest('projects-update', 200, { token, id: project.id, body: { project: { description: 'every route' } } });
  await rest('projects-changeState', 200, { token, id: project.id, body: { project: { state: 'started', due_at: later } } });
  const task = (await rest('tasks-create', 201, { token, body: { task: { label: 'first', project_id: project.id } } })).body.data;
  const second = (await rest('tasks-create', 201, { token, body: { task: { label: 'second' } } })).body.data;
  await rest('tasks-list', 200, { token });
  await rest('tasks-get', 200, { token, id: task.id });
  await rest('tasks-update', 200, { token, id: task.id, body: { task: { label: 'first, renamed' } } });
  await rest('tasks-changeState', 200, { token, id: task.id, body: { task: { state: 'planned' } } });
  await rest('tasks-reorder', 200, { token, id: second.id, body: { task: { order: 1 } } });
  const batch = await rest('batch-apply', 200, {
    token,
    body: { operations: [{ op: 'projects.create', ref: 'p', input: { project: { name: 'Batched' } } }, { op: 'tasks.create', input: { task: { label: 'in it', project_id: { ref: 'p' } } } }] },
  });
  expect(batch.body.data.map((r: { status: number }) => r.status)).toEqual([201, 201]);
  await rest('projects-delete', 204, { token, id: batch.body.data[0].body.data.id });

  const feed = await rest('events-list', 200, { token, query: 'after=0' });
  expect(feed.body.data.length).toBeGreaterThan(0);
  const byToken = await openStream(`${baseUrl}/api/users/me/events`, { Authorization: token, 'Last-Event-ID': '0' });
  expect(byToken.status).toBe(200);
  expect((await byToken.nextEvent(10_000)).id).toBe(feed.body.data[0].id);
  byToken.close();
  const ticket = await rest('events-ticket', 201, { token });
  const byTicket = await openStream(`${baseUrl}/api/users/me/events?after=0&ticket=${encodeURIComponent(ticket.body.data.attributes.ticket)}`);
  expect(byTicket.status).toBe(200);
  expect((await byTicket.nextEvent(10_000)).id).toBe(feed.body.data[0].id);
  byTicket.close();

  const hook = await rest('webhooks-create', 201, { token, body: { webhook: { url: receiver.url, events: ['task.*'] } } });
  const hookId = hook.body.data.id;
  await rest('webhooks-list', 200, { token });
  await rest('webhooks-get', 200, { token, id: hookId });
  await rest('webhooks-update', 200, { token, id: hookId, body: { webhook: { description: 'walked' } } });
  const tested = receiver.accepted.length;
  await rest('webhooks-test', 202, { token, id: hookId });
  await eventually(() => receiver.accepted.slice(tested).some((r) => r.json.type === 'webhook.test' && (r.json.data as { id: number }).id === hookId), {
    timeout: 15_000,
    message: 'the webhook test event reached the receiver',
  });
  await rest('webhooks-deliveries', 200, { token, id: hookId });
  await rest('webhooks-replay', 202, { token, id: hookId, body: { replay: { after: '0' } } });
  await rest('webhooks-rotateSecret', 201, { token, id: hookId });
  await rest('webhooks-delete', 204, { token, id: hookId });

  const exported = await request(baseUrl, 'GET', '/api/users/me/export', { token });
  expect(exported.status, exported.text.slice(0, 500)).toBe(200);
  expect([exported.body.user.attributes.username, exported.body.tasks.length > 0]).toEqual([`${name}_rest`, true]);
  restCalled.add('users-export');
  await rest('users-changePassword', 204, { token, body: { user: { current_password: password, password: `${password}!` } } });
  token = (await rest('users-authorize', 201, { body: { username: `${name}_rest`, password: `${password}!` } })).body.meta.token;
  await rest('users-delete', 204, { token, body: { user: { password: `${password}!` } } });
  await rest('users-me', 401, { token });

  // --- tRPC. ----------------------------------------------------------------------------
  const trpc = async <T>(path: string, call: () => Promise<T>): Promise<T> => {
    const result = await call();
    trpcCalled.add(path);
    return result;
  };
  const anonymous = createClient({ url: baseUrl });
  const user = await trpc('users.register', () => anonymous.users.register.mutate({ user: { username: `${name}_trpc`, password } }));
  const api = createClient({ url: baseUrl, token: user.meta.token });
  await trpc('users.me', () => api.users.me.query());
  await trpc('users.update', () => api.users.update.mutate({ user: { time_zone: 'UTC' } }));
  const second2 = await trpc('users.authorize', () => anonymous.users.authorize.mutate({ username: `${name}_trpc`, password }));
  await trpc('users.revoke', () => createClient({ url: baseUrl, token: second2.meta.token }).users.revoke.mutate());

  const personal = await trpc('tokens.create', () => api.tokens.create.mutate({ token: { name: 'walk', scopes: ['projects:read'], expires_at: later } }));
  await trpc('tokens.list', () => api.tokens.list.query({}));
  await trpc('tokens.get', () => api.tokens.get.query({ id: personal.data.id }));
  await trpc('tokens.current', () => createClient({ url: baseUrl, token: personal.meta.secret }).tokens.current.query());
  await trpc('tokens.revoke', () => api.tokens.revoke.mutate({ id: personal.data.id }));

  const p = (await trpc('projects.create', () => api.projects.create.mutate({ project: { name: 'Walk' } }))).data;
  await trpc('projects.list', () => api.projects.list.query({}));
  await trpc('projects.get', () => api.projects.get.query({ id: p.id }));
  await trpc('projects.update', () => api.projects.update.mutate({ id: p.id, project: { description: 'every procedure' } }));
  await trpc('projects.changeState', () => api.projects.changeState.mutate({ id: p.id, project: { state: 'started', due_at: later } }));
  const t = (await trpc('tasks.create', () => api.tasks.create.mutate({ task: { label: 'first', project_id: p.id } }))).data;
  await trpc('tasks.list', () => api.tasks.list.query({}));
  await trpc('tasks.get', () => api.tasks.get.query({ id: t.id }));
  await trpc('tasks.update', () => api.tasks.update.mutate({ id: t.id, task: { label: 'renamed' } }));
  await trpc('tasks.changeState', () => api.tasks.changeState.mutate({ id: t.id, task: { state: 'abandoned' } }));
  await trpc('tasks.reorder', () => api.tasks.reorder.mutate({ id: t.id, task: { order: 1 } }));
  const applied = await trpc('batch.apply', () => api.batch.apply.mutate({ operations: [{ op: 'tasks.create', input: { task: { label: 'batched' } } }] }));
  expect(applied.data.map((r) => r.status)).toEqual([201]);
  await trpc('projects.delete', () => api.projects.delete.mutate({ id: p.id }));

  const log = await trpc('events.list', () => api.events.list.query({ after: '0' }));
  expect(log.data.length).toBeGreaterThan(0);
  await trpc('events.ticket', () => api.events.ticket.mutate());
  await trpc('events.onChange', () =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('events.onChange: no event within 10 s')), 10_000);
      const subscription = api.events.onChange.subscribe({ lastEventId: '0' } as never, {
        onData: (event) => {
          clearTimeout(timer);
          subscription.unsubscribe();
          const id = (event as { id: string }).id;
          if (id === log.data[0]!.id) resolve();
          else reject(new Error(`events.onChange: the first event is ${id}, not ${log.data[0]!.id}`));
        },
        onError: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
    }),
  );

  const w = await trpc('webhooks.create', () => api.webhooks.create.mutate({ webhook: { url: receiver.url, events: ['task.*'] } }));
  await trpc('webhooks.list', () => api.webhooks.list.query());
  await trpc('webhooks.get', () => api.webhooks.get.query({ id: w.data.id }));
  await trpc('webhooks.update', () => api.webhooks.update.mutate({ id: w.data.id, webhook: { description: 'walked' } }));
  const before = receiver.accepted.length;
  await trpc('webhooks.test', () => api.webhooks.test.mutate({ id: w.data.id }));
  await eventually(() => receiver.accepted.slice(before).some((r) => r.json.type === 'webhook.test' && (r.json.data as { id: number }).id === w.data.id), {
    timeout: 15_000,
    message: 'the tRPC webhook test event reached the receiver',
  });
  await trpc('webhooks.deliveries', () => api.webhooks.deliveries.query({ id: w.data.id }));
  await trpc('webhooks.replay', () => api.webhooks.replay.mutate({ id: w.data.id, replay: { after: '0' } }));
  await trpc('webhooks.rotateSecret', () => api.webhooks.rotateSecret.mutate({ id: w.data.id }));
  await trpc('webhooks.delete', () => api.webhooks.delete.mutate({ id: w.data.id }));

  const whole = await trpc('users.export', () => api.users.export.query());
  expect([whole.user.attributes.username, whole.tasks.length > 0]).toEqual([`${name}_trpc`, true]);
  await trpc('users.changePassword', () => api.users.changePassword.mutate({ user: { current_password: password, password: `${password}!` } }));
  const again = await anonymous.users.authorize.mutate({ username: `${name}_trpc`, password: `${password}!` });
  await trpc('users.delete', () => createClient({ url: baseUrl, token: again.meta.token }).users.delete.mutate({ user: { password: `${password}!` } }));

  // --- Nothing left out. ------------------------------------------------------------------
  expect([...restCalled].sort(), 'every operation of openapi.json walked').toEqual(operations.map((o) => o.id).sort());
  expect([...trpcCalled].sort(), 'every procedure walked').toEqual(Object.keys(ACCESS).sort());
  return { rest: [...restCalled], trpc: [...trpcCalled] };
}
