/**
 * API-CONTRACT.md §1: a body (or a tRPC query input) whose arrays and objects nest more than
 * 64 levels deep is 400 `invalid_json`, on both doors, before any library walks it. Before
 * the limit, 5,000 levels overflowed Node's stack inside tRPC's `createBody` (a 500).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { TRPCClientError } from '@trpc/client';
import { onlyError, useTestApp } from '../helpers/test-app.js';

const app = useTestApp();
let token: string;
let taskId: number;
beforeAll(async () => {
  ({ token } = await app.register());
  const created = await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'Deep' } } });
  taskId = created.body.data.id;
});

/** `n` arrays inside one another around `inner`. */
const arrays = (n: number, inner = '') => '['.repeat(n) + inner + ']'.repeat(n);
const objects = (n: number, inner = '1') => '{"a":'.repeat(n) + inner + '}'.repeat(n);

function expectTooDeep(res: { status: number; body: any; text: string }) {
  expect(res.status, res.text).toBe(400);
  expect(onlyError(res.body)).toMatchObject({ status: '400', code: 'invalid_json' });
  expect(onlyError(res.body).detail).toMatch(/nests .* more than 64 levels deep/);
}

async function trpcPost(path: string, text: string, auth = token) {
  const response = await fetch(`${app.baseUrl}/trpc/${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: auth },
    body: text,
  });
  const raw = await response.text();
  return { status: response.status, text: raw, body: JSON.parse(raw) };
}

describe('REST', () => {
  it.each([
    ['5,000 levels of arrays as the whole body', arrays(5_000)],
    ['nesting inside a member', `{"task":{"order":${arrays(5_000, '1')}}}`],
    ['nesting under an ignored member', `{"task":{"state":"started"},"$where":${arrays(5_000)}}`],
    ['65 levels of objects', objects(65)],
  ])('%s is 400 invalid_json', async (_what, rawBody) => {
    const res = await app.request('PUT', `/api/tasks/${taskId}/state`, {
      token,
      rawBody,
      headers: { 'Content-Type': 'application/json' },
    });
    expectTooDeep(res);
  });

  it('64 levels are read and judged by the endpoint; 65 are not', async () => {
    // {"task":{"order":[[…62…]]}} nests 64 deep: a wrong type, 422 on the field.
    const at = await app.request('PUT', `/api/tasks/${taskId}/order`, {
      token,
      rawBody: `{"task":{"order":${arrays(62, '1')}}}`,
      headers: { 'Content-Type': 'application/json' },
    });
    expect(at.status, at.text).toBe(422);
    expect(onlyError(at.body)).toMatchObject({ code: 'invalid', source: { pointer: '/task/order' } });
    const over = await app.request('PUT', `/api/tasks/${taskId}/order`, {
      token,
      rawBody: `{"task":{"order":${arrays(63, '1')}}}`,
      headers: { 'Content-Type': 'application/json' },
    });
    expectTooDeep(over);
  });

  it('brackets inside strings are text, not nesting', async () => {
    const label = '[{'.repeat(200) + '"\\' + ']}'.repeat(200);
    const res = await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label } } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.attributes.label).toBe(label);
  });

  it('a refused body changes nothing: the task keeps its state', async () => {
    await app.request('PUT', `/api/tasks/${taskId}/state`, {
      token,
      rawBody: `{"task":{"state":"abandoned","x":${arrays(100)}}}`,
      headers: { 'Content-Type': 'application/json' },
    });
    const task = await app.request('GET', `/api/tasks/${taskId}`, { token });
    expect(task.body.data.attributes.state).toBe('started');
  });
});

describe('tRPC', () => {
  it('a deep body is 400 invalid_json in the tRPC error shape, and the door still serves', async () => {
    for (const text of [arrays(5_000), `{"json":{"task":{"label":"x","y":${arrays(5_000)}}}}`, `{"json":${objects(65)}}`]) {
      const res = await trpcPost('tasks.create', text);
      expect(res.status, res.text).toBe(400);
      expect(res.body.error.json.data).toMatchObject({ code: 'invalid_json', httpStatus: 400 });
      expect(res.body.error.json.data.errors[0].detail).toMatch(/more than 64 levels deep/);
    }
    const served = await trpcPost('tasks.create', '{"json":{"task":{"label":"AfterDeep"}}}');
    expect(served.status, served.text).toBe(200);
  });

  it('the input is held to the limit of /api: superjson\'s {"json": …} and a batch\'s {"0": …} around it are not counted', async () => {
    // The input {"task":{"order":[[…62…]]}} nests 64 deep, as on /api above: the endpoint judges it (422); one more level is refused.
    const input = (levels: number) => `{"id":${taskId},"task":{"order":${arrays(levels, '1')}}}`;
    const single = await trpcPost('tasks.reorder', `{"json":${input(62)}}`);
    expect(single.status, single.text).toBe(422);
    expect(single.body.error.json.data.code).toBe('invalid');
    const batched = await trpcPost('tasks.reorder?batch=1', `{"0":{"json":${input(62)}}}`);
    expect(batched.status, batched.text).toBe(422);
    expect(batched.body[0].error.json.data.code).toBe('invalid');
    for (const [path, text] of [['tasks.reorder', `{"json":${input(63)}}`], ['tasks.reorder?batch=1', `{"0":{"json":${input(63)}}}`]] as const) {
      const over = await trpcPost(path, text);
      expect(over.status, over.text).toBe(400);
      expect(JSON.stringify(over.body)).toContain('more than 64 levels deep');
    }
  });

  it('a deep query input is 400 invalid_json', async () => {
    const input = encodeURIComponent(`{"json":{"page":${arrays(65, '1')}}}`);
    const response = await fetch(`${app.baseUrl}/trpc/tasks.list?input=${input}`, { headers: { Authorization: token } });
    const body = (await response.json()) as any;
    expect(response.status).toBe(400);
    expect(body.error.json.data.code).toBe('invalid_json');
  });

  it('the typed client gets invalid_json for an input nested too deep', async () => {
    let deep: unknown = 'bottom';
    for (let i = 0; i < 70; i++) deep = [deep];
    const error = await app
      .trpc(token)
      .tasks.create.mutate({ task: { label: 'x', extra: deep } } as any)
      .then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(TRPCClientError);
    expect((error as TRPCClientError<any>).data).toMatchObject({ code: 'invalid_json', httpStatus: 400 });
  });
});
