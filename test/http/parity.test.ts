/**
 * The two doors give the same answers (API-CONTRACT.md §8). One scenario, written once as
 * procedure calls, runs for one user through tRPC (superjson, the typed client of
 * src/client.ts) and for another through REST (the operation openapi.json documents for
 * the procedure: path id, query or body from the same input). Every step must give the
 * same output (`data`, `links`, `meta`) once ids, usernames and tokens are normalised, or
 * the same HTTP status and the same `errors` (tRPC carries them in error.data).
 */
import { readFileSync } from 'node:fs';
import { TRPCClientError } from '@trpc/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DAY, T0, seconds, startTestApp, type TestApp } from '../helpers/test-app.js';

type Json = Record<string, any>;
const doc: Json = JSON.parse(readFileSync(new URL('../../openapi.json', import.meta.url), 'utf8'));

interface RestOperation {
  method: string;
  path: string;
  hasBody: boolean;
}
const restOperations = new Map<string, RestOperation>();
for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
  for (const [method, op] of Object.entries(item)) {
    restOperations.set(op.operationId, { method: method.toUpperCase(), path, hasBody: op.requestBody !== undefined });
  }
}

const PROCEDURES = [
  'users.register', 'users.authorize', 'users.me', 'users.update', 'users.revoke', 'users.changePassword', 'users.delete', 'users.export',
  'projects.create', 'projects.list', 'projects.get', 'projects.update', 'projects.changeState', 'projects.delete',
  'tasks.create', 'tasks.list', 'tasks.get', 'tasks.update', 'tasks.changeState', 'tasks.reorder',
  'batch.apply',
  'events.list', 'events.ticket',
  'webhooks.create', 'webhooks.list', 'webhooks.get', 'webhooks.update', 'webhooks.delete', 'webhooks.deliveries', 'webhooks.replay',
  'webhooks.test', 'webhooks.rotateSecret',
  'tokens.create', 'tokens.list', 'tokens.current', 'tokens.get', 'tokens.revoke',
] as const;
type Procedure = (typeof PROCEDURES)[number];

/** What one door remembers between steps. */
interface DoorState {
  username: string;
  token: string;
  refs: Record<string, number>;
}

type Auth = 'token' | 'none' | 'second' | 'unknown';

interface Step {
  name: string;
  procedure: Procedure;
  input?: (s: DoorState) => unknown;
  auth?: Auth;
  /** Remembers ids (or tokens) from a successful output. */
  keep?: (output: Json, s: DoorState & { second?: string }) => void;
  /** The step must fail with these codes (else it must succeed). */
  fails?: string[];
}

type Outcome = { ok: true; output: unknown } | { ok: false; status: number; errors: unknown };

const DUE = seconds(T0) + 30 * DAY;
/** A public name for the test apps' resolver (test/helpers/test-resolver.ts); nothing is sent to it. */
const HOOK = 'https://hooks.example.com/parity';

describe('tRPC and REST give the same data and the same errors', () => {
  let app: TestApp;
  /** A third user whose records both doors try to reach. */
  const foreign: Record<string, number> = {};

  beforeAll(async () => {
    app = await startTestApp();
    const stranger = await app.register();
    const project = await app.request('POST', '/api/users/me/projects', { token: stranger.token, body: { project: { name: 'Theirs' } } });
    const task = await app.request('POST', '/api/users/me/tasks', { token: stranger.token, body: { task: { label: 'Theirs' } } });
    const webhook = await app.request('POST', '/api/users/me/webhooks', { token: stranger.token, body: { webhook: { url: 'https://hooks.example.com/theirs' } } });
    foreign.project = project.body.data.id;
    foreign.task = task.body.data.id;
    foreign.webhook = webhook.body.data.id;
    const token = await app.request('POST', '/api/users/me/tokens', { token: stranger.token, body: { token: { name: 'Theirs', scopes: ['tasks:read'], expires_at: DUE } } });
    foreign.token = token.body.data.id;
  });
  afterAll(async () => {
    await app?.close();
  });

  const password = 'correct horse battery staple';
  const steps: Step[] = [
    { name: 'register', procedure: 'users.register', auth: 'none', input: (s) => ({ user: { username: s.username, password } }), keep: (o, s) => void (s.token = o.meta.token) },
    { name: 'register taken', procedure: 'users.register', auth: 'none', input: (s) => ({ user: { username: s.username, password } }), fails: ['taken'] },
    { name: 'register invalid', procedure: 'users.register', auth: 'none', input: () => ({ user: { username: 'Bad Name', password: 'short' } }), fails: ['invalid', 'too_short'] },
    { name: 'register without user', procedure: 'users.register', auth: 'none', input: () => ({}), fails: ['parameter_missing'] },
    { name: 'login', procedure: 'users.authorize', auth: 'none', input: (s) => ({ username: s.username, password }), keep: (o, s) => void (s.second = o.meta.token) },
    { name: 'login wrong password', procedure: 'users.authorize', auth: 'none', input: (s) => ({ username: s.username, password: 'wrong password' }), fails: ['login_failed'] },
    { name: 'login without password', procedure: 'users.authorize', auth: 'none', input: (s) => ({ username: s.username }), fails: ['parameter_missing'] },
    { name: 'me', procedure: 'users.me' },
    { name: 'me without token', procedure: 'users.me', auth: 'none', fails: ['unauthorized'] },
    { name: 'me with an unknown token', procedure: 'users.me', auth: 'unknown', fails: ['unauthorized'] },
    { name: 'move to Tokyo', procedure: 'users.update', input: () => ({ user: { time_zone: 'asia/tokyo' } }) },
    { name: 'move nowhere', procedure: 'users.update', input: () => ({ user: { time_zone: 'Nowhere/Special' } }), fails: ['invalid'] },
    { name: 'move back to UTC', procedure: 'users.update', input: () => ({ user: { time_zone: 'UTC' } }) },
    { name: 'revoke the second token', procedure: 'users.revoke', auth: 'second' },
    { name: 'revoke it again', procedure: 'users.revoke', auth: 'second', fails: ['unauthorized'] },

    { name: 'create Coffee', procedure: 'projects.create', input: () => ({ project: { name: 'Coffee' } }), keep: (o, s) => void (s.refs.coffee = o.data.id) },
    { name: 'create Garden', procedure: 'projects.create', input: () => ({ project: { name: 'Garden' } }), keep: (o, s) => void (s.refs.garden = o.data.id) },
    { name: 'create taken', procedure: 'projects.create', input: () => ({ project: { name: 'COFFEE' } }), fails: ['taken'] },
    { name: 'create invalid and too long', procedure: 'projects.create', input: () => ({ project: { name: `a b${'c'.repeat(120)}` } }), fails: ['invalid', 'too_long'] },
    { name: 'create without name', procedure: 'projects.create', input: () => ({ project: {} }), fails: ['parameter_missing'] },
    { name: 'create without token', procedure: 'projects.create', auth: 'none', input: () => ({ project: { name: 'Nope' } }), fails: ['unauthorized'] },
    { name: 'list projects', procedure: 'projects.list', input: () => ({}) },
    { name: 'list projects page 2', procedure: 'projects.list', input: () => ({ page: 2 }) },
    { name: 'list newed projects by name, descending', procedure: 'projects.list', input: () => ({ state: ['newed'], sort: '-name', page_size: 1 }) },
    { name: 'list projects with bad parameters', procedure: 'projects.list', input: () => ({ page_size: 0, state: ['abandoned'], sort: 'dueat' }), fails: ['invalid', 'invalid', 'invalid'] },
    { name: 'list projects page 0', procedure: 'projects.list', input: () => ({ page: 0 }), fails: ['invalid'] },
    { name: 'get Coffee', procedure: 'projects.get', input: (s) => ({ id: s.refs.coffee }) },
    { name: 'get a foreign project', procedure: 'projects.get', input: () => ({ id: foreign.project }), fails: ['record_not_found'] },
    { name: 'get an unknown project', procedure: 'projects.get', input: () => ({ id: 2_147_483_647 }), fails: ['record_not_found'] },
    { name: 'describe Coffee', procedure: 'projects.update', input: (s) => ({ id: s.refs.coffee, project: { description: 'Beans' } }) },
    { name: 'rename Coffee to Garden', procedure: 'projects.update', input: (s) => ({ id: s.refs.coffee, project: { name: 'garden' } }), fails: ['taken'] },
    { name: 'due date of a newed project', procedure: 'projects.update', input: (s) => ({ id: s.refs.coffee, project: { due_at: DUE } }), fails: ['cannot_be_set'] },
    { name: 'update a foreign project', procedure: 'projects.update', input: () => ({ id: foreign.project, project: { description: 'x' } }), fails: ['record_not_found'] },
    { name: 'start Coffee without due date', procedure: 'projects.changeState', input: (s) => ({ id: s.refs.coffee, project: { state: 'started' } }), fails: ['must_be_set'] },
    { name: 'pause a newed project', procedure: 'projects.changeState', input: (s) => ({ id: s.refs.garden, project: { state: 'paused' } }), fails: ['invalid_transition'] },
    { name: 'start with a past due date', procedure: 'projects.changeState', input: (s) => ({ id: s.refs.coffee, project: { state: 'started', due_at: seconds(T0) } }), fails: ['cannot_be_before_started_at'] },
    { name: 'start with an extra member', procedure: 'projects.changeState', input: (s) => ({ id: s.refs.coffee, project: { state: 'started', due_at: DUE, name: 'x' } }), fails: ['cannot_be_set'] },
    { name: 'start Coffee', procedure: 'projects.changeState', input: (s) => ({ id: s.refs.coffee, project: { state: 'started', due_at: DUE } }) },

    { name: 'task in Coffee', procedure: 'tasks.create', input: (s) => ({ task: { label: 'Buy beans', project_id: s.refs.coffee } }), keep: (o, s) => void (s.refs.beans = o.data.id) },
    { name: 'task in Garden', procedure: 'tasks.create', input: (s) => ({ task: { label: 'Dig', project_id: s.refs.garden } }), keep: (o, s) => void (s.refs.dig = o.data.id) },
    { name: 'planned task', procedure: 'tasks.create', input: () => ({ task: { label: 'Descale', planned_at: seconds(T0) + DAY } }), keep: (o, s) => void (s.refs.descale = o.data.id) },
    { name: 'task in a foreign project', procedure: 'tasks.create', input: () => ({ task: { label: 'x', project_id: foreign.project } }), fails: ['record_not_found'] },
    { name: 'task without label', procedure: 'tasks.create', input: () => ({ task: { planned_at: 'soon' } }), fails: ['parameter_missing', 'invalid'] },
    { name: 'list tasks', procedure: 'tasks.list', input: () => ({}) },
    { name: 'list tasks page 1', procedure: 'tasks.list', input: () => ({ page: 1 }) },
    { name: 'list tasks page -1', procedure: 'tasks.list', input: () => ({ page: -1 }), fails: ['invalid'] },
    { name: 'get a task', procedure: 'tasks.get', input: (s) => ({ id: s.refs.beans }) },
    { name: 'get a foreign task', procedure: 'tasks.get', input: () => ({ id: foreign.task }), fails: ['record_not_found'] },
    { name: 'relabel a task', procedure: 'tasks.update', input: (s) => ({ id: s.refs.dig, task: { label: 'Dig deeper' } }) },
    { name: 'move a newed task to Coffee', procedure: 'tasks.update', input: (s) => ({ id: s.refs.dig, task: { project_id: s.refs.coffee } }) },
    { name: 'detach a task', procedure: 'tasks.update', input: (s) => ({ id: s.refs.beans, task: { project_id: null } }) },
    { name: 'empty label', procedure: 'tasks.update', input: (s) => ({ id: s.refs.beans, task: { label: '' } }), fails: ['invalid'] },
    { name: 'task into a foreign project', procedure: 'tasks.update', input: (s) => ({ id: s.refs.beans, task: { project_id: foreign.project } }), fails: ['record_not_found'] },
    { name: 'plan a task', procedure: 'tasks.changeState', input: (s) => ({ id: s.refs.beans, task: { state: 'planned' } }) },
    { name: 'finish it', procedure: 'tasks.changeState', input: (s) => ({ id: s.refs.beans, task: { state: 'finished' } }) },
    { name: 'finish it again', procedure: 'tasks.changeState', input: (s) => ({ id: s.refs.beans, task: { state: 'finished' } }), fails: ['invalid_transition'] },
    { name: 'state with planned_at', procedure: 'tasks.changeState', input: (s) => ({ id: s.refs.dig, task: { state: 'planned', planned_at: 1 } }), fails: ['cannot_be_set'] },
    { name: 'state missing', procedure: 'tasks.changeState', input: (s) => ({ id: s.refs.dig, task: {} }), fails: ['must_be_set'] },
    { name: 'move the last task first', procedure: 'tasks.reorder', input: (s) => ({ id: s.refs.descale, task: { order: 1 } }) },
    { name: 'move a task beyond the end', procedure: 'tasks.reorder', input: (s) => ({ id: s.refs.beans, task: { order: 99 } }) },
    { name: 'order missing', procedure: 'tasks.reorder', input: (s) => ({ id: s.refs.beans, task: {} }), fails: ['parameter_missing'] },
    { name: 'order of a foreign task', procedure: 'tasks.reorder', input: () => ({ id: foreign.task, task: { order: 1 } }), fails: ['record_not_found'] },

    { name: 'pause Coffee', procedure: 'projects.changeState', input: (s) => ({ id: s.refs.coffee, project: { state: 'paused' } }) },
    { name: 'Coffee after the pause', procedure: 'projects.get', input: (s) => ({ id: s.refs.coffee }) },
    { name: 'delete Garden', procedure: 'projects.delete', input: (s) => ({ id: s.refs.garden }) },
    { name: 'delete Garden again', procedure: 'projects.delete', input: (s) => ({ id: s.refs.garden }), fails: ['record_not_found'] },
    { name: 'delete without token', procedure: 'projects.delete', auth: 'none', input: (s) => ({ id: s.refs.coffee }), fails: ['unauthorized'] },
    { name: 'tasks at the end', procedure: 'tasks.list', input: () => ({}) },
    { name: 'projects at the end', procedure: 'projects.list', input: () => ({}) },

    {
      name: 'a batch: a project, a task in it, its start',
      procedure: 'batch.apply',
      input: () => ({
        operations: [
          { op: 'projects.create', ref: 'shed', input: { project: { name: 'Shed' } } },
          { op: 'tasks.create', ref: 'paint', input: { task: { label: 'Paint', project_id: { ref: 'shed' } } } },
          { op: 'tasks.reorder', input: { id: { ref: 'paint' }, task: { order: 1 } } },
        ],
      }),
    },
    {
      name: 'a batch whose second operation fails',
      procedure: 'batch.apply',
      input: (s) => ({
        operations: [
          { op: 'tasks.create', input: { task: { label: 'kept?' } } },
          { op: 'projects.changeState', input: { id: s.refs.coffee, project: { state: 'started', due_at: DUE, x: 1 } } },
        ],
      }),
      fails: ['cannot_be_set'],
    },
    { name: 'a batch with an unknown ref', procedure: 'batch.apply', input: () => ({ operations: [{ op: 'tasks.update', input: { id: { ref: 'x' }, task: {} } }] }), fails: ['invalid'] },
    { name: 'the change log from its start', procedure: 'events.list', input: () => ({ after: '0' }) },
    { name: 'the newest event id', procedure: 'events.list', input: () => ({}) },
    { name: 'changes after a malformed id', procedure: 'events.list', input: () => ({ after: '01' }), fails: ['invalid'] },
    { name: 'changes after an id beyond the log', procedure: 'events.list', input: () => ({ after: '999999' }), fails: ['cursor_expired'] },
    { name: 'a stream ticket', procedure: 'events.ticket' },
    { name: 'a stream ticket without token', procedure: 'events.ticket', auth: 'none', fails: ['unauthorized'] },

    { name: 'a webhook for task events', procedure: 'webhooks.create', input: () => ({ webhook: { url: HOOK, events: ['task.*'], description: 'Board' } }), keep: (o, s) => void (s.refs.hook = o.data.id) },
    { name: 'a webhook for every event', procedure: 'webhooks.create', input: () => ({ webhook: { url: `${HOOK}/all` } }), keep: (o, s) => void (s.refs.spare = o.data.id) },
    ...Array.from({ length: 8 }, (_, i): Step => ({ name: `webhook ${i + 3} of 10`, procedure: 'webhooks.create', input: () => ({ webhook: { url: `${HOOK}/${i + 3}` } }) })),
    { name: 'an 11th webhook', procedure: 'webhooks.create', input: () => ({ webhook: { url: `${HOOK}/11` } }), fails: ['limit_reached'] },
    { name: 'a webhook without url', procedure: 'webhooks.create', input: () => ({ webhook: { events: ['*'] } }), fails: ['parameter_missing'] },
    { name: 'a webhook to a private address', procedure: 'webhooks.create', input: () => ({ webhook: { url: 'https://ten.private.test/x' } }), fails: ['invalid'] },
    { name: 'a webhook over http', procedure: 'webhooks.create', input: () => ({ webhook: { url: 'http://hooks.example.com/x' } }), fails: ['invalid'] },
    { name: 'a webhook for an unknown event, with a long url', procedure: 'webhooks.create', input: () => ({ webhook: { url: `${HOOK}/${'x'.repeat(2_048)}`, events: ['task.deleted'] } }), fails: ['invalid', 'invalid'] },
    { name: 'a webhook with a long description', procedure: 'webhooks.create', input: () => ({ webhook: { url: HOOK, description: 'x'.repeat(1_001) } }), fails: ['too_long'] },
    { name: 'list webhooks', procedure: 'webhooks.list' },
    { name: 'list webhooks without token', procedure: 'webhooks.list', auth: 'none', fails: ['unauthorized'] },
    { name: 'get a webhook', procedure: 'webhooks.get', input: (s) => ({ id: s.refs.hook }) },
    { name: 'get a foreign webhook', procedure: 'webhooks.get', input: () => ({ id: foreign.webhook }), fails: ['record_not_found'] },
    { name: 'disable a webhook', procedure: 'webhooks.update', input: (s) => ({ id: s.refs.hook, webhook: { state: 'disabled' } }) },
    { name: 'enable it, with other events', procedure: 'webhooks.update', input: (s) => ({ id: s.refs.hook, webhook: { state: 'enabled', events: ['project.*', 'task.updated'] } }) },
    { name: 'a webhook to a loopback name', procedure: 'webhooks.update', input: (s) => ({ id: s.refs.hook, webhook: { url: 'https://loopback.private.test/x' } }), fails: ['invalid'] },
    { name: 'update a foreign webhook', procedure: 'webhooks.update', input: () => ({ id: foreign.webhook, webhook: { description: 'x' } }), fails: ['record_not_found'] },
    { name: 'replay from the start of the log', procedure: 'webhooks.replay', input: (s) => ({ id: s.refs.hook, replay: { after: '0' } }) },
    { name: 'replay after an id beyond the log', procedure: 'webhooks.replay', input: (s) => ({ id: s.refs.hook, replay: { after: '999999' } }), fails: ['cursor_expired'] },
    { name: 'replay after a malformed id', procedure: 'webhooks.replay', input: (s) => ({ id: s.refs.hook, replay: { after: '01' } }), fails: ['invalid'] },
    { name: 'a test event', procedure: 'webhooks.test', input: (s) => ({ id: s.refs.hook }) },
    { name: 'a test event to a foreign webhook', procedure: 'webhooks.test', input: () => ({ id: foreign.webhook }), fails: ['record_not_found'] },
    { name: 'a new secret', procedure: 'webhooks.rotateSecret', input: (s) => ({ id: s.refs.hook }) },
    { name: 'a new secret of an unknown webhook', procedure: 'webhooks.rotateSecret', input: () => ({ id: 2_147_483_647 }), fails: ['record_not_found'] },
    { name: 'the attempts of a webhook', procedure: 'webhooks.deliveries', input: (s) => ({ id: s.refs.hook }) },
    { name: 'the attempts, page 2', procedure: 'webhooks.deliveries', input: (s) => ({ id: s.refs.hook, page: 2 }) },
    { name: 'the attempts, page 0', procedure: 'webhooks.deliveries', input: (s) => ({ id: s.refs.hook, page: 0 }), fails: ['invalid'] },
    // Personal access tokens (API-CONTRACT.md §16).
    { name: 'make a token', procedure: 'tokens.create', input: () => ({ token: { name: 'Script', scopes: ['tasks:read', 'events:read'], expires_at: DUE } }), keep: (o, s) => void (s.refs.pat = o.data.id) },
    { name: 'a token of an unknown scope', procedure: 'tokens.create', input: () => ({ token: { name: 'Script', scopes: ['admin'], expires_at: DUE } }), fails: ['invalid'] },
    { name: 'a token without a name', procedure: 'tokens.create', input: () => ({ token: { scopes: ['tasks:read'], expires_at: DUE } }), fails: ['parameter_missing'] },
    { name: 'a token that has expired', procedure: 'tokens.create', input: () => ({ token: { name: 'Old', scopes: ['tasks:read'], expires_at: seconds(T0) } }), fails: ['invalid'] },
    { name: 'the token in use', procedure: 'tokens.current' },
    { name: 'the token in use, without token', procedure: 'tokens.current', auth: 'none', fails: ['unauthorized'] },
    { name: 'get the token', procedure: 'tokens.get', input: (s) => ({ id: s.refs.pat }) },
    { name: 'get a foreign token', procedure: 'tokens.get', input: () => ({ id: foreign.token }), fails: ['record_not_found'] },
    { name: 'the tokens', procedure: 'tokens.list' },
    { name: 'the tokens, page 0', procedure: 'tokens.list', input: () => ({ page: 0 }), fails: ['invalid'] },
    { name: 'revoke the token', procedure: 'tokens.revoke', input: (s) => ({ id: s.refs.pat }) },
    { name: 'revoke it again', procedure: 'tokens.revoke', input: (s) => ({ id: s.refs.pat }), fails: ['record_not_found'] },
    { name: 'revoke a foreign token', procedure: 'tokens.revoke', input: () => ({ id: foreign.token }), fails: ['record_not_found'] },
    // Everything of the user, webhooks and tasks of every state included: the same document through both doors.
    { name: 'export the account', procedure: 'users.export' },
    { name: 'export without token', procedure: 'users.export', auth: 'none', fails: ['unauthorized'] },
    { name: 'delete a webhook', procedure: 'webhooks.delete', input: (s) => ({ id: s.refs.spare }) },
    { name: 'delete it again', procedure: 'webhooks.delete', input: (s) => ({ id: s.refs.spare }), fails: ['record_not_found'] },
    { name: 'webhooks at the end', procedure: 'webhooks.list' },

    { name: 'change the password, the current one wrong', procedure: 'users.changePassword', input: () => ({ user: { current_password: 'wrong password', password: 'a new password' } }), fails: ['invalid'] },
    { name: 'change the password to a short one', procedure: 'users.changePassword', input: () => ({ user: { current_password: password, password: 'short' } }), fails: ['too_short'] },
    { name: 'change the password', procedure: 'users.changePassword', input: () => ({ user: { current_password: password, password: 'a new password' } }) },
    { name: 'delete the account with the old password', procedure: 'users.delete', input: () => ({ user: { password } }), fails: ['invalid'] },
    { name: 'delete the account without a password', procedure: 'users.delete', input: () => ({ user: {} }), fails: ['parameter_missing'] },
    { name: 'delete the account', procedure: 'users.delete', input: () => ({ user: { password: 'a new password' } }) },
    { name: 'me after the deletion', procedure: 'users.me', fails: ['unauthorized'] },
  ];

  function tokenFor(step: Step, s: DoorState & { second?: string }): string | undefined {
    switch (step.auth ?? 'token') {
      case 'none': return undefined;
      case 'unknown': return 'unknown-token';
      case 'second': return s.second;
      case 'token': return s.token;
    }
  }

  async function viaTrpc(step: Step, s: DoorState & { second?: string }): Promise<Outcome> {
    const [routerName, procedureName] = step.procedure.split('.') as [string, string];
    const isQuery = restOperations.get(step.procedure.replace('.', '-'))!.method === 'GET';
    // The client is typed per procedure; the scenario is generic over them.
    const client = app.trpc(tokenFor(step, s)) as any;
    const callable = client[routerName][procedureName];
    const input = step.input?.(s);
    try {
      const output = isQuery ? await callable.query(input) : await callable.mutate(input);
      return { ok: true, output };
    } catch (error) {
      if (!(error instanceof TRPCClientError)) throw error;
      const data = error.data as { code: string; httpStatus: number; errors: Json[] };
      expect(data.code, `${step.name}: error.data.code is the first error's`).toBe(data.errors[0]!.code);
      return { ok: false, status: data.httpStatus, errors: data.errors };
    }
  }

  async function viaRest(step: Step, s: DoorState & { second?: string }): Promise<Outcome> {
    const operation = restOperations.get(step.procedure.replace('.', '-'));
    if (!operation) throw new Error(`openapi.json has no operation for ${step.procedure}`);
    const input = (step.input?.(s) ?? undefined) as Json | undefined;
    const { id, ...rest } = input ?? {};
    let url = operation.path.replace('{id}', String(id));
    let body: unknown;
    if (operation.method === 'GET') {
      const query = new URLSearchParams(Object.entries(rest).map(([k, v]): [string, string] => [k, String(v)])).toString();
      if (query) url += `?${query}`;
    } else if (operation.hasBody) {
      body = rest;
    }
    const res = await app.request(operation.method, url, { token: tokenFor(step, s), body });
    if (res.status >= 400) return { ok: false, status: res.status, errors: res.body?.errors };
    expect([200, 201, 202, 204], `${step.name}: ${res.status}`).toContain(res.status);
    return { ok: true, output: res.status === 204 ? undefined : res.body };
  }

  /** Replaces ids by their order of first appearance per type, and the user's name and tokens. */
  function normaliser(s: DoorState) {
    const seen = new Map<string, number>();
    const idOf = (type: string, id: number) => {
      const key = `${type}:${id}`;
      if (!seen.has(key)) seen.set(key, [...seen.keys()].filter((k) => k.startsWith(`${type}:`)).length + 1);
      return `${type}#${seen.get(key)}`;
    };
    const walk = (value: unknown): unknown => {
      if (Array.isArray(value)) return value.map(walk);
      if (value && typeof value === 'object') {
        const out: Json = {};
        for (const [k, v] of Object.entries(value)) out[k] = walk(v);
        if (typeof out.type === 'string' && typeof out.id === 'number') out.id = idOf(out.type, out.id);
        if (out.meta && typeof out.meta.token === 'string') out.meta.token = '<token>';
        if (out.attributes && typeof out.attributes.ticket === 'string') out.attributes.ticket = '<ticket>';
        if (out.meta && typeof out.meta.secret === 'string') out.meta.secret = '<secret>';
        return out;
      }
      if (value === s.username) return '<username>';
      // A webhook's id in the links of its deliveries.
      if (typeof value === 'string') return value.replace(/\/api\/webhooks\/(\d+)\//, (_, id: string) => `/api/webhooks/${idOf('webhook', Number(id))}/`);
      return value;
    };
    return walk;
  }

  it('walks the same scenario through both doors', async () => {
    const stamp = Date.now().toString(36);
    const trpcState: DoorState & { second?: string } = { username: `trpc_${stamp}`, token: '', refs: {} };
    const restState: DoorState & { second?: string } = { username: `rest_${stamp}`, token: '', refs: {} };
    const normaliseTrpc = normaliser(trpcState);
    const normaliseRest = normaliser(restState);
    const covered = new Map<Procedure, { ok: boolean; failed: boolean }>();

    for (const step of steps) {
      const viaT = await viaTrpc(step, trpcState);
      const viaR = await viaRest(step, restState);
      const label = `${step.name} (${step.procedure})`;
      if (step.fails) {
        expect(viaT.ok, `${label} via tRPC: ${JSON.stringify(viaT)}`).toBe(false);
        expect(viaR.ok, `${label} via REST: ${JSON.stringify(viaR)}`).toBe(false);
        if (!viaT.ok && !viaR.ok) {
          expect((viaR.errors as Json[]).map((e) => e.code), `${label} codes`).toEqual(step.fails);
          expect({ status: viaT.status, errors: viaT.errors }, `${label}: tRPC error vs REST error`).toEqual({ status: viaR.status, errors: viaR.errors });
        }
      } else {
        expect(viaT.ok, `${label} via tRPC: ${JSON.stringify(viaT)}`).toBe(true);
        expect(viaR.ok, `${label} via REST: ${JSON.stringify(viaR)}`).toBe(true);
        if (viaT.ok && viaR.ok) {
          expect(normaliseTrpc(viaT.output), `${label}: tRPC output vs REST body`).toEqual(normaliseRest(viaR.output));
          step.keep?.(viaT.output as Json, trpcState);
          step.keep?.(viaR.output as Json, restState);
        }
      }
      const entry = covered.get(step.procedure) ?? { ok: false, failed: false };
      if (step.fails) entry.failed = true;
      else entry.ok = true;
      covered.set(step.procedure, entry);
    }

    // Every procedure, and only those of the router, ran through both doors, with a success and an error.
    expect([...restOperations.keys()].sort()).toEqual(PROCEDURES.map((p) => p.replace('.', '-')).sort());
    for (const procedure of PROCEDURES) {
      expect(covered.get(procedure), procedure).toEqual({ ok: true, failed: true });
    }
  });
});
