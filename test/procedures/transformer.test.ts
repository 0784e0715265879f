/**
 * Every procedure's real outputs go on the tRPC wire as superjson would send them, byte for
 * byte (src/core/transformer.ts): each query and mutation of the router is called at least
 * once here, in the states that shape its output (empty and full lists, every project and
 * task state, a deletion's empty answer), and each answer is serialised both ways.
 */
import superjson from 'superjson';
import { describe, expect, it } from 'vitest';
import { appRouter } from '../../src/app/router.js';
import { transformer } from '../../src/core/transformer.js';
import { useProcedures } from '../helpers/procedures.js';

const procedures = useProcedures();
const DAY = 86_400;

describe('every procedure output, serialised for /trpc', () => {
  it('is what superjson sends, for every query and mutation of the router', async () => {
    const called = new Set<string>();
    const outputs: Array<[string, unknown]> = [];
    const note = async <T>(path: string, call: Promise<T>): Promise<T> => {
      const output = await call;
      called.add(path);
      outputs.push([path, output]);
      return output;
    };

    const user = await procedures.register();
    const api = user.api;
    const due = Math.floor(procedures.clock.now().getTime() / 1000) + 7 * DAY;
    await note('users.authorize', procedures.caller().users.authorize({ username: user.username, password: 'correct horse' }));
    await note('users.register', procedures.caller().users.register({ user: { username: `${user.username}b`, password: 'correct horse' } }));
    await note('users.me', api.users.me());
    await note('users.update', api.users.update({ user: { time_zone: 'Europe/Paris' } }));
    await note('projects.list', api.projects.list({}));
    await note('tasks.list', api.tasks.list({}));
    await note('events.list', api.events.list({}));
    const { data: project } = await note('projects.create', api.projects.create({ project: { name: 'Kitchen' } }));
    await note('projects.update', api.projects.update({ id: project.id, project: { description: 'Tiles' } }));
    const { data: task } = await note('tasks.create', api.tasks.create({ task: { label: 'Grout', project_id: project.id } }));
    await note('tasks.create', api.tasks.create({ task: { label: 'Paint', planned_at: due } }));
    await note('projects.changeState', api.projects.changeState({ id: project.id, project: { state: 'started', due_at: due } }));
    await note('tasks.changeState', api.tasks.changeState({ id: task.id, task: { state: 'planned' } }));
    await note('tasks.changeState', api.tasks.changeState({ id: task.id, task: { state: 'finished' } }));
    await note('tasks.update', api.tasks.update({ id: task.id, task: { label: 'Grout the floor', project_id: null } }));
    await note('tasks.reorder', api.tasks.reorder({ id: task.id, task: { order: 2 } }));
    await note('tasks.get', api.tasks.get({ id: task.id }));
    await note('projects.get', api.projects.get({ id: project.id }));
    await note('projects.changeState', api.projects.changeState({ id: project.id, project: { state: 'paused' } }));
    await note('projects.list', api.projects.list({ page: 1 }));
    await note('tasks.list', api.tasks.list({ page: 1 }));
    await note('tasks.list', api.tasks.list({ state: ['newed', 'planned'], project_id: [null], q: 'grout', sort: '-label', page_size: 5 }));
    // A server-side caller's proxy reads a call of `.apply` as Function.apply (src/batch/batch.router.ts).
    await note('batch.apply', api.batch.apply.apply(null, [{
      operations: [
        { op: 'projects.create', ref: 'p', input: { project: { name: 'Batch' } } },
        { op: 'tasks.create', input: { task: { label: 'batched', project_id: { ref: 'p' } } } },
        { op: 'projects.delete', input: { id: { ref: 'p' } } },
      ],
    }]));
    await note('events.list', api.events.list({ after: '0' }));
    const { data: hook } = await note('webhooks.create', api.webhooks.create({ webhook: { url: 'https://hooks.example.com/in', events: ['task.*'] } }));
    await note('webhooks.list', api.webhooks.list());
    await note('webhooks.get', api.webhooks.get({ id: hook.id }));
    await note('webhooks.update', api.webhooks.update({ id: hook.id, webhook: { state: 'disabled', description: 'off' } }));
    await note('webhooks.replay', api.webhooks.replay({ id: hook.id, replay: { after: '0' } }));
    await note('webhooks.test', api.webhooks.test({ id: hook.id }));
    await note('webhooks.rotateSecret', api.webhooks.rotateSecret({ id: hook.id }));
    await note('webhooks.deliveries', api.webhooks.deliveries({ id: hook.id }));
    await note('webhooks.delete', api.webhooks.delete({ id: hook.id }));
    await note('events.ticket', api.events.ticket());
    await note('projects.delete', api.projects.delete({ id: project.id }));
    const { data: made } = await note('tokens.create', api.tokens.create({ token: { name: 'Script', scopes: ['tasks:read'], expires_at: due } }));
    await note('tokens.list', api.tokens.list({}));
    await note('tokens.get', api.tokens.get({ id: made.id }));
    await note('tokens.current', api.tokens.current());
    await note('tokens.revoke', api.tokens.revoke({ id: made.id }));
    await note('users.export', api.users.export());
    await note('users.changePassword', api.users.changePassword({ user: { current_password: 'correct horse', password: 'battery staple' } }));
    await note('users.revoke', api.users.revoke());
    const leaving = await procedures.register();
    await note('users.delete', leaving.api.users.delete({ user: { password: 'correct horse' } }));

    const procedurePaths = Object.entries(appRouter._def.procedures)
      .filter(([, procedure]) => (procedure as unknown as { _def: { type: string } })._def.type !== 'subscription')
      .map(([path]) => path);
    expect([...called].sort()).toEqual(procedurePaths.sort());
    for (const [path, output] of outputs) {
      expect(JSON.stringify(transformer.serialize(output)), path).toBe(JSON.stringify(superjson.serialize(output)));
    }
  });
});
