/**
 * SQL and HTML metacharacters are data (the harness: test/helpers/hostile.ts): stored and
 * answered verbatim through both doors, invalid as project names, never wildcards in name or
 * username lookups, and every table still there.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { expectUnchanged, JSON_UTF8, listPages, newVictim, snapshot, trpcError, useHostileApp, type Victim } from '../helpers/hostile.js';
import { type ApiResponse } from '../helpers/test-app.js';

const app = useHostileApp();

// ---------------------------------------------------------------------------------------------
// SQL and HTML metacharacters
// ---------------------------------------------------------------------------------------------

describe('injection: metacharacters are data', () => {
  const PAYLOADS = [
    "'); drop table tasks; --",
    '<script>alert(1)</script>',
    '\\" OR 1=1 --',
    "Robert'); DROP TABLE projects;--",
    'back\\slash \\\\ \\n \\u0000',
    '100% _match_ %%',
    '$1 $2 ? ?? :name @p0',
    "' OR '1'='1' /*",
    '"><img src=x onerror=alert(1)>',
    "E'\\x27' || chr(39) ||",
    '`id` ; \u2028 \u2029 ${1+1} {{1}}',
  ];

  let victim: Victim;
  beforeAll(async () => {
    victim = await newVictim();
  });

  async function tablesExist() {
    const [row] = await app.orm.em.fork().execute<{ users: string; tokens: string; projects: string; tasks: string }[]>(
      `select to_regclass('public.users')::text as users, to_regclass('public.access_tokens')::text as tokens,
              to_regclass('public.projects')::text as projects, to_regclass('public.tasks')::text as tasks`,
    );
    expect(row).toEqual({ users: 'users', tokens: 'access_tokens', projects: 'projects', tasks: 'tasks' });
  }

  it.each(PAYLOADS)('REST stores and returns %j verbatim as a label and a description', async (payload) => {
    const created = await app.request('POST', '/api/users/me/tasks', { token: victim.token, body: { task: { label: payload } } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data.attributes.label).toBe(payload);
    const id = created.body.data.id;
    const read = await app.request('GET', `/api/tasks/${id}`, { token: victim.token });
    expect(read.body.data.attributes.label).toBe(payload);
    const updated = await app.request('PATCH', `/api/tasks/${id}`, { token: victim.token, body: { task: { label: `${payload}${payload}` } } });
    expect(updated.body.data.attributes.label).toBe(`${payload}${payload}`);
    const [row] = await app.orm.em.fork().execute<{ label: string }[]>('select label from tasks where id = ?', [id]);
    expect(row!.label).toBe(`${payload}${payload}`);

    const patched = await app.request('PATCH', `/api/projects/${victim.projectIds[0]}`, { token: victim.token, body: { project: { description: payload } } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.data.attributes.description).toBe(payload);
    const project = await app.request('GET', `/api/projects/${victim.projectIds[0]}`, { token: victim.token });
    expect(project.body.data.attributes.description).toBe(payload);
    // JSON, not HTML: the response is never served as markup.
    expect(project.headers.get('content-type')).toBe(JSON_UTF8);
    await tablesExist();
  });

  it.each(PAYLOADS)('tRPC stores and returns %j verbatim', async (payload) => {
    const client = app.trpc(victim.token);
    const created = await client.tasks.create.mutate({ task: { label: payload } });
    expect(created.data.attributes.label).toBe(payload);
    expect((await client.tasks.get.query({ id: created.data.id })).data.attributes.label).toBe(payload);
    const updated = await client.projects.update.mutate({ id: victim.projectIds[1]!, project: { description: payload } });
    expect(updated.data.attributes.description).toBe(payload);
    expect((await client.projects.get.query({ id: victim.projectIds[1]! })).data.attributes.description).toBe(payload);
    await tablesExist();
  });

  it.each(PAYLOADS)('a project name %j is 422 invalid on both doors and creates nothing', async (payload) => {
    const before = await snapshot(victim);
    const res = await app.request('POST', '/api/users/me/projects', { token: victim.token, body: { project: { name: payload } } });
    expect(res.status).toBe(422);
    expect(res.body.errors.map((e: any) => [e.code, e.source.pointer])).toContainEqual(['invalid', '/project/name']);
    const error = await trpcError(app.trpc(victim.token).projects.create.mutate({ project: { name: payload } }));
    expect(error).toMatchObject({ code: 'invalid', httpStatus: 422 });
    await expectUnchanged(victim, before);
    await tablesExist();
  });

  it('the task list still lists every task stored with a payload, in order', async () => {
    // A user of its own, with a task of each payload through each door (as the tests above
    // store them, whether they ran before or not).
    const victim = await newVictim();
    for (const payload of PAYLOADS) {
      const created = await app.request('POST', '/api/users/me/tasks', { token: victim.token, body: { task: { label: payload } } });
      expect(created.status, created.text).toBe(201);
      await app.trpc(victim.token).tasks.create.mutate({ task: { label: payload } });
    }
    const pages = (await listPages(victim.token, '/api/users/me/tasks')).flatMap((text) => JSON.parse(text).data);
    const labels = pages.map((t: any) => t.attributes.label);
    for (const payload of PAYLOADS) expect(labels).toContain(payload);
    const [counts] = await app.orm.em.fork().execute<{ n: number }[]>('select count(*)::int as n from tasks where user_id = ?', [victim.id]);
    expect(counts!.n).toBe(3 + 2 * PAYLOADS.length);
  });

  it('_ and % in names and usernames are not wildcards', async () => {
    const a = await app.request('POST', '/api/users/me/projects', { token: victim.token, body: { project: { name: 'a_b' } } });
    expect(a.status).toBe(201);
    const b = await app.request('POST', '/api/users/me/projects', { token: victim.token, body: { project: { name: 'axb' } } });
    expect(b.status, 'a_b must not match axb as a LIKE pattern').toBe(201);
    const upper = await app.request('POST', '/api/users/me/projects', { token: victim.token, body: { project: { name: 'A_B' } } });
    expect(onlyCode(upper)).toBe('taken');

    const user = await app.register('wild_card');
    for (const username of ['wild%', 'wild_card%', 'wild\\_card', 'wildxcard', "wild_card' --", 'WILD_CARD']) {
      const login = await app.request('POST', '/api/users/authorizations', { body: { username, password: 'correct horse' } });
      expect(login.status, username).toBe(401);
      expect(onlyCode(login)).toBe('login_failed');
    }
    const login = await app.request('POST', '/api/users/authorizations', { body: { username: user.username, password: 'correct horse' } });
    expect(login.status).toBe(201);
  });
});

function onlyCode(res: ApiResponse): string {
  expect(res.body.errors).toHaveLength(1);
  return res.body.errors[0].code;
}
