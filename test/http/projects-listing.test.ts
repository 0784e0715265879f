/**
 * The project list (SPEC.md 4.2; API-CONTRACT.md §7): pages of 25 by id, absolute links built
 * from the request's Host (untrusted X-Forwarded-* ignored), far pages, invalid page
 * parameters, and only the user's own projects.
 */
import { request as httpRequest } from 'node:http';
import { describe, expect, it } from 'vitest';
import { apiSteps, PROJECTS } from '../helpers/api-steps.js';
import { expectError, JSON_CT, META, projectJson } from '../helpers/envelope.js';
import { useTestApp } from '../helpers/test-app.js';
import { DUE, T0S } from '../helpers/times.js';

const app = useTestApp({ resetClock: true });
const { createProject, startProject: start, createTask, listProjects, projectsPageUrl: pageUrl } = apiSteps(app);

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

describe('page links and far pages', () => {
  it('builds page links from the Host of the request and ignores untrusted X-Forwarded-* headers', async () => {
    const user = await app.register();
    const port = new URL(app.baseUrl).port;
    const res = await new Promise<{ status: number; body: any }>((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port: Number(port),
          path: `${PROJECTS}?page=2`,
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
      first: `http://localhost:${port}${PROJECTS}?page=1`,
      last: `http://localhost:${port}${PROJECTS}?page=1`,
      prev: `http://localhost:${port}${PROJECTS}?page=1`,
    });

    const forwarded = await app.request('GET', PROJECTS, {
      token: user.token,
      headers: { 'X-Forwarded-Host': 'evil.example', 'X-Forwarded-Proto': 'https' },
    });
    expect(forwarded.body.links).toEqual({ first: pageUrl(1), last: pageUrl(1) });
  });

  // §12: links keep every parameter of the request and change only page (its value, in its place).
  it('keeps the parameters in the order sent, page where it stood, on REST and in the input\'s order on tRPC', async () => {
    const user = await app.register();
    for (const name of ['a1', 'a2', 'a3']) await createProject(user.token, name);
    const base = `${app.baseUrl}${PROJECTS}`;
    const first = await listProjects(user.token, '?page=2&page_size=1&zzz=1&state=newed&sort=-name');
    expect(first.body.links).toEqual({
      first: `${base}?page=1&page_size=1&zzz=1&state=newed&sort=-name`,
      last: `${base}?page=3&page_size=1&zzz=1&state=newed&sort=-name`,
      prev: `${base}?page=1&page_size=1&zzz=1&state=newed&sort=-name`,
      next: `${base}?page=3&page_size=1&zzz=1&state=newed&sort=-name`,
    });
    const middle = await listProjects(user.token, '?sort=-name&page=2&page_size=1');
    expect(middle.body.links.next).toBe(`${base}?sort=-name&page=3&page_size=1`);
    const unsent = await listProjects(user.token, '?sort=-name&page_size=1');
    expect(unsent.body.links.next).toBe(`${base}?sort=-name&page_size=1&page=2`);
    const api = app.trpc(user.token);
    expect((await api.projects.list.query({ page: 2, page_size: 1, state: ['newed'], sort: '-name' })).links.next).toBe(`${base}?page=3&page_size=1&state=newed&sort=-name`);
    expect((await api.projects.list.query({ sort: '-name', page_size: 1 })).links.next).toBe(`${base}?sort=-name&page_size=1&page=2`);
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
});
