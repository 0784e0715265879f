/**
 * The change log's delivery guarantees (API-CONTRACT.md §10) on the real database:
 * - commits that would land out of order (a later writer waiting on an earlier one) are
 *   still numbered and seen in commit order, never a number below one already seen;
 * - under parallel writes of one user through two server instances, a stream opened on
 *   one instance receives every event exactly once, in order;
 * - applying every event to an empty copy gives exactly what the list endpoints return
 *   (a property over random writes through both doors).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { EVENTS_PATH } from '../../src/changes/events.router.js';
import { eventually } from '../helpers/eventually.js';
import { mulberry32 } from '../helpers/prng.js';
import { openStream } from '../helpers/sse.js';
import { DAY, T0, directUrlOf, seconds, startTestApp, type TestApp } from '../helpers/test-app.js';

let one: TestApp;
let two: TestApp;
beforeAll(async () => {
  one = await startTestApp({ eventsIdleMs: 200 });
  two = await startTestApp({ databaseUrl: one.databaseUrl, eventsIdleMs: 200 });
});
afterAll(async () => {
  await two?.close();
  await one?.close();
});

const EVENTS = EVENTS_PATH;

describe('order and completeness', () => {
  it('a writer that waits on an earlier one takes its number only after that one commits', async () => {
    const u = await one.register();
    const stream = await openStream(`${one.baseUrl}${EVENTS}?after=0`, { Authorization: u.token });
    // The first writer takes the user's lock and numbers its event under it, as every write
    // does (src/writes/write-functions.ts `apply`), and holds them uncommitted.
    const first = new pg.Client({ connectionString: directUrlOf(one.databaseUrl) });
    await first.connect();
    await first.query('begin');
    await first.query('select 1 from users where id = $1 for no key update', [u.id]);
    await first.query(
      `with mark as (update users set last_event_seq = last_event_seq + 1 where id = $1 returning last_event_seq)
       insert into events (user_id, seq, type, data, at) select $1, last_event_seq, 'task.updated', '{"n":"first"}', now() from mark`,
      [u.id],
    );
    // The second, a request to the other instance, starts meanwhile and must wait for the lock, not take a number.
    const second = two.request('POST', '/api/users/me/tasks', { token: u.token, body: { task: { label: 'second' } } });
    // Nothing is visible while the first holds: the second waits for the owner's lock (as
    // PostgreSQL shows) and has taken no number.
    await eventually(
      async () => {
        const [row] = await one.orm.em.fork().execute<Array<{ n: number }>>(
          "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
        );
        return row!.n > 0;
      },
      { message: "the second writer waits for the owner's lock" },
    );
    const during = await one.request('GET', `${EVENTS}?after=0`, { token: u.token });
    expect(during.body.data).toEqual([]);
    await first.query('commit');
    await first.end();
    expect((await second).status).toBe(201);

    const seen = [await stream.nextEvent(), await stream.nextEvent()].map((m) => [m.id, JSON.parse(m.data).type]);
    expect(seen).toEqual([['1', 'task.updated'], ['2', 'task.created']]);
    stream.close();
  });

  it('parallel writes of one user through two instances reach a stream on one of them once each, in order', async () => {
    const u = await one.register();
    const stream = await openStream(`${one.baseUrl}${EVENTS}?after=0`, { Authorization: u.token });
    expect(stream.status).toBe(200);
    const apps = [one, two];
    const random = mulberry32(7);
    const writers = Array.from({ length: 8 }, (_, w) =>
      (async () => {
        for (let i = 0; i < 15; i++) {
          const app = apps[(w + i) % 2]!;
          const res = random() < 0.7
            ? await app.request('POST', '/api/users/me/tasks', { token: u.token, body: { task: { label: `w${w}-${i}` } } })
            : await app.request('PUT', `/api/tasks/${1 + Math.floor(random() * 5)}/order`, { token: u.token, body: { task: { order: 1 + Math.floor(random() * 10) } } });
          expect([200, 201, 404]).toContain(res.status);
        }
      })(),
    );
    await Promise.all(writers);
    const total = (await one.request('GET', `${EVENTS}?after=0`, { token: u.token })).body;
    const all: string[] = [];
    let path: string | undefined = `${EVENTS}?after=0`;
    while (path) {
      const page: any = (await one.request('GET', path, { token: u.token })).body;
      all.push(...page.data.map((e: any) => e.id));
      path = page.links.next?.replace(one.baseUrl, '');
    }
    expect(total.data.length).toBeGreaterThan(0);
    expect(all).toEqual(all.map((_, i) => String(i + 1)));
    const received: string[] = [];
    while (received.length < all.length) received.push((await stream.nextEvent(10_000)).id!);
    expect(received).toEqual(all);
    stream.close();
  });
});

describe('final state agrees', () => {
  type Op =
    | { kind: 'createProject'; name: string }
    | { kind: 'createTask'; label: string; project: number | null; planned: boolean }
    | { kind: 'projectState'; project: number; state: 'started' | 'paused' | 'finished' }
    | { kind: 'moveTask'; task: number; project: number | null }
    | { kind: 'taskState'; task: number; state: 'started' | 'planned' | 'finished' | 'abandoned' | 'newed' }
    | { kind: 'reorder'; task: number; order: number }
    | { kind: 'deleteProject'; project: number }
    | { kind: 'rename'; project: number; name: string };

  const ref = fc.integer({ min: 0, max: 7 });
  const op: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ kind: fc.constant('createProject' as const), name: fc.stringMatching(/^[a-z]{1,6}$/) }),
    fc.record({ kind: fc.constant('createTask' as const), label: fc.string({ minLength: 1, maxLength: 8 }), project: fc.option(ref, { nil: null }), planned: fc.boolean() }),
    fc.record({ kind: fc.constant('projectState' as const), project: ref, state: fc.constantFrom('started' as const, 'paused' as const, 'finished' as const) }),
    fc.record({ kind: fc.constant('moveTask' as const), task: ref, project: fc.option(ref, { nil: null }) }),
    fc.record({ kind: fc.constant('taskState' as const), task: ref, state: fc.constantFrom('started' as const, 'planned' as const, 'finished' as const, 'abandoned' as const, 'newed' as const) }),
    fc.record({ kind: fc.constant('reorder' as const), task: ref, order: fc.integer({ min: 1, max: 12 }) }),
    fc.record({ kind: fc.constant('deleteProject' as const), project: ref }),
    fc.record({ kind: fc.constant('rename' as const), project: ref, name: fc.stringMatching(/^[A-Z][a-z]{0,5}$/) }),
  );

  it('applying every event to an empty copy gives what the lists return (random writes, both doors)', async () => {
    const seed = Number(process.env.FC_SEED ?? 20261123);
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(op, fc.boolean()), { minLength: 5, maxLength: 25 }), async (ops) => {
        const u = await one.register();
        const start = (await one.request('GET', EVENTS, { token: u.token })).body.meta.last_event_id as string;
        const trpc = two.trpc(u.token);
        const projects: number[] = [];
        const tasks: number[] = [];
        const pick = (list: number[], i: number | null) => (i === null || list.length === 0 ? null : list[i % list.length]!);
        const due = seconds(T0) + 5 * DAY;
        for (const [o, viaTrpc] of ops) {
          const rest = (method: string, path: string, body?: unknown) => (viaTrpc ? two : one).request(method, path, { token: u.token, body });
          const quietly = <T>(p: Promise<T>) => p.catch(() => undefined);
          switch (o.kind) {
            case 'createProject': {
              const res = viaTrpc
                ? await quietly(trpc.projects.create.mutate({ project: { name: o.name } }))
                : (await rest('POST', '/api/users/me/projects', { project: { name: o.name } })).body;
              if (res?.data) projects.push(res.data.id);
              break;
            }
            case 'createTask': {
              const project_id = pick(projects, o.project) ?? undefined;
              const body = { task: { label: o.label, ...(project_id ? { project_id } : {}), ...(o.planned ? { planned_at: due } : {}) } };
              const res = viaTrpc ? await quietly(trpc.tasks.create.mutate(body)) : (await rest('POST', '/api/users/me/tasks', body)).body;
              if (res?.data) tasks.push(res.data.id);
              break;
            }
            case 'projectState': {
              const id = pick(projects, o.project);
              if (id === null) break;
              const project = { state: o.state, ...(o.state === 'started' ? { due_at: due } : {}) };
              if (viaTrpc) await quietly(trpc.projects.changeState.mutate({ id, project }));
              else await rest('PUT', `/api/projects/${id}/state`, { project });
              break;
            }
            case 'moveTask': {
              const id = pick(tasks, o.task);
              if (id === null) break;
              const task = { project_id: pick(projects, o.project) };
              if (viaTrpc) await quietly(trpc.tasks.update.mutate({ id, task }));
              else await rest('PATCH', `/api/tasks/${id}`, { task });
              break;
            }
            case 'taskState': {
              const id = pick(tasks, o.task);
              if (id === null) break;
              if (viaTrpc) await quietly(trpc.tasks.changeState.mutate({ id, task: { state: o.state } }));
              else await rest('PUT', `/api/tasks/${id}/state`, { task: { state: o.state } });
              break;
            }
            case 'reorder': {
              const id = pick(tasks, o.task);
              if (id === null) break;
              if (viaTrpc) await quietly(trpc.tasks.reorder.mutate({ id, task: { order: o.order } }));
              else await rest('PUT', `/api/tasks/${id}/order`, { task: { order: o.order } });
              break;
            }
            case 'deleteProject': {
              const id = pick(projects, o.project);
              if (id === null) break;
              if (viaTrpc) await quietly(trpc.projects.delete.mutate({ id }));
              else await rest('DELETE', `/api/projects/${id}`);
              break;
            }
            case 'rename': {
              const id = pick(projects, o.project);
              if (id === null) break;
              if (viaTrpc) await quietly(trpc.projects.update.mutate({ id, project: { name: o.name } }));
              else await rest('PATCH', `/api/projects/${id}`, { project: { name: o.name } });
              break;
            }
          }
        }

        // The client's copy, built from the log alone.
        const copy = { project: new Map<number, any>(), task: new Map<number, any>() };
        let path: string | undefined = `${EVENTS}?after=${start}`;
        while (path) {
          const page: any = (await one.request('GET', path, { token: u.token })).body;
          for (const event of page.data) {
            const kind = event.data.type as 'project' | 'task';
            if (event.type.endsWith('.deleted')) copy[kind].delete(event.data.id);
            else copy[kind].set(event.data.id, event.data);
          }
          path = page.links.next?.replace(one.baseUrl, '');
        }

        const listed = async (list: string) => {
          const all: any[] = [];
          for (let page = 1; ; page++) {
            const body: any = (await one.request('GET', `${list}?page=${page}`, { token: u.token })).body;
            all.push(...body.data);
            if (!body.links.next) return all;
          }
        };
        expect([...copy.project.values()].sort((a, b) => a.id - b.id)).toEqual(await listed('/api/users/me/projects'));
        const visible = [...copy.task.values()]
          .filter((t) => t.attributes.state !== 'abandoned')
          .sort((a, b) => a.attributes.order - b.attributes.order || a.id - b.id);
        expect(visible).toEqual(await listed('/api/users/me/tasks'));
      }),
      { numRuns: 12, seed, endOnFailure: true },
    );
  });
});
