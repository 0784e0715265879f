/**
 * API-CONTRACT.md §13: every rule that says "today" uses the user's day in the user's time
 * zone, with the zone's real rules, on both doors, under a controlled clock.
 *
 * For each zone, at a local midnight (a plain one, both daylight-saving changes, a day whose
 * midnight does not exist), the second before it and the second at it:
 * - start and restart: `due_at` must be at or after the next local midnight;
 * - finish: `finished_at` may be at most the last second of the local day;
 * - the task list's window: a task finished before the first instant of the local day 14 days
 *   ago is not listed;
 * - `planned_on=today` and `tomorrow`: the local days.
 *
 * The instants are written out from the tz database's rules, not computed by the service's
 * code (src/core/user-day.ts), so a wrong day boundary there fails here.
 */
import { TRPCClientError } from '@trpc/client';
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/test-app.js';

const app = useTestApp();

interface Boundary {
  zone: string;
  what: string;
  /** The first instant of the local day D (its midnight, or the first instant after a skipped midnight). */
  start: string;
  /** The first instant of D + 1. */
  next: string;
  /** The first instant of D − 14. */
  windowStart: string;
}

const BOUNDARIES: Boundary[] = [
  { zone: 'UTC', what: 'a plain midnight', start: '2026-06-16T00:00:00Z', next: '2026-06-17T00:00:00Z', windowStart: '2026-06-02T00:00:00Z' },
  { zone: 'Europe/Paris', what: 'the 23-hour day of spring (2026-03-29)', start: '2026-03-28T23:00:00Z', next: '2026-03-29T22:00:00Z', windowStart: '2026-03-14T23:00:00Z' },
  { zone: 'Europe/Paris', what: 'the day after spring forward (2026-03-30)', start: '2026-03-29T22:00:00Z', next: '2026-03-30T22:00:00Z', windowStart: '2026-03-15T23:00:00Z' },
  { zone: 'Europe/Paris', what: 'the 25-hour day of autumn (2026-10-25)', start: '2026-10-24T22:00:00Z', next: '2026-10-25T23:00:00Z', windowStart: '2026-10-10T22:00:00Z' },
  { zone: 'America/New_York', what: 'the 23-hour day (2026-03-08)', start: '2026-03-08T05:00:00Z', next: '2026-03-09T04:00:00Z', windowStart: '2026-02-22T05:00:00Z' },
  { zone: 'America/New_York', what: 'the 25-hour day (2026-11-01)', start: '2026-11-01T04:00:00Z', next: '2026-11-02T05:00:00Z', windowStart: '2026-10-18T04:00:00Z' },
  { zone: 'America/Los_Angeles', what: 'the 23-hour day (2026-03-08)', start: '2026-03-08T08:00:00Z', next: '2026-03-09T07:00:00Z', windowStart: '2026-02-22T08:00:00Z' },
  { zone: 'America/Los_Angeles', what: 'the 25-hour day (2026-11-01)', start: '2026-11-01T07:00:00Z', next: '2026-11-02T08:00:00Z', windowStart: '2026-10-18T07:00:00Z' },
  { zone: 'Pacific/Kiritimati', what: 'UTC+14 (2026-06-16)', start: '2026-06-15T10:00:00Z', next: '2026-06-16T10:00:00Z', windowStart: '2026-06-01T10:00:00Z' },
  { zone: 'Pacific/Pago_Pago', what: 'UTC−11 (2026-06-16)', start: '2026-06-16T11:00:00Z', next: '2026-06-17T11:00:00Z', windowStart: '2026-06-02T11:00:00Z' },
  // Cuba moves its clocks from 00:00 to 01:00 on the second Sunday of March: 2026-03-08 has no midnight.
  { zone: 'America/Havana', what: 'a day whose midnight does not exist (2026-03-08 starts at 01:00)', start: '2026-03-08T05:00:00Z', next: '2026-03-09T04:00:00Z', windowStart: '2026-02-22T05:00:00Z' },
  { zone: 'America/Havana', what: 'the 25-hour day (2026-11-01)', start: '2026-11-01T04:00:00Z', next: '2026-11-02T05:00:00Z', windowStart: '2026-10-18T04:00:00Z' },
];

const secondsOf = (iso: string) => Date.parse(iso) / 1000;

type Door = 'REST' | 'tRPC';
const DOORS: Door[] = ['REST', 'tRPC'];

/** The outcome of one call on a door: the data, or the codes of its errors. */
type Outcome = { ok: true; data: any } | { ok: false; status: number; codes: string[] };

async function onDoor(door: Door, token: string, rest: () => Promise<{ status: number; body: any }>, trpc: (api: ReturnType<typeof app.trpc>) => Promise<any>): Promise<Outcome> {
  if (door === 'REST') {
    const res = await rest();
    return res.status < 300 ? { ok: true, data: res.body } : { ok: false, status: res.status, codes: res.body.errors.map((e: any) => e.code) };
  }
  try {
    return { ok: true, data: await trpc(app.trpc(token)) };
  } catch (error) {
    if (!(error instanceof TRPCClientError)) throw error;
    return { ok: false, status: error.data.httpStatus, codes: error.data.errors.map((e: any) => e.code) };
  }
}

/** A user living in `zone`, and what it can do on each door. */
async function resident(zone: string) {
  const username = `tz_${Math.random().toString(36).slice(2, 10)}`;
  const registered = await app.request('POST', '/api/users', { body: { user: { username, password: 'correct horse', time_zone: zone } } });
  expect(registered.status, registered.text).toBe(201);
  expect(registered.body.data.attributes.timeZone).toBe(zone);
  const token: string = registered.body.meta.token;
  let projects = 0;
  const newProject = async () => {
    const res = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: `P${++projects}` } } });
    return res.body.data.id as number;
  };
  const changeState = (door: Door, id: number, project: Record<string, unknown>) =>
    onDoor(door, token, () => app.request('PUT', `/api/projects/${id}/state`, { token, body: { project } }), (api) => api.projects.changeState.mutate({ id, project } as never));
  const listIds = async (door: Door, query: Record<string, string>) => {
    const outcome = await onDoor(
      door, token,
      () => app.request('GET', `/api/users/me/tasks?${new URLSearchParams({ page_size: '200', ...query })}`, { token }),
      (api) => api.tasks.list.query({ page_size: 200, ...query } as never),
    );
    if (!outcome.ok) throw new Error(`list ${JSON.stringify(query)} on ${door}: ${outcome.codes}`);
    return (outcome.data.data as Array<{ id: number }>).map((t) => t.id).sort((a, b) => a - b);
  };
  return { token, newProject, changeState, listIds };
}

function expectRefused(outcome: Outcome, code: string): void {
  expect(outcome.ok, JSON.stringify(outcome)).toBe(false);
  if (!outcome.ok) expect(outcome.codes).toEqual([code]);
}
function expectDone(outcome: Outcome): void {
  expect(outcome.ok, JSON.stringify(outcome)).toBe(true);
}

describe.each(BOUNDARIES)('$zone, $what', (b) => {
  const start = secondsOf(b.start);
  const next = secondsOf(b.next);
  const windowStart = secondsOf(b.windowStart);

  it('every "today" rule, the second before the local day starts and the second it starts, on both doors', async () => {
    // From here the clock stays within 15 days: the token (valid 30 days) stays valid.
    app.clock.set((windowStart - 1) * 1000);
    const user = await resident(b.zone);
    const { token } = user;
    const create = async (label: string, body: Record<string, unknown> = {}) =>
      (await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label, ...body } } })).body.data.id as number;
    const finishNow = async (id: number) => {
      expect((await app.request('PUT', `/api/tasks/${id}/state`, { token, body: { task: { state: 'planned' } } })).status).toBe(200);
      expect((await app.request('PUT', `/api/tasks/${id}/state`, { token, body: { task: { state: 'finished' } } })).status).toBe(200);
    };

    // Finished on the last second before D − 14 starts, and on its first second.
    app.clock.set((windowStart - 1) * 1000);
    const finishedBeforeWindow = await create('finished just before');
    await finishNow(finishedBeforeWindow);
    app.clock.set(windowStart * 1000);
    const finishedInWindow = await create('finished just in');
    await finishNow(finishedInWindow);
    // Planned around the boundary.
    const plannedBefore = await create('planned before', { planned_at: start - 1 });
    const plannedAtStart = await create('planned at the start', { planned_at: start });
    const plannedLast = await create('planned last second', { planned_at: next - 1 });
    const plannedNext = await create('planned the day after', { planned_at: next });

    // --- The last second of D − 1.
    app.clock.set((start - 1) * 1000);
    for (const door of DOORS) {
      const project = await user.newProject();
      expectRefused(await user.changeState(door, project, { state: 'started', due_at: start - 1 }), 'cannot_be_before_started_at');
      expectDone(await user.changeState(door, project, { state: 'started', due_at: start }));
      expectRefused(await user.changeState(door, project, { state: 'finished', finished_at: start }), 'cannot_be_after_today');
      expectDone(await user.changeState(door, project, { state: 'finished', finished_at: start - 1 }));
      expect(await user.listIds(door, {}), `${door}: the window at the end of D − 1`).toEqual(expect.arrayContaining([finishedBeforeWindow, finishedInWindow]));
      expect(await user.listIds(door, { planned_on: 'today' })).toEqual([plannedBefore]);
      expect(await user.listIds(door, { planned_on: 'tomorrow' })).toEqual([plannedAtStart, plannedLast]);
    }

    // --- The first second of D.
    app.clock.set(start * 1000);
    for (const door of DOORS) {
      const project = await user.newProject();
      expectRefused(await user.changeState(door, project, { state: 'started', due_at: start }), 'cannot_be_before_started_at');
      expectRefused(await user.changeState(door, project, { state: 'started', due_at: next - 1 }), 'cannot_be_before_started_at');
      expectDone(await user.changeState(door, project, { state: 'started', due_at: next }));
      // Restart: the same rule for a due_at given again.
      expectDone(await user.changeState(door, project, { state: 'paused' }));
      expectRefused(await user.changeState(door, project, { state: 'started', due_at: next - 1 }), 'cannot_be_before_started_at');
      expectDone(await user.changeState(door, project, { state: 'started', due_at: next }));
      expectRefused(await user.changeState(door, project, { state: 'finished', finished_at: next }), 'cannot_be_after_today');
      expectDone(await user.changeState(door, project, { state: 'finished', finished_at: next - 1 }));
      const listed = await user.listIds(door, {});
      expect(listed, `${door}: the window at the start of D`).toContain(finishedInWindow);
      expect(listed).not.toContain(finishedBeforeWindow);
      expect(await user.listIds(door, { planned_on: 'today' })).toEqual([plannedAtStart, plannedLast]);
      expect(await user.listIds(door, { planned_on: 'tomorrow' })).toEqual([plannedNext]);
      // A date names the same local day whatever the clock says.
      const day = new Date(start * 1000 + 12 * 3600 * 1000).toLocaleDateString('en-CA', { timeZone: b.zone });
      expect(await user.listIds(door, { planned_on: day })).toEqual([plannedAtStart, plannedLast]);
    }
  });
});

describe('a user who changes zone', () => {
  it('sees the new day at once: its "today" rules, its planned_on and its list ETag', async () => {
    app.clock.set(Date.parse('2026-06-15T20:00:00Z'));
    const user = await resident('UTC');
    const { token } = user;
    // 09:00 UTC on 2026-06-15 is 23:00 on 2026-06-15 in Kiritimati (UTC+14), whose "today" at
    // 20:00 UTC is already 2026-06-16.
    const planned = (await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'x', planned_at: secondsOf('2026-06-15T09:00:00Z') } } })).body.data.id;
    const today = await app.request('GET', '/api/users/me/tasks?planned_on=today', { token });
    expect(today.body.data.map((t: any) => t.id)).toEqual([planned]);
    const midnightUtc = secondsOf('2026-06-16T00:00:00Z');
    const first = await user.newProject();
    expectDone(await user.changeState('REST', first, { state: 'started', due_at: midnightUtc }));

    const moved = await app.request('PATCH', '/api/users/me', { token, body: { user: { time_zone: 'Pacific/Kiritimati' } } });
    expect(moved.status, moved.text).toBe(200);
    expect(moved.body.data.attributes.timeZone).toBe('Pacific/Kiritimati');

    const after = await app.request('GET', '/api/users/me/tasks?planned_on=today', { token, headers: { 'If-None-Match': today.headers.get('etag')! } });
    expect(after.status).toBe(200);
    expect(after.body.data).toEqual([]);
    expect((await app.request('GET', '/api/users/me/tasks?planned_on=2026-06-15', { token })).body.data.map((t: any) => t.id)).toEqual([planned]);
    for (const door of DOORS) {
      const project = await user.newProject();
      expectRefused(await user.changeState(door, project, { state: 'started', due_at: midnightUtc }), 'cannot_be_before_started_at');
      expectDone(await user.changeState(door, project, { state: 'started', due_at: secondsOf('2026-06-16T10:00:00Z') }));
      expectDone(await user.changeState(door, project, { state: 'paused' }));
    }
  });

  it('is refused a zone the tz database does not know, on both doors, and keeps its own', async () => {
    const user = await resident('Europe/Paris');
    for (const zone of ['Mars/Olympus_Mons', '+01:00', 'UTC+1', '', 'Europe/Paris/', '../etc/passwd', 'Europe/Paris\u0000', 'x'.repeat(65)]) {
      const outcome = await onDoor(
        'REST', user.token,
        () => app.request('PATCH', '/api/users/me', { token: user.token, body: { user: { time_zone: zone } } }),
        () => Promise.resolve(),
      );
      expectRefused(outcome, 'invalid');
      const trpc = await onDoor('tRPC', user.token, () => Promise.resolve({ status: 0, body: {} }), (api) => api.users.update.mutate({ user: { time_zone: zone } }));
      expectRefused(trpc, 'invalid');
    }
    const registered = await app.request('POST', '/api/users', { body: { user: { username: `tz_bad_${Date.now().toString(36)}`, password: 'correct horse', time_zone: 'Nowhere' } } });
    expect(registered.status).toBe(422);
    expect(registered.body.errors).toEqual([expect.objectContaining({ code: 'invalid', source: { pointer: '/user/time_zone' } })]);
    const me = await app.request('GET', '/api/users/me', { token: user.token });
    expect(me.body.data.attributes.timeZone).toBe('Europe/Paris');
  });

  it('is UTC until it sets a zone, and names are read in the database\'s case', async () => {
    const plain = await app.register();
    expect((await app.request('GET', '/api/users/me', { token: plain.token })).body.data.attributes.timeZone).toBe('UTC');
    const moved = await app.request('PATCH', '/api/users/me', { token: plain.token, body: { user: { time_zone: 'america/new_york' } } });
    expect(moved.body.data.attributes.timeZone).toBe('America/New_York');
    const unchanged = await app.request('PATCH', '/api/users/me', { token: plain.token, body: { user: {} } });
    expect(unchanged.body.data.attributes.timeZone).toBe('America/New_York');
  });
});
