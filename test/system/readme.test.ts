/**
 * The examples of README.md (the curl session, the TypeScript clients) and of docs/change-log.md and
 * docs/webhooks.md (delta sync, the subscription, the webhook receiver) run as written.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createClient } from '../../src/client.js';
import { createClient as createRestClient } from '../../clients/rest/client/index.js';
import { tasksCreate, tasksList, usersAuthorize } from '../../clients/rest/index.js';
import { eventually } from '../helpers/eventually.js';
import { createTestDatabase, startTestApp, useTestApp } from '../helpers/test-app.js';
import { call, rawRequest, registerUser } from '../helpers/http.js';
import { freePort } from '../helpers/net.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/core/logger.js';
import { startService } from '../../src/server.js';

/** README.md and the docs/ pages whose examples this file runs. */
const page = (name: string) => readFileSync(new URL(`../../${name}`, import.meta.url), 'utf8');
const readme = page('README.md');
const changeLogPage = page('docs/change-log.md');
const webhooksPage = page('docs/webhooks.md');

/** The section of `text` under `heading`, up to the next heading of its level or above (outside code blocks). */
function sectionOf(text: string, heading: string): string {
  const lines = text.split('\n');
  const level = /^#+/.exec(heading)![0].length;
  let fenced = false;
  let start = -1;
  let end = lines.length;
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.startsWith('```')) fenced = !fenced;
    const m = fenced ? null : /^(#+) /.exec(lines[i]!);
    if (start < 0 && m && lines[i]!.startsWith(heading)) start = i;
    else if (start >= 0 && m && m[1]!.length <= level) {
      end = i;
      break;
    }
  }
  expect(start, `a heading "${heading}"`).toBeGreaterThanOrEqual(0);
  return lines.slice(start, end).join('\n');
}

function codeBlockAfter(text: string, heading: string, language: string): string {
  const section = sectionOf(text, heading);
  const start = section.indexOf('```' + language + '\n');
  expect(start, `a \`\`\`${language} block under "${heading}"`).toBeGreaterThanOrEqual(0);
  const from = start + language.length + 4;
  return section.slice(from, section.indexOf('\n```', from));
}

const thisFile = readFileSync(new URL(import.meta.url), 'utf8');

/**
 * Every line of the TypeScript block of `text` under `heading` that names `addressLine` is a line of this file, but for its
 * imports (here they start with ../) and the line naming the server's address.
 */
function expectCopiedHere(text: string, heading: string, addressLine: string) {
  const blocks = [...sectionOf(text, heading).matchAll(/```ts\n([\s\S]*?)\n```/g)].map((m) => m[1]!);
  const block = blocks.find((b) => b.split('\n').includes(addressLine));
  expect(block, `a ts block under "${heading}" with ${addressLine}`).toBeDefined();
  const lines = block!.split('\n').map((l) => l.trim());
  // The page's lines, in their order and one after the other, from the address line on.
  const copied = lines.filter((l) => l && !l.startsWith('import ') && l !== addressLine);
  const here = thisFile.split('\n').map((l) => l.trim());
  const start = here.findIndex((l, i) => l === copied[0] && here[i - 1] === addressLine.replace(/'http:\/\/localhost:3000'/, 'app.baseUrl'));
  expect(start, `"${copied[0]}" after the address line in this test`).toBeGreaterThan(0);
  expect(here.slice(start, start + copied.length), `lines of "${heading}" as this test runs them`).toEqual(copied);
}

const app = useTestApp();

describe('README', () => {
  it('starts with the command that runs the service and the one that runs the tests', () => {
    const first = codeBlockAfter(readme, '# Planning service', 'sh').split('\n');
    expect(first[0]).toMatch(/^npm install && npm start\s+#/);
    expect(first[1]).toMatch(/^npm install && npm test\s+#/);
    const ci = readFileSync(new URL('../../.ci/run', import.meta.url), 'utf8');
    expect(ci).toMatch(/^npm ci\b/m);
    expect(ci).toMatch(/^npm test$/m);
  });

  it('runs the curl session against a real server', async () => {
    const script = codeBlockAfter(readme, '## Using it with curl', 'sh');
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
    expect(stdout).toContain(`"links":{"first":"${app.baseUrl}/api/users/me/tasks?project_id=1&state=newed,started,planned&sort=-order&page_size=100&page=1"`);
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

  it('runs the tokens block: a read-only token reads, and its write is 403 insufficient_scope', async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    const { token } = await registerUser(app.baseUrl, 'alice');
    const script = codeBlockAfter(readme, '## Tokens for scripts and apps', 'sh');
    const prelude = `json='Content-Type: application/json'\nauth="Authorization: ${token}"\n`;
    const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', prelude + script], { env: { ...process.env, BASE: app.baseUrl } });
    expect(stdout).toContain('{"data":[],"links":');
    expect(stdout).toContain('"code":"insufficient_scope"');
    expect(stdout).toContain('"meta":{"required_scope":"tasks:write"}');
    expect(stdout).toContain(' -> 403');
    expect(stdout).toContain('"name":"Calendar sync","kind":"personal","scopes":["tasks:read"]');
    expect(stdout).toContain('"kind":"session"');
    // Nothing was written by the refused request.
    expect((await app.request('GET', '/api/users/me/tasks', { token })).body.data).toEqual([]);
  });

  it('runs the TypeScript client example', async () => {
    const app = await startTestApp(); // a database of its own, where alice has nothing yet
    onTestFinished(() => app.close());
    await createClient({ url: app.baseUrl }).users.register.mutate({ user: { username: 'alice', password: 'correct horse' } });
    // From here on, the example as written, but for the address.
    const url = app.baseUrl;
    const anonymous = createClient({ url });
    const { meta } = await anonymous.users.authorize.mutate({ username: 'alice', password: 'correct horse' });
    const session = createClient({ url, token: meta.token });
    await session.users.update.mutate({ user: { time_zone: 'America/New_York' } });
    // A script gets a token of its own: projects and tasks only, for 30 days.
    const expires_at = Math.floor(Date.now() / 1000) + 30 * 86_400;
    const { meta: made } = await session.tokens.create.mutate({ token: { name: 'Tea script', scopes: ['projects:write', 'tasks:write'], expires_at } });
    const api = createClient({ url, token: made.secret });
    const { data: project } = await api.projects.create.mutate({ project: { name: 'Tea' } });
    await api.tasks.create.mutate({ task: { label: 'Boil water', project_id: project.id } });
    const { data: tasks } = await api.tasks.list.query({ page: 1 });
    const { data: open } = await api.tasks.list.query({ project_id: [project.id], state: ['newed', 'started'], sort: '-order', page_size: 100 });
    expect(tasks.map((t) => [t.attributes.label, t.attributes.state, t.relationships.project.data])).toEqual([
      ['Boil water', 'newed', { type: 'project', id: project.id }],
    ]);
    expect(open).toEqual(tasks);
    expect((await api.users.me.query()).data.attributes.timeZone).toBe('America/New_York');
    // The script's token is limited to its scopes.
    await expect(api.users.update.mutate({ user: { time_zone: 'UTC' } })).rejects.toMatchObject({ data: { httpStatus: 403, code: 'insufficient_scope' } });
    expectCopiedHere(readme, '## Using it from TypeScript', "const url = 'http://localhost:3000';");
  });

  it('runs the REST client example', async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    expect((await app.request('POST', '/api/users', { body: { user: { username: 'alice', password: 'correct horse' } } })).status).toBe(201);
    const createClient = createRestClient;
    const printed: unknown[][] = [];
    const console = { log: (...values: unknown[]) => printed.push(values) };
    // From here on, the example as written, but for the address.
    const baseUrl = app.baseUrl;
    const login = await usersAuthorize({ client: createClient({ baseUrl }), body: { username: 'alice', password: 'correct horse' } });
    const rest = createClient({ baseUrl, auth: () => login.data!.meta.token });
    await tasksCreate({ client: rest, body: { task: { label: 'Grind beans' } } });
    const { data: page } = await tasksList({ client: rest, query: { page: 1 } });
    const refused = await tasksCreate({ client: rest, body: { task: { label: '' } } });
    console.log(page!.data.length, refused.response?.status, refused.error?.errors[0]?.code); // 1 422 invalid
    expect(printed).toEqual([[1, 422, 'invalid']]);
    expect(page!.data[0]!.attributes.label).toBe('Grind beans');
    expectCopiedHere(readme, '## Using it from TypeScript', "const baseUrl = 'http://localhost:3000';");
  });

  it('runs the change log example: delta sync, and the subscription that prints changes', async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    const { meta } = await createClient({ url: app.baseUrl }).users.register.mutate({ user: { username: 'alice', password: 'correct horse' } });
    const token = meta.token;
    const printed: unknown[][] = [];
    const console = { log: (...values: unknown[]) => printed.push(values) };
    // From here on, the example as written, but for the address.
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
    expectCopiedHere(changeLogPage, '# Staying in sync', "const url = 'http://localhost:3000';");

    // The curl block's delta sync, run as written against the same log.
    const script = codeBlockAfter(changeLogPage, '# Staying in sync', 'sh').split('\n').filter((l) => !l.startsWith('curl -N')).join('\n');
    const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', `auth="Authorization: ${token}"\n${script}`], {
      env: { ...process.env, BASE: app.baseUrl },
    });
    expect(stdout).toContain('{"data":[],"links":{},"meta":{"last_event_id":"1"}}');
    expect(stdout).toContain('"type":"task.created"');
  });

  it('runs the webhook receiver example: it verifies and prints a delivery, and refuses a forged one', async () => {
    const databaseUrl = await createTestDatabase();
    const config = {
      ...loadConfig({ WEBHOOK_ALLOW_PRIVATE_URLS: '1' }),
      databaseUrl, port: 0, host: '127.0.0.1', passwordHashCost: 1024, rateLimitAuthPerMinute: 0, rateLimitPerMinute: 0,
    };
    const service = await startService({ config, logger: createLogger('silent') });
    onTestFinished(() => service.stop());
    const { token } = await registerUser(service.url, 'alice');
    const port = await freePort();
    const created = await call(service.url, 'POST', '/api/users/me/webhooks', { token, body: { webhook: { url: `http://127.0.0.1:${port}/` } } });
    expect(created.status).toBe(201);
    // The page's receiver as written, but for its port and where the library is found.
    const code = codeBlockAfter(webhooksPage, '# Webhooks', 'js')
      .replace("from 'standardwebhooks'", `from '${pathToFileURL(createRequire(import.meta.url).resolve('standardwebhooks')).href}'`)
      .replace('.listen(8443)', `.listen(${port}, '127.0.0.1', () => console.log('listening'))`);
    expect(code).toContain('webhook.verify(body, req.headers)');
    const dir = await mkdtemp(join(tmpdir(), 'receiver-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'receiver.mjs'), code);
    const receiver = spawn(process.execPath, [join(dir, 'receiver.mjs')], { env: { ...process.env, WEBHOOK_SECRET: created.body.meta.secret } });
    onTestFinished(() => void receiver.kill());
    let printed = '';
    receiver.stdout.on('data', (chunk: Buffer) => (printed += chunk.toString()));
    await eventually(() => printed.includes('listening'), { message: 'the receiver listens' });
    const forged = await rawRequest(`http://127.0.0.1:${port}/`, 'POST', {
      'content-type': 'application/json', 'webhook-id': '1', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,AAAA',
    }, '{"id":"1"}');
    expect(forged.status).toBe(401);
    expect((await call(service.url, 'POST', '/api/users/me/projects', { token, body: { project: { name: 'Tea' } } })).status).toBe(201);
    await eventually(() => printed.includes('1 project.created'), { message: 'the receiver printed the verified event', timeout: 10_000 });
    // The attempt is recorded once the receiver's answer is read: a moment after it printed.
    const attempts = async () =>
      (await call(service.url, 'GET', `/api/webhooks/${created.body.data.id}/deliveries`, { token })).body.data.map((d: any) => [d.attributes.eventId, d.attributes.outcome, d.attributes.httpStatus]);
    await eventually(async () => (await attempts()).length > 0, { message: 'the delivery is recorded', timeout: 10_000 });
    expect(await attempts()).toEqual([['1', 'delivered', 204]]);
  });
});
