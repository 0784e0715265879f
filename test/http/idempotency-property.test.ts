/**
 * The property of Idempotency-Key (API-CONTRACT.md §11), searched by fast-check on the real
 * database through both doors: any sequence of writes, each sent 1 to 3 times with its own
 * key (the copies sometimes in parallel), leaves exactly the state, the change log and the
 * answers that sending each once leaves. Two users run the same sequence: one sends each
 * request once, the other with its copies; their projects, tasks (with their versions) and
 * event counts must then be equal, up to their ids. The generators are hostile too: odd
 * keys (and invalid ones, refused before anything runs), huge numbers, wrong types, unknown
 * ids.
 */
import { TRPCClientError } from '@trpc/client';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { callOptions } from '../../src/client.js';
import { DAY, T0, seconds, useTestAppWithSql } from '../helpers/test-app.js';

const { app, db } = useTestAppWithSql();

const DUE = seconds(T0) + 7 * DAY;

type Ref = { kind: 'project' | 'task'; index: number } | { raw: unknown };

interface Op {
  procedure: string;
  method: 'POST' | 'PATCH' | 'PUT' | 'DELETE';
  /** The REST path, `{id}` replaced by the resolved reference. */
  path: string;
  ref?: Ref;
  /** The REST body; the tRPC input adds `id`. */
  body?: Record<string, unknown>;
}

const hostileNumber = fc.oneof(
  fc.constantFrom(2 ** 31, 2 ** 53, 1e20, -1, 0.5, Number.MAX_SAFE_INTEGER),
  fc.constantFrom('07', null, true, [], {}), // '07' names no record in either run (a bare '7' could)
);
const ref = (kind: 'project' | 'task'): fc.Arbitrary<Ref> =>
  fc.oneof({ weight: 8, arbitrary: fc.nat(6).map((index) => ({ kind, index })) }, { weight: 1, arbitrary: hostileNumber.map((raw) => ({ raw })) });
const label = fc.oneof(fc.string({ minLength: 1, maxLength: 12 }), fc.constantFrom('', 'é🙂', 'x'.repeat(1001)), hostileNumber);

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ name: fc.oneof(fc.stringMatching(/^[A-Za-z][A-Za-z0-9_-]{0,6}$/), fc.constantFrom('bad name', 'x'.repeat(101))) }).map(
    ({ name }): Op => ({ procedure: 'projects.create', method: 'POST', path: '/api/users/me/projects', body: { project: { name } } }),
  ),
  fc.record({ label, project: fc.option(ref('project')), planned: fc.option(fc.oneof(fc.constant(DUE), hostileNumber)) }).map(
    ({ label, project, planned }): Op => ({
      procedure: 'tasks.create', method: 'POST', path: '/api/users/me/tasks',
      body: { task: { label, ...(project ? { project_id: project } : {}), ...(planned !== null ? { planned_at: planned } : {}) } },
    }),
  ),
  fc.record({ task: ref('task'), label }).map(({ task, label }): Op => ({ procedure: 'tasks.update', method: 'PATCH', path: '/api/tasks/{id}', ref: task, body: { task: { label } } })),
  fc.record({ task: ref('task'), state: fc.constantFrom('newed', 'started', 'planned', 'planned', 'finished', 'abandoned', 'bogus') }).map(
    ({ task, state }): Op => ({ procedure: 'tasks.changeState', method: 'PUT', path: '/api/tasks/{id}/state', ref: task, body: { task: { state } } }),
  ),
  fc.record({ task: ref('task'), order: fc.oneof(fc.integer({ min: 1, max: 6 }), hostileNumber) }).map(
    ({ task, order }): Op => ({ procedure: 'tasks.reorder', method: 'PUT', path: '/api/tasks/{id}/order', ref: task, body: { task: { order } } }),
  ),
  fc.record({ project: ref('project'), state: fc.constantFrom('started', 'paused', 'finished') }).map(
    ({ project, state }): Op => ({
      procedure: 'projects.changeState', method: 'PUT', path: '/api/projects/{id}/state', ref: project,
      body: { project: { state, ...(state === 'started' ? { due_at: DUE } : {}) } },
    }),
  ),
  fc.record({ project: ref('project'), description: fc.string({ maxLength: 10 }) }).map(
    ({ project, description }): Op => ({ procedure: 'projects.update', method: 'PATCH', path: '/api/projects/{id}', ref: project, body: { project: { description } } }),
  ),
  ref('project').map((project): Op => ({ procedure: 'projects.delete', method: 'DELETE', path: '/api/projects/{id}', ref: project })),
);

const visible = fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c));
const key = fc.oneof(
  { weight: 10, arbitrary: fc.string({ unit: visible, minLength: 1, maxLength: 40 }) },
  { weight: 1, arbitrary: fc.constantFrom('', 'a b', 'x'.repeat(256), 'été') },
);

const step = fc.record({ op, key, copies: fc.integer({ min: 1, max: 3 }), parallel: fc.boolean(), door: fc.constantFrom('rest', 'trpc') });

interface Answer {
  status: number;
  body: unknown;
}

interface User {
  id: number;
  token: string;
  created: { project: number[]; task: number[] };
}

function resolve(user: User, r: Ref | undefined): unknown {
  if (!r) return undefined;
  if ('raw' in r) return r.raw;
  const ids = user.created[r.kind];
  return ids.length === 0 ? 999_999 : ids[r.index % ids.length];
}

/** Replaces the user's ids by their creation rank, so two users' answers compare. */
function normalise(user: User, value: unknown, parentKey = ''): unknown {
  if (Array.isArray(value)) return value.map((v) => normalise(user, v, parentKey));
  if (value && typeof value === 'object') {
    const o = value as Record<string, unknown>;
    const kind = o.type === 'project' || o.type === 'task' ? (o.type as 'project' | 'task') : undefined;
    return Object.fromEntries(
      Object.entries(o).map(([k, v]) => {
        if (k === 'id' && kind && typeof v === 'number') return [k, `${kind}#${user.created[kind].indexOf(v)}`];
        if (k === 'id' && o.type === 'user') return [k, 'user'];
        return [k, normalise(user, v, k)];
      }),
    );
  }
  return value;
}

async function sendOnce(user: User, o: Op, k: string, door: 'rest' | 'trpc'): Promise<Answer> {
  const id = resolve(user, o.ref);
  if (door === 'rest') {
    const path = o.path.replace('{id}', encodeURIComponent(String(id)));
    const res = await app.request(o.method, path, { token: user.token, body: o.body, headers: { 'Idempotency-Key': k } });
    return { status: res.status, body: res.body ?? null };
  }
  const api = app.trpc(user.token) as unknown as Record<string, Record<string, { mutate: (input: unknown, opts: unknown) => Promise<unknown> }>>;
  const [router, procedure] = o.procedure.split('.') as [string, string];
  const input = o.ref ? { ...o.body, id } : o.body;
  try {
    const data = await api[router]![procedure]!.mutate(input, callOptions({ idempotencyKey: k }));
    return { status: 0, body: data ?? null };
  } catch (error) {
    if (!(error instanceof TRPCClientError)) throw error;
    return { status: (error.data as { httpStatus: number }).httpStatus, body: (error.data as { errors: unknown }).errors };
  }
}

async function stateOf(user: User) {
  const projects = (await db.query('select * from projects where user_id = $1 order by id', [user.id])).rows;
  const tasks = (await db.query('select * from tasks where user_id = $1 order by id', [user.id])).rows;
  const rank = (kind: 'project' | 'task', id: number | null) => (id === null ? null : user.created[kind].indexOf(id));
  return {
    projects: projects.map(({ id, user_id, created_at, ...p }) => ({ ...p, id: rank('project', id) })),
    tasks: tasks.map(({ id, user_id, project_id, created_at, ...t }) => ({ ...t, id: rank('task', id), project: rank('project', project_id) })),
    events: (await db.query('select count(*)::int as n from events where user_id = $1', [user.id])).rows[0].n,
  };
}

function remember(user: User, o: Op, answer: Answer) {
  const ok = answer.status === 201 || (answer.status === 0 && o.method === 'POST');
  if (!ok) return;
  const kind = o.procedure.startsWith('projects') ? 'project' : 'task';
  const id = (answer.body as { data: { id: number } }).data.id;
  if (!user.created[kind].includes(id)) user.created[kind].push(id);
}

describe('Idempotency-Key, as a property over both doors', () => {
  it('sending each write 1 to 3 times with its key leaves what sending it once leaves', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), async (steps) => {
        run++;
        const once: User = { ...(await app.register()), created: { project: [], task: [] } };
        const repeated: User = { ...(await app.register()), created: { project: [], task: [] } };
        for (const [i, s] of steps.entries()) {
          // Keys are unique within a sequence (the same key on another request is a different rule).
          const k = s.key.length >= 1 && s.key.length <= 200 && /^[\x21-\x7e]+$/.test(s.key) ? `${s.key}#${run}.${i}` : s.key;
          const expected = await sendOnce(once, s.op, k, s.door);
          remember(once, s.op, expected);
          const copies = s.parallel
            ? await Promise.all(Array.from({ length: s.copies }, () => sendOnce(repeated, s.op, k, s.door)))
            : await (async () => {
                const out: Answer[] = [];
                for (let c = 0; c < s.copies; c++) out.push(await sendOnce(repeated, s.op, k, s.door));
                return out;
              })();
          const answered = copies.filter((c) => c.status !== 409);
          // A parallel copy may meet its twin running (409 request_in_progress); one always runs.
          expect(answered.length, `step ${i}`).toBeGreaterThan(0);
          if (!s.parallel) expect(answered).toHaveLength(s.copies);
          for (const c of answered) {
            expect(c.status, `step ${i}: ${JSON.stringify(c.body)}`).toBe(expected.status);
            remember(repeated, s.op, c);
            expect(normalise(repeated, c.body), `step ${i}`).toEqual(normalise(once, expected.body));
          }
        }
        expect(await stateOf(repeated)).toEqual(await stateOf(once));
      }),
      { numRuns: 25 },
    );
  }, 240_000);
});
