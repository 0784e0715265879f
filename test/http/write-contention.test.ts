/**
 * Writes of one user under contention (src/writes/user-write.ts): every write kind in
 * parallel through two server instances on one database never deadlocks into a 5xx (one
 * lock order: the owner first), and a user flooding the service with writes and lists
 * cannot starve another user (writers of one user wait in memory for their turn, not on a
 * pooled connection).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInBatches } from '../helpers/api-steps.js';
import { mulberry32 } from '../helpers/prng.js';
import { DAY, T0, seconds, startTestApp, type TestApp } from '../helpers/test-app.js';

let one: TestApp;
let two: TestApp;
beforeAll(async () => {
  one = await startTestApp();
  two = await startTestApp({ databaseUrl: one.databaseUrl });
});
afterAll(async () => {
  await two?.close();
  await one?.close();
});

const DUE = seconds(T0) + 7 * DAY;

describe('one user, every write kind in parallel, two instances', () => {
  it('answers no 5xx and leaves orders and counts consistent', async () => {
    const u = await one.register();
    const projects: number[] = [];
    for (const name of ['a', 'b', 'c', 'd']) {
      projects.push((await one.request('POST', '/api/users/me/projects', { token: u.token, body: { project: { name } } })).body.data.id);
    }
    const tasks = await createInBatches(one, u.token, 'tasks.create', Array.from({ length: 40 }, (_, i) => ({ task: { label: `t${i}`, project_id: i % 3 === 0 ? undefined : projects[i % projects.length] } })));
    const random = mulberry32(11);
    const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)]!;
    const statuses: number[] = [];
    const worker = async (w: number) => {
      for (let i = 0; i < 30; i++) {
        const app = (w + i) % 2 === 0 ? one : two;
        const send = (method: string, path: string, body?: unknown) => app.request(method, path, { token: u.token, body });
        const kind = Math.floor(random() * 7);
        const res =
          kind === 0 ? await send('PUT', `/api/tasks/${pick(tasks)}/order`, { task: { order: 1 + Math.floor(random() * 40) } })
          : kind === 1 ? await send('PUT', `/api/tasks/${pick(tasks)}/state`, { task: { state: pick(['started', 'planned', 'finished', 'newed']) } })
          : kind === 2 ? await send('PUT', `/api/projects/${pick(projects)}/state`, { project: pick([{ state: 'started', due_at: DUE }, { state: 'paused' }]) })
          : kind === 3 ? await send('PATCH', `/api/tasks/${pick(tasks)}`, { task: { project_id: random() < 0.3 ? null : pick(projects) } })
          : kind === 4 ? await send('POST', '/api/users/me/tasks', { task: { label: `n${w}-${i}`, project_id: pick(projects) } })
          : kind === 5 ? await send('PATCH', `/api/projects/${pick(projects)}`, { project: { description: `d${i}` } })
          : await send('GET', '/api/users/me/tasks');
        statuses.push(res.status);
      }
    };
    await Promise.all(Array.from({ length: 8 }, (_, w) => worker(w)));
    expect(statuses.filter((s) => s >= 500)).toEqual([]);
    expect(statuses.filter((s) => s < 300).length).toBeGreaterThan(statuses.length / 2);

    const rows = await one.orm.em.fork().execute<Array<{ order: number }>>('select "order" from tasks where user_id = ? order by "order"', [u.id]);
    expect(rows.map((r) => r.order)).toEqual(rows.map((_, i) => i + 1));
    const [started] = await one.orm.em.fork().execute<Array<{ n: number }>>("select count(*)::int as n from projects where user_id = ? and state = 'started'", [u.id]);
    expect(started!.n).toBeLessThanOrEqual(3);
  });
});

describe('a noisy user does not starve a quiet one', () => {
  it('the quiet user gets only 2xx while another floods writes and lists', async () => {
    const noisy = await one.register();
    const quiet = await one.register();
    const ids = await createInBatches(one, noisy.token, 'tasks.create', Array.from({ length: 60 }, (_, i) => ({ task: { label: `n${i}` } })));
    let flooding = true;
    const noisyStatuses: number[] = [];
    const flood = Array.from({ length: 60 }, (_, c) =>
      (async () => {
        const random = mulberry32(100 + c);
        while (flooding) {
          const res = c % 2 === 0
            ? await one.request('PUT', `/api/tasks/${ids[Math.floor(random() * ids.length)]}/order`, { token: noisy.token, body: { task: { order: 1 + Math.floor(random() * 60) } } })
            : await one.request('GET', '/api/users/me/tasks', { token: noisy.token });
          noisyStatuses.push(res.status);
        }
      })(),
    );
    const quietStatuses: number[] = [];
    for (let i = 0; i < 25; i++) {
      quietStatuses.push((await one.request('GET', '/api/users/me', { token: quiet.token })).status);
      quietStatuses.push((await one.request('POST', '/api/users/me/tasks', { token: quiet.token, body: { task: { label: `q${i}` } } })).status);
      // A person's pace: the quiet user's requests are spread over the flood. Nothing waits on it.
      await new Promise((r) => setTimeout(r, 20));
    }
    flooding = false;
    await Promise.all(flood);
    expect(quietStatuses.filter((s) => s >= 300)).toEqual([]);
    expect(noisyStatuses.filter((s) => s >= 500 && s !== 503)).toEqual([]);
    expect(noisyStatuses.filter((s) => s === 200).length, 'the noisy user got work done too').toBeGreaterThan(60);
    // What it asserts is who gets answered, not how fast: on a 2-core machine that also runs the
    // rest of the suite, 60 flooding loops can stretch the quiet user's 50 requests past 30 s.
  }, 120_000);
});
