/**
 * An edit form that sends every field (API-CONTRACT.md §4, "Project edits"): a `due_at` equal
 * to the project's current value (0 when unset) is no change, accepted in any state, on both
 * doors; any other value keeps the rules (only while started, not before startedAt).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TRPCClientError } from '@trpc/client';
import { DAY, T0, onlyError, seconds, startTestApp, type TestApp } from '../helpers/test-app.js';

let app: TestApp;
let token: string;
const DUE = seconds(T0) + 7 * DAY;

beforeAll(async () => {
  app = await startTestApp();
  ({ token } = await app.register());
});
afterAll(async () => {
  await app?.close();
});

async function projectIn(state: 'newed' | 'started' | 'paused' | 'finished', name: string): Promise<number> {
  const created = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name } } });
  const id = created.body.data.id as number;
  const put = (project: object) => app.request('PUT', `/api/projects/${id}/state`, { token, body: { project } });
  if (state !== 'newed') expect((await put({ state: 'started', due_at: DUE })).status).toBe(200);
  if (state === 'paused') expect((await put({ state: 'paused' })).status).toBe(200);
  if (state === 'finished') expect((await put({ state: 'finished' })).status).toBe(200);
  return id;
}

type Door = (id: number, project: Record<string, unknown>) => Promise<{ status: number; attributes?: any; code?: string; pointer?: string }>;

const doors: Array<[string, Door]> = [
  [
    'REST',
    async (id, project) => {
      const res = await app.request('PATCH', `/api/projects/${id}`, { token, body: { project } });
      if (res.status === 200) return { status: 200, attributes: res.body.data.attributes };
      const error = onlyError(res.body);
      return { status: res.status, code: error.code as string, pointer: (error.source as any)?.pointer };
    },
  ],
  [
    'tRPC',
    async (id, project) => {
      try {
        const doc = await app.trpc(token).projects.update.mutate({ id, project } as any);
        return { status: 200, attributes: doc.data.attributes };
      } catch (error) {
        if (!(error instanceof TRPCClientError)) throw error;
        return { status: error.data.httpStatus, code: error.data.code, pointer: error.data.errors[0].source?.pointer };
      }
    },
  ],
];

describe.each(doors)('PATCH with every field, %s', (door, patch) => {
  it('a newed project takes its current due_at (0) with a new name and description', async () => {
    const id = await projectIn('newed', `New_${door}`);
    const res = await patch(id, { name: `Renamed_${door}`, description: 'from the form', due_at: 0 });
    expect(res).toMatchObject({ status: 200, attributes: { name: `Renamed_${door}`, description: 'from the form', dueAt: 0, state: 'newed' } });
    expect(await patch(id, { due_at: DUE })).toMatchObject({ status: 422, code: 'cannot_be_set', pointer: '/project/due_at' });
  });

  it.each(['paused', 'finished'] as const)('a %s project takes its current due_at, and refuses another', async (state) => {
    const id = await projectIn(state, `${state}_${door}`);
    const res = await patch(id, { name: `${state}_${door}_2`, due_at: DUE });
    expect(res).toMatchObject({ status: 200, attributes: { name: `${state}_${door}_2`, dueAt: DUE, state } });
    expect(await patch(id, { due_at: DUE + DAY })).toMatchObject({ status: 422, code: 'cannot_be_set', pointer: '/project/due_at' });
    expect(await patch(id, { due_at: 0 })).toMatchObject({ status: 422, code: 'cannot_be_set' });
  });

  it('a started project takes its current due_at as no change, and still refuses one before its start', async () => {
    const id = await projectIn('started', `Started_${door}`);
    expect(await patch(id, { due_at: DUE, description: 'same date' })).toMatchObject({ status: 200, attributes: { dueAt: DUE, description: 'same date' } });
    expect(await patch(id, { due_at: seconds(T0) - 1 })).toMatchObject({ status: 422, code: 'cannot_be_before_started_at' });
  });
});
