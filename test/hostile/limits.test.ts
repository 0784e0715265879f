/**
 * The limits, at and one over, through both doors (the harness: test/helpers/hostile.ts):
 * bodies of 100 KiB, names of 100, descriptions of 10,000 and labels of 1,000 code points
 * (emoji and ZWJ families), far pages and ids beyond 2^53; one over is refused and changes
 * nothing.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { BODY_LIMIT_BYTES } from '../../src/core/limits.js';
import { expectUnchanged, ID_ENDPOINTS, LISTS, newVictim, NOW, own, raw, snapshot, toJsonText, trpcError, trpcRaw, trpcRawQueryText, useHostileApp, type Victim } from '../helpers/hostile.js';
import { DAY } from '../helpers/test-app.js';

const app = useHostileApp();

describe('limits', () => {
  const LIMIT = BODY_LIMIT_BYTES;
  let victim: Victim;
  beforeAll(async () => {
    victim = await newVictim();
  });

  /** A JSON text of exactly `bytes` bytes, padded with an ignored member. */
  function padded(value: Record<string, unknown>, bytes: number): string {
    const skeleton = JSON.stringify({ ...value, pad: '' });
    const text = JSON.stringify({ ...value, pad: 'x'.repeat(bytes - Buffer.byteLength(skeleton)) });
    expect(Buffer.byteLength(text)).toBe(bytes);
    return text;
  }

  it('REST: a body one byte over 100 KiB is 413 payload_too_large on every write endpoint, and nothing changes', async () => {
    const before = await snapshot(victim);
    const [project] = victim.projectIds;
    const [task] = victim.taskIds;
    for (const [method, path, value] of [
      ['POST', '/api/users', { user: { username: 'bigbody', password: 'password1' } }],
      ['POST', '/api/users/authorizations', { username: victim.username, password: 'correct horse' }],
      ['POST', '/api/users/me/projects', { project: { name: 'TooBig' } }],
      ['PATCH', `/api/projects/${project}`, { project: { description: 'big' } }],
      ['PUT', `/api/projects/${project}/state`, { project: { state: 'started', due_at: NOW + 5 * DAY } }],
      ['DELETE', `/api/projects/${project}`, {}],
      ['POST', '/api/users/me/tasks', { task: { label: 'TooBig' } }],
      ['PATCH', `/api/tasks/${task}`, { task: { label: 'big' } }],
      ['PUT', `/api/tasks/${task}/state`, { task: { state: 'abandoned' } }],
      ['PUT', `/api/tasks/${task}/order`, { task: { order: 3 } }],
    ] as const) {
      const res = await app.request(method, path, {
        token: victim.token,
        rawBody: padded(value, LIMIT + 1),
        headers: { 'Content-Type': 'application/json' },
      });
      expect(res.status, `${method} ${path}: ${res.text}`).toBe(413);
      expect(res.body).toEqual({
        errors: [{ status: '413', code: 'payload_too_large', title: 'Payload too large', detail: expect.any(String) }],
      });
    }
    await expectUnchanged(victim, before);
  });

  it('tRPC: a body over 100 KiB is 413 payload_too_large; one of exactly 100 KiB is served', async () => {
    const before = await snapshot(victim);
    const over = await trpcRaw('tasks.create', 'mutation', victim.token, padded({ json: { task: { label: 'TooBig' } } }, LIMIT + 1));
    expect(over.status, over.response).toBe(413);
    expect(over.response).toContain('"code":"payload_too_large"');
    const typed = await trpcError(app.trpc(victim.token).tasks.create.mutate({ task: { label: 'y'.repeat(LIMIT) } }));
    expect(typed).toMatchObject({ code: 'payload_too_large', httpStatus: 413 });
    await expectUnchanged(victim, before);

    const at = await trpcRaw('tasks.create', 'mutation', victim.token, padded({ json: { task: { label: 'AtLimit' } } }, LIMIT));
    expect(at.status, at.response).toBe(200);
    expect(at.response).toContain('"label":"AtLimit"');
  });

  const emoji = '😀';
  const family = '👨‍👩‍👧'; // 5 code points: man, ZWJ, woman, ZWJ, girl

  /** Each case: the value at the limit, the one just over, and how to send them through each door. */
  const CASES = [
    {
      what: 'project name, 100 characters',
      pointer: '/project/name',
      at: (n: number) => `N${n}_${'x'.repeat(100 - 2 - String(n).length)}`,
      over: (n: number) => `M${n}_${'x'.repeat(101 - 2 - String(n).length)}`,
      rest: (v: Victim, value: string) => app.request('POST', '/api/users/me/projects', { token: v.token, body: { project: { name: value } } }),
      trpc: (v: Victim, value: string) => app.trpc(v.token).projects.create.mutate({ project: { name: value } }),
      read: (body: any) => body.data.attributes.name,
    },
    {
      what: 'project name on update, 100 characters',
      pointer: '/project/name',
      at: (n: number) => `U${n}_${'y'.repeat(100 - 2 - String(n).length)}`,
      over: (n: number) => `V${n}_${'y'.repeat(101 - 2 - String(n).length)}`,
      rest: (v: Victim, value: string) => app.request('PATCH', `/api/projects/${v.projectIds[0]}`, { token: v.token, body: { project: { name: value } } }),
      trpc: (v: Victim, value: string) => app.trpc(v.token).projects.update.mutate({ id: v.projectIds[0]!, project: { name: value } }),
      read: (body: any) => body.data.attributes.name,
    },
    {
      what: 'description, 10,000 emoji',
      pointer: '/project/description',
      at: () => emoji.repeat(10_000),
      over: () => emoji.repeat(10_001),
      rest: (v: Victim, value: string) => app.request('PATCH', `/api/projects/${v.projectIds[0]}`, { token: v.token, body: { project: { description: value } } }),
      trpc: (v: Victim, value: string) => app.trpc(v.token).projects.update.mutate({ id: v.projectIds[0]!, project: { description: value } }),
      read: (body: any) => body.data.attributes.description,
    },
    {
      what: 'description, 9,999 characters and an emoji',
      pointer: '/project/description',
      at: () => `${'d'.repeat(9_999)}${emoji}`,
      over: () => `${'d'.repeat(10_000)}${emoji}`,
      rest: (v: Victim, value: string) => app.request('PATCH', `/api/projects/${v.projectIds[1]}`, { token: v.token, body: { project: { description: value } } }),
      trpc: (v: Victim, value: string) => app.trpc(v.token).projects.update.mutate({ id: v.projectIds[1]!, project: { description: value } }),
      read: (body: any) => body.data.attributes.description,
    },
    {
      what: 'label on create, 1,000 emoji',
      pointer: '/task/label',
      at: () => emoji.repeat(1_000),
      over: () => emoji.repeat(1_001),
      rest: (v: Victim, value: string) => app.request('POST', '/api/users/me/tasks', { token: v.token, body: { task: { label: value } } }),
      trpc: (v: Victim, value: string) => app.trpc(v.token).tasks.create.mutate({ task: { label: value } }),
      read: (body: any) => body.data.attributes.label,
    },
    {
      what: 'label on update, 200 ZWJ families (1,000 code points)',
      pointer: '/task/label',
      at: () => family.repeat(200),
      over: () => `${family.repeat(200)}x`,
      rest: (v: Victim, value: string) => app.request('PATCH', `/api/tasks/${v.taskIds[0]}`, { token: v.token, body: { task: { label: value } } }),
      trpc: (v: Victim, value: string) => app.trpc(v.token).tasks.update.mutate({ id: v.taskIds[0]!, task: { label: value } }),
      read: (body: any) => body.data.attributes.label,
    },
  ];

  let n = 0;
  describe.each(CASES)('$what', (c) => {
    it('REST: at the limit accepted and stored as sent; one more is 422 too_long and changes nothing', async () => {
      const value = c.at(++n);
      const ok = await c.rest(victim, value);
      expect(ok.status, ok.text.slice(0, 300)).toBeLessThan(300);
      expect(c.read(ok.body)).toBe(value);

      const before = await snapshot(victim);
      const over = await c.rest(victim, c.over(++n));
      expect(over.status).toBe(422);
      expect(over.body).toEqual({
        errors: [{ status: '422', code: 'too_long', title: 'Resource validation failed', detail: expect.any(String), source: { pointer: c.pointer } }],
      });
      await expectUnchanged(victim, before);
    });

    it('tRPC: the same', async () => {
      const value = c.at(++n);
      const ok = await c.trpc(victim, value);
      expect(c.read(ok)).toBe(value);

      const before = await snapshot(victim);
      const error = await trpcError(c.trpc(victim, c.over(++n)));
      expect(error).toMatchObject({ code: 'too_long', httpStatus: 422 });
      expect(error.errors).toEqual([
        { status: '422', code: 'too_long', title: 'Resource validation failed', detail: expect.any(String), source: { pointer: c.pointer } },
      ]);
      await expectUnchanged(victim, before);
    });
  });

  it('the stored long values read back the same through GET', async () => {
    // Stored at their limits as the cases above store them (which may have run or not).
    const stored = [
      await app.request('PATCH', `/api/projects/${victim.projectIds[0]}`, { token: victim.token, body: { project: { description: emoji.repeat(10_000) } } }),
      await app.request('PATCH', `/api/tasks/${victim.taskIds[0]}`, { token: victim.token, body: { task: { label: family.repeat(200) } } }),
    ];
    expect(stored.map((res) => res.status)).toEqual([200, 200]);
    const project = await app.request('GET', `/api/projects/${victim.projectIds[0]}`, { token: victim.token });
    expect([...project.body.data.attributes.description]).toHaveLength(10_000);
    const task = await app.request('GET', `/api/tasks/${victim.taskIds[0]}`, { token: victim.token });
    expect(task.body.data.attributes.label).toBe(family.repeat(200));
  });

  it('page=999999 is an empty page with links, on both lists and both doors', async () => {
    for (const list of LISTS) {
      const res = await app.request('GET', `${list.path}?page=999999`, { token: victim.token });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        data: [],
        links: {
          first: `${app.baseUrl}${list.path}?page=1`,
          last: `${app.baseUrl}${list.path}?page=1`,
          prev: `${app.baseUrl}${list.path}?page=999998`,
        },
        meta: { stability: 'unstable', notice: 'This output may change soon.' },
      });
      const client = app.trpc(victim.token) as any;
      const viaTrpc = await client[list.procedure.split('.')[0]!].list.query({ page: 999999 });
      expect(viaTrpc).toEqual(res.body);
    }
  });

  it('ids 2^53+1 and 1e30 are 404 record_not_found on every id endpoint, through both doors', async () => {
    const before = await snapshot(victim);
    for (const endpoint of ID_ENDPOINTS) {
      for (const segment of ['9007199254740993', '1e30']) {
        const res = await app.request(endpoint.method, endpoint.path(segment), { token: victim.token, body: endpoint.body });
        expect(res.status, `${endpoint.method} ${endpoint.path(segment)}: ${res.text}`).toBe(404);
        expect(res.body).toEqual({
          errors: [{ status: '404', code: 'record_not_found', title: 'Record not found', detail: expect.any(String), source: { pointer: `/${endpoint.resource}` } }],
        });
      }
      for (const text of ['9007199254740993', '1e30']) {
        const body = toJsonText({ json: own([...Object.entries(endpoint.body ?? {}), ['id', raw(text)]]) });
        const outcome = endpoint.kind === 'query' ? await trpcRawQueryText(endpoint.procedure, victim.token, body) : await trpcRaw(endpoint.procedure, 'mutation', victim.token, body);
        expect(outcome.status, outcome.response).toBe(404);
        expect(outcome.response).toContain(`"code":"record_not_found"`);
      }
      for (const id of [2 ** 53 + 2, 1e30, 2n ** 53n + 1n]) {
        const client = app.trpc(victim.token) as any;
        const [namespace, name] = endpoint.procedure.split('.') as [string, string];
        const error = await trpcError(client[namespace][name][endpoint.kind === 'query' ? 'query' : 'mutate']({ ...endpoint.body, id }));
        expect(error).toMatchObject({ code: 'record_not_found', httpStatus: 404, errors: [{ source: { pointer: `/${endpoint.resource}` } }] });
      }
    }
    await expectUnchanged(victim, before);
  });
});
