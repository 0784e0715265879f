/** The README's examples run as written: the curl session and the TypeScript client. */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../src/client.js';
import { startTestApp, type TestApp } from './helpers/test-app.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

function codeBlockAfter(heading: string, language: string): string {
  const section = readme.slice(readme.indexOf(heading));
  const start = section.indexOf('```' + language + '\n') + language.length + 4;
  return section.slice(start, section.indexOf('\n```', start));
}

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

describe('README', () => {
  it('starts with the command that runs the service and the one that runs the tests', () => {
    const first = codeBlockAfter('# Planning service', 'sh').split('\n');
    expect(first[0]).toMatch(/^npm install && npm start\s+#/);
    expect(first[1]).toMatch(/^npm install && npm test\s+#/);
    const ci = readFileSync(new URL('../.ci/run', import.meta.url), 'utf8');
    expect(ci).toMatch(/^npm ci\b/m);
    expect(ci).toMatch(/^npm test$/m);
  });

  it('runs the curl session against a real server', async () => {
    const script = codeBlockAfter('## Using it with curl', 'sh');
    const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', script], {
      env: { ...process.env, BASE: app.baseUrl },
    });
    expect(stdout).toContain('"name":"Coffee"');
    const login = await app.request('POST', '/api/users/authorizations', { body: { username: 'alice', password: 'correct horse' } });
    const token = login.body.meta.token;
    const project = await app.request('GET', '/api/projects/1', { token });
    expect(project.body.data.attributes).toMatchObject({ state: 'finished', isInProgress: false });
    expect(project.body.data.relationships.tasks.data).toEqual([{ type: 'task', id: 1 }]);
    const tasks = await app.request('GET', '/api/users/me/tasks', { token });
    expect(tasks.body.data.map((t: any) => [t.id, t.attributes.state, t.attributes.order, t.attributes.plannedCount])).toEqual([
      [1, 'planned', 2, 2],
    ]);
  });

  it('runs the TypeScript client example', async () => {
    const anonymous = createClient({ url: app.baseUrl });
    await anonymous.users.register.mutate({ user: { username: 'ts_reader', password: 'correct horse' } });
    // From here on, the README's example with its username.
    const { meta } = await anonymous.users.authorize.mutate({ username: 'ts_reader', password: 'correct horse' });
    const api = createClient({ url: app.baseUrl, token: meta.token });
    const { data: project } = await api.projects.create.mutate({ project: { name: 'Tea' } });
    await api.tasks.create.mutate({ task: { label: 'Boil water', project_id: project.id } });
    const { data: tasks } = await api.tasks.list.query({ page: 1 });
    expect(tasks.map((t) => [t.attributes.label, t.attributes.state, t.relationships.project.data])).toEqual([
      ['Boil water', 'newed', { type: 'project', id: project.id }],
    ]);
    expect(codeBlockAfter('## Using it from TypeScript', 'ts')).toContain("await api.tasks.create.mutate({ task: { label: 'Boil water', project_id: project.id } });");
  });
});
