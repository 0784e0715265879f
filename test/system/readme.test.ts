/** The README's examples run as written: the curl session and the TypeScript client. */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createClient } from '../../src/client.js';
import { createClient as createRestClient } from '../../clients/rest/client/index.js';
import { tasksCreate, tasksList, usersAuthorize } from '../../clients/rest/index.js';
import { eventually } from '../helpers/eventually.js';
import { startTestApp, useTestApp } from '../helpers/test-app.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

function codeBlockAfter(heading: string, language: string): string {
  const section = readme.slice(readme.indexOf(heading));
  const start = section.indexOf('```' + language + '\n') + language.length + 4;
  return section.slice(start, section.indexOf('\n```', start));
}

const thisFile = readFileSync(new URL(import.meta.url), 'utf8');

/**
 * Every line of the README's TypeScript block under `heading` that names `addressLine` is a line of this file, but for its
 * imports (here they start with ../) and the line naming the server's address.
 */
function expectCopiedHere(heading: string, addressLine: string) {
  const section = readme.slice(readme.indexOf(heading));
  const blocks = [...section.slice(0, section.indexOf('\n## ', 1)).matchAll(/```ts\n([\s\S]*?)\n```/g)].map((m) => m[1]!);
  const block = blocks.find((b) => b.split('\n').includes(addressLine));
  expect(block, `a ts block under "${heading}" with ${addressLine}`).toBeDefined();
  const lines = block!.split('\n').map((l) => l.trim());
  // The README's lines, in their order and one after the other, from the address line on.
  const copied = lines.filter((l) => l && !l.startsWith('import ') && l !== addressLine);
  const here = thisFile.split('\n').map((l) => l.trim());
  const start = here.findIndex((l, i) => l === copied[0] && here[i - 1] === addressLine.replace(/'http:\/\/localhost:3000'/, 'app.baseUrl'));
  expect(start, `"${copied[0]}" after the address line in this test`).toBeGreaterThan(0);
  expect(here.slice(start, start + copied.length), `README lines of "${heading}" as this test runs them`).toEqual(copied);
}

const app = useTestApp();

describe('README', () => {
  it('starts with the command that runs the service and the one that runs the tests', () => {
    const first = codeBlockAfter('# Planning service', 'sh').split('\n');
    expect(first[0]).toMatch(/^npm install && npm start\s+#/);
    expect(first[1]).toMatch(/^npm install && npm test\s+#/);
    const ci = readFileSync(new URL('../../.ci/run', import.meta.url), 'utf8');
    expect(ci).toMatch(/^npm ci\b/m);
    expect(ci).toMatch(/^npm test$/m);
  });

  it('runs the curl session against a real server', async () => {
    const script = codeBlockAfter('## Using it with curl', 'sh');
    const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', script], {
      env: { ...process.env, BASE: app.baseUrl },
    });
    expect(stdout).toContain('"name":"Coffee"');
    // The retry was replayed, the stale If-Match refused, the polled list not modified.
    expect(stdout).toMatch(/^idempotent-replayed: true\r?$/im);
    expect(stdout).toContain('"code":"precondition_failed"');
    expect(stdout).toContain(' -> 412');
    expect(stdout).toContain(' -> 304');
    expect(stdout).toContain('"timeZone":"Europe/Paris"');
    // The filtered list: the project's one task not abandoned, with links that keep the query.
    expect(stdout).toContain(`"links":{"first":"${app.baseUrl}/api/users/me/tasks?page_size=100&state=newed,started,planned&project_id=1&sort=-order&page=1"`);
    const login = await app.request('POST', '/api/users/authorizations', { body: { username: 'alice', password: 'correct horse' } });
    const token = login.body.meta.token;
    const project = await app.request('GET', '/api/projects/1', { token });
    expect(project.body.data.attributes).toMatchObject({ state: 'finished', isInProgress: false });
    expect(project.body.data.relationships.tasks.data).toEqual([{ type: 'task', id: 1 }]);
    // One task from the keyed create and its retry, with the label of the If-Match that held.
    const descaled = await app.request('GET', '/api/tasks/3', { token });
    expect(descaled.body.data.attributes).toMatchObject({ label: 'Descale the machine', state: 'abandoned' });
    expect((await app.request('GET', '/api/tasks/4', { token })).status).toBe(404);
    const tasks = await app.request('GET', '/api/users/me/tasks', { token });
    expect(tasks.body.data.map((t: any) => [t.id, t.attributes.state, t.attributes.order, t.attributes.plannedCount])).toEqual([
      [1, 'planned', 2, 2],
    ]);
  });

  it('runs the TypeScript client example', async () => {
    const app = await startTestApp(); // a database of its own, where alice has nothing yet
    onTestFinished(() => app.close());
    await createClient({ url: app.baseUrl }).users.register.mutate({ user: { username: 'alice', password: 'correct horse' } });
    // From here on, the README's example as written, but for the address.
    const url = app.baseUrl;
    const anonymous = createClient({ url });
    const { meta } = await anonymous.users.authorize.mutate({ username: 'alice', password: 'correct horse' });
    const api = createClient({ url, token: meta.token });
    const { data: project } = await api.projects.create.mutate({ project: { name: 'Tea' } });
    await api.tasks.create.mutate({ task: { label: 'Boil water', project_id: project.id } });
    const { data: tasks } = await api.tasks.list.query({ page: 1 });
    await api.users.update.mutate({ user: { time_zone: 'America/New_York' } });
    const { data: open } = await api.tasks.list.query({ project_id: [project.id], state: ['newed', 'started'], sort: '-order', page_size: 100 });
    expect(tasks.map((t) => [t.attributes.label, t.attributes.state, t.relationships.project.data])).toEqual([
      ['Boil water', 'newed', { type: 'project', id: project.id }],
    ]);
    expect(open).toEqual(tasks);
    expect((await api.users.me.query()).data.attributes.timeZone).toBe('America/New_York');
    expectCopiedHere('## Using it from TypeScript', "const url = 'http://localhost:3000';");
  });

  it('runs the REST client example', async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    expect((await app.request('POST', '/api/users', { body: { user: { username: 'alice', password: 'correct horse' } } })).status).toBe(201);
    const createClient = createRestClient;
    const printed: unknown[][] = [];
    const console = { log: (...values: unknown[]) => printed.push(values) };
    // From here on, the README's example as written, but for the address.
    const baseUrl = app.baseUrl;
    const login = await usersAuthorize({ client: createClient({ baseUrl }), body: { username: 'alice', password: 'correct horse' } });
    const rest = createClient({ baseUrl, auth: () => login.data!.meta.token });
    await tasksCreate({ client: rest, body: { task: { label: 'Grind beans' } } });
    const { data: page } = await tasksList({ client: rest, query: { page: 1 } });
    const refused = await tasksCreate({ client: rest, body: { task: { label: '' } } });
    console.log(page!.data.length, refused.response?.status, refused.error?.errors[0]?.code); // 1 422 invalid
    expect(printed).toEqual([[1, 422, 'invalid']]);
    expect(page!.data[0]!.attributes.label).toBe('Grind beans');
    expectCopiedHere('## Using it from TypeScript', "const baseUrl = 'http://localhost:3000';");
  });

  it('runs the change log example: delta sync, and the subscription that prints changes', async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    const { meta } = await createClient({ url: app.baseUrl }).users.register.mutate({ user: { username: 'alice', password: 'correct horse' } });
    const token = meta.token;
    const printed: unknown[][] = [];
    const console = { log: (...values: unknown[]) => printed.push(values) };
    // From here on, the README's example as written, but for the address.
    const url = app.baseUrl;
    const api = createClient({ url, token });
    const { meta: log } = await api.events.list.query({});
    const subscription = api.events.onChange.subscribe({ lastEventId: log.last_event_id }, {
      onData: ({ id, data: event }) => console.log(id, event.type, event.data.id),
    });
    await api.tasks.create.mutate({ task: { label: 'Steep' } });
    onTestFinished(() => subscription.unsubscribe());
    await eventually(() => printed.length > 0, { message: 'the subscription printed the change' });
    expect(printed).toEqual([['1', 'task.created', 1]]);
    expectCopiedHere('## Staying in sync', "const url = 'http://localhost:3000';");

    // The curl block's delta sync, run as written against the same log.
    const script = codeBlockAfter('## Staying in sync', 'sh').split('\n').filter((l) => !l.startsWith('curl -N')).join('\n');
    const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', `auth="Authorization: ${token}"\n${script}`], {
      env: { ...process.env, BASE: app.baseUrl },
    });
    expect(stdout).toContain('{"data":[],"links":{},"meta":{"last_event_id":"1"}}');
    expect(stdout).toContain('"type":"task.created"');
  });
});
