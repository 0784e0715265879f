/**
 * The task list counts its pages from the user's open tasks (neither abandoned nor finished: a
 * counter on the user's row that every write opening or closing a task moves, under the user's
 * lock) plus the finished tasks inside its window. These tests drive every way a task can
 * enter or leave the open set through the API, in sequence and in parallel, and compare the
 * list's links and pages with the tasks that should be listed. Tasks written by plain SQL
 * (a seed) move no counter: `recountUserCountersSql` counts them again from the rows, as the
 * migration that made the counter did.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { daysAgo, userDay } from '../../src/core/user-day.js';
import { recountUserCountersSql } from '../../src/tasks/task.sql.js';
import { DAY, T0, seconds, useTestApp } from '../helpers/test-app.js';

const LIST = '/api/users/me/tasks';
const DUE = seconds(T0) + 30 * DAY;

const app = useTestApp();

const sql = <T = any>(text: string, params: unknown[] = []) => app.orm.em.getConnection().execute<T[]>(text, params);

/** What the list must show now: listed tasks of `userId`, by order. */
async function expectedListing(userId: number): Promise<number[]> {
  const cutoff = daysAgo(userDay(app.clock.now(), 'UTC'), 14);
  const rows = await sql<{ id: number }>(
    `select id from tasks where user_id = ? and state <> 'abandoned' and (state <> 'finished' or finished_at >= ?) order by "order", id`,
    [userId, cutoff],
  );
  return rows.map((r) => r.id);
}

async function listedByApi(token: string): Promise<{ ids: number[]; last: number }> {
  const ids: number[] = [];
  let last = 0;
  for (let page = 1; ; page++) {
    const res = await app.request('GET', `${LIST}?page=${page}`, { token });
    expect(res.status, res.text).toBe(200);
    last = Number(new URL(res.body.links.last).searchParams.get('page'));
    ids.push(...res.body.data.map((t: any) => t.id));
    if (!res.body.links.next) break;
  }
  return { ids, last };
}

async function expectListConsistent(user: { id: number; token: string }) {
  const expected = await expectedListing(user.id);
  const listed = await listedByApi(user.token);
  expect(listed.ids).toEqual(expected);
  expect(listed.last).toBe(Math.max(1, Math.ceil(expected.length / 50)));
}

describe('task counts', () => {
  it('follow creation, every state change, project start, pause and delete, in any order', async () => {
    const user = await app.register();
    const projects: number[] = [];
    for (let i = 0; i < 3; i++) {
      projects.push((await app.request('POST', '/api/users/me/projects', { token: user.token, body: { project: { name: `p${i}` } } })).body.data.id);
    }
    const tasks: number[] = [];
    let replacements = 0;
    const op = fc.oneof(
      fc.record({ kind: fc.constant('create' as const), project: fc.option(fc.nat(2)), planned: fc.boolean() }),
      fc.record({ kind: fc.constant('state' as const), task: fc.nat(), state: fc.constantFrom('started', 'planned', 'finished', 'newed', 'abandoned') }),
      fc.record({ kind: fc.constant('project' as const), project: fc.nat(2), state: fc.constantFrom('started', 'paused') }),
      fc.record({ kind: fc.constant('move' as const), task: fc.nat(), project: fc.option(fc.nat(2)) }),
      fc.record({ kind: fc.constant('delete' as const), project: fc.nat(2) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 5, maxLength: 25 }), async (ops) => {
        for (const o of ops) {
          const token = user.token;
          if (o.kind === 'create') {
            const task: Record<string, unknown> = { label: 'x' };
            if (o.project !== null) task.project_id = projects[o.project];
            if (o.planned) task.planned_at = seconds(T0) + DAY;
            const res = await app.request('POST', LIST, { token, body: { task } });
            if (res.status === 201) tasks.push(res.body.data.id);
          } else if (o.kind === 'state' && tasks.length) {
            await app.request('PUT', `/api/tasks/${tasks[o.task % tasks.length]}/state`, { token, body: { task: { state: o.state } } });
          } else if (o.kind === 'project') {
            const project = o.state === 'started' ? { state: 'started', due_at: DUE } : { state: 'paused' };
            await app.request('PUT', `/api/projects/${projects[o.project]}/state`, { token, body: { project } });
          } else if (o.kind === 'move' && tasks.length) {
            const project_id = o.project === null ? null : projects[o.project];
            await app.request('PATCH', `/api/tasks/${tasks[o.task % tasks.length]}`, { token, body: { task: { project_id } } });
          } else if (o.kind === 'delete') {
            const res = await app.request('DELETE', `/api/projects/${projects[o.project]}`, { token });
            if (res.status === 204) {
              const replacement = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: `r${++replacements}` } } });
              expect(replacement.status, replacement.text).toBe(201);
              projects[o.project] = replacement.body.data.id;
            }
          }
        }
        await expectListConsistent(user);
      }),
      { numRuns: 15 },
    );
  });

  it('hold under parallel creations, plans, finishes, abandons and project deletes of one user', async () => {
    const user = await app.register();
    const token = user.token;
    const project = (await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'busy' } } })).body.data.id;
    const created = await Promise.all(
      Array.from({ length: 60 }, (_, i) => app.request('POST', LIST, { token, body: { task: { label: `t${i}`, project_id: i % 2 ? project : undefined } } })),
    );
    const ids = created.map((r) => r.body.data.id as number);
    const put = (id: number, state: string) => app.request('PUT', `/api/tasks/${id}/state`, { token, body: { task: { state } } });
    await Promise.all(ids.map((id) => put(id, 'planned')));
    await Promise.all([
      ...ids.slice(0, 20).map((id) => put(id, 'finished')),
      ...ids.slice(20, 30).map((id) => put(id, 'abandoned')),
      app.request('DELETE', `/api/projects/${project}`, { token }),
      ...Array.from({ length: 10 }, (_, i) => app.request('POST', LIST, { token, body: { task: { label: `late${i}` } } })),
      ...ids.slice(30, 40).map((id) => app.request('PUT', `/api/tasks/${id}/order`, { token, body: { task: { order: 1 } } })),
    ]);
    await Promise.all(ids.slice(0, 10).map((id) => put(id, 'planned'))); // replan: back in the open set
    await expectListConsistent(user);
  });

  it('are counted again from the rows after plain SQL (inserts, updates and deletes of many rows), and then follow the API', async () => {
    const user = await app.register();
    const recount = () => sql(recountUserCountersSql('?'), [user.id]);
    await sql(
      `insert into tasks (user_id, label, "order", state, planned_count, created_at, finished_at)
       select ?, 'bulk', g, (array['newed','started','planned','finished','abandoned'])[1 + g % 5], 0, now(),
              case when g % 5 = 3 then now() end
         from generate_series(1, 500) g`,
      [user.id],
    );
    await recount();
    await expectListConsistent(user);
    await sql(`update tasks set state = 'abandoned' where user_id = ? and state = 'newed'`, [user.id]);
    await sql(`delete from tasks where user_id = ? and "order" > 450`, [user.id]);
    await recount();
    await expectListConsistent(user);
    // The counters recounted, the API's writes move them on: a create takes the next order.
    const created = await app.request('POST', LIST, { token: user.token, body: { task: { label: 'after the seed' } } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data.attributes.order).toBe(451);
    const listed = (await sql<{ id: number }>(`select id from tasks where user_id = ? and state not in ('finished', 'abandoned') order by "order" limit 60`, [user.id])).map((r) => r.id);
    for (const id of listed) {
      const res = await app.request('PUT', `/api/tasks/${id}/state`, { token: user.token, body: { task: { state: 'abandoned' } } });
      expect(res.status, res.text).toBe(200);
    }
    await expectListConsistent(user);
  });

  it('hold when plain SQL moves tasks to another user or another id, open or not, once recounted', async () => {
    const from = await app.register();
    const to = await app.register();
    await sql(
      `insert into tasks (user_id, label, "order", state, planned_count, created_at, finished_at)
       select ?, 'moved', g, (array['newed','finished','abandoned'])[1 + g % 3], 0, now(), case when g % 3 = 1 then now() end
         from generate_series(1, 40) g`,
      [from.id],
    );
    await sql(`update tasks set user_id = ? where user_id = ? and "order" <= 20`, [to.id, from.id]);
    await sql(`update tasks set id = id + 1000003 where user_id = ? and "order" > 30`, [from.id]);
    for (const user of [from, to]) await sql(recountUserCountersSql('?'), [user.id]);
    await expectListConsistent(from);
    await expectListConsistent(to);
  });

  it('a task inserted finished counts once replanned, and can be finished again', async () => {
    const user = await app.register();
    const [row] = await sql<{ id: number }>(
      `insert into tasks (user_id, label, "order", state, planned_count, created_at, started_at, planned_at, finished_at)
       values (?, 'done before', 1, 'finished', 1, now(), now(), now(), now()) returning id`,
      [user.id],
    );
    const put = (state: string) => app.request('PUT', `/api/tasks/${row!.id}/state`, { token: user.token, body: { task: { state } } });
    expect((await put('planned')).status).toBe(200);
    await expectListConsistent(user);
    expect((await put('finished')).status).toBe(200);
    await expectListConsistent(user);
    expect((await put('planned')).status).toBe(200);
    await expectListConsistent(user);
  });

  it('the list counts finished tasks only inside its 14-day window, as the days pass', async () => {
    const user = await app.register();
    const token = user.token;
    const ids: number[] = [];
    for (let i = 0; i < 55; i++) ids.push((await app.request('POST', LIST, { token, body: { task: { label: `w${i}`, planned_at: seconds(T0) } } })).body.data.id);
    for (const id of ids.slice(0, 10)) await app.request('PUT', `/api/tasks/${id}/state`, { token, body: { task: { state: 'finished' } } });
    await expectListConsistent(user); // 55 listed: 2 pages
    const before = app.clock.now();
    try {
      app.clock.set(new Date(before.getTime() + 16 * DAY * 1000));
      const res = await app.request('GET', LIST, { token });
      expect(res.body.links.last).toMatch(/page=1$/); // 45 listed
      await expectListConsistent(user);
    } finally {
      app.clock.set(before);
    }
  });
});
