/**
 * The project state machine (SPEC.md 3.1, 4.4; API-CONTRACT.md §2) on the injected clock:
 * every move, its dates (due_at after today, finished_at up to the end of today, both up to
 * the end of year 9999), the members each move may carry, every refused move, the order in
 * which the checks are made, and the limit of 3 started projects (also under concurrent
 * starts).
 */
import { describe, expect, it } from 'vitest';
import { apiSteps } from '../helpers/api-steps.js';
import { expectError, JSON_CT, projectDoc } from '../helpers/envelope.js';
import { useTestApp } from '../helpers/test-app.js';
import { DAY, DUE, END_OF_TODAY, HOUR, NEXT_MIDNIGHT, T0S } from '../helpers/times.js';

const app = useTestApp({ resetClock: true });
const { createProject, getProject, putProjectState: putState, startProject: start, pauseProject: pause, finishProject: finish, listProjects } = apiSteps(app);

describe('PUT /api/projects/:id/state', () => {
  it('starts a newed project: startedAt = now, dueAt = due_at, isInProgress', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'Launch');
    const res = await putState(user.token, p.id, { state: 'started', due_at: DUE });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    const expected = projectDoc({ id: p.id, userId: user.id, name: 'Launch', state: 'started', startedAt: T0S, dueAt: DUE });
    expect(res.body).toEqual(expected);
    expect(await getProject(user.token, p.id)).toEqual(expected);
  });

  it('needs due_at to start (must_be_set /project/due_at)', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'nodue');
    expectError(await putState(user.token, p.id, { state: 'started' }), 422, 'must_be_set', { pointer: '/project/due_at' });
    expect(await getProject(user.token, p.id)).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'nodue' }));
  });

  it('needs a due_at after today: the next UTC midnight is accepted, one second before is refused', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'edge');
    for (const dueAt of [END_OF_TODAY, T0S, T0S - DAY, 0]) {
      expectError(await putState(user.token, p.id, { state: 'started', due_at: dueAt }), 422, 'cannot_be_before_started_at', {
        pointer: '/project/due_at',
      });
    }
    expect(await getProject(user.token, p.id)).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'edge' }));
    const ok = await putState(user.token, p.id, { state: 'started', due_at: NEXT_MIDNIGHT });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'edge', state: 'started', startedAt: T0S, dueAt: NEXT_MIDNIGHT }),
    );
  });

  it('follows the clock: at 23:59:59 the next midnight is after today, at midnight it is not', async () => {
    const user = await app.register();
    const late = await createProject(user.token, 'late');
    const midnight = await createProject(user.token, 'midnight');

    app.clock.set(END_OF_TODAY * 1000);
    const ok = await putState(user.token, late.id, { state: 'started', due_at: NEXT_MIDNIGHT });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.data.attributes).toMatchObject({ startedAt: END_OF_TODAY, dueAt: NEXT_MIDNIGHT });

    app.clock.set(NEXT_MIDNIGHT * 1000);
    expectError(await putState(user.token, midnight.id, { state: 'started', due_at: NEXT_MIDNIGHT }), 422, 'cannot_be_before_started_at', {
      pointer: '/project/due_at',
    });
    expectError(await putState(user.token, midnight.id, { state: 'started', due_at: NEXT_MIDNIGHT + DAY - 1 }), 422, 'cannot_be_before_started_at', {
      pointer: '/project/due_at',
    });
    const next = await putState(user.token, midnight.id, { state: 'started', due_at: NEXT_MIDNIGHT + DAY });
    expect(next.status, next.text).toBe(200);
    expect(next.body).toEqual(
      projectDoc({ id: midnight.id, userId: user.id, name: 'midnight', state: 'started', startedAt: NEXT_MIDNIGHT, dueAt: NEXT_MIDNIGHT + DAY }),
    );
  });

  it('pauses, restarts without due_at and with due_at, then finishes', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'Cycle');
    await start(user.token, p.id);

    app.clock.advance(HOUR);
    const paused = await putState(user.token, p.id, { state: 'paused' });
    expect(paused.status, paused.text).toBe(200);
    expect(paused.body).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'Cycle', state: 'paused', startedAt: T0S, dueAt: DUE, pausedAt: T0S + HOUR }),
    );

    app.clock.advance(HOUR);
    const restarted = await putState(user.token, p.id, { state: 'started' });
    expect(restarted.status, restarted.text).toBe(200);
    expect(restarted.body).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'Cycle', state: 'started', startedAt: T0S, dueAt: DUE }),
    );

    app.clock.advance(HOUR);
    await pause(user.token, p.id);
    app.clock.advance(DAY); // 2026-06-16T15:00:00Z; next midnight is 2026-06-17T00:00:00Z
    const tomorrow = NEXT_MIDNIGHT + DAY;
    expectError(await putState(user.token, p.id, { state: 'started', due_at: tomorrow - 1 }), 422, 'cannot_be_before_started_at', {
      pointer: '/project/due_at',
    });
    expect((await getProject(user.token, p.id)).data.attributes).toMatchObject({ state: 'paused', pausedAt: T0S + 3 * HOUR, dueAt: DUE });
    const withDue = await putState(user.token, p.id, { state: 'started', due_at: tomorrow });
    expect(withDue.status, withDue.text).toBe(200);
    expect(withDue.body).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'Cycle', state: 'started', startedAt: T0S, dueAt: tomorrow }),
    );

    app.clock.advance(HOUR);
    const finished = await putState(user.token, p.id, { state: 'finished' });
    expect(finished.status, finished.text).toBe(200);
    const expected = projectDoc({
      id: p.id, userId: user.id, name: 'Cycle', state: 'finished',
      startedAt: T0S, dueAt: tomorrow, finishedAt: T0S + 3 * HOUR + DAY + HOUR,
    });
    expect(finished.body).toEqual(expected);
    expect(await getProject(user.token, p.id)).toEqual(expected);
  });

  it('checks finished_at: between startedAt and the end of today, both inclusive', async () => {
    const user = await app.register();
    const [a, b, c] = [await createProject(user.token, 'a'), await createProject(user.token, 'b'), await createProject(user.token, 'c')];
    for (const p of [a, b, c]) await start(user.token, p.id); // startedAt = T0S
    app.clock.advance(DAY); // 2026-06-16T12:00:00Z
    const endOfToday = END_OF_TODAY + DAY;

    for (const finishedAt of [T0S - 1, 0]) {
      expectError(await putState(user.token, a.id, { state: 'finished', finished_at: finishedAt }), 422, 'cannot_be_before_started_at', {
        pointer: '/project/finished_at',
      });
    }
    for (const finishedAt of [endOfToday + 1, endOfToday + DAY]) {
      expectError(await putState(user.token, a.id, { state: 'finished', finished_at: finishedAt }), 422, 'cannot_be_after_today', {
        pointer: '/project/finished_at',
      });
    }
    expect((await getProject(user.token, a.id)).data.attributes).toMatchObject({ state: 'started', finishedAt: 0 });

    const atStart = await putState(user.token, a.id, { state: 'finished', finished_at: T0S });
    expect(atStart.status, atStart.text).toBe(200);
    expect(atStart.body).toEqual(
      projectDoc({ id: a.id, userId: user.id, name: 'a', state: 'finished', startedAt: T0S, dueAt: DUE, finishedAt: T0S }),
    );

    const atEnd = await putState(user.token, b.id, { state: 'finished', finished_at: endOfToday });
    expect(atEnd.status, atEnd.text).toBe(200);
    expect(atEnd.body).toEqual(
      projectDoc({ id: b.id, userId: user.id, name: 'b', state: 'finished', startedAt: T0S, dueAt: DUE, finishedAt: endOfToday }),
    );

    const now = await putState(user.token, c.id, { state: 'finished' });
    expect(now.status, now.text).toBe(200);
    expect(now.body).toEqual(
      projectDoc({ id: c.id, userId: user.id, name: 'c', state: 'finished', startedAt: T0S, dueAt: DUE, finishedAt: T0S + DAY }),
    );
  });

  it('refuses due_at on pause and finish, finished_at on start and pause, and unknown members, as cannot_be_set', async () => {
    const user = await app.register();
    const newed = await createProject(user.token, 'newed');
    const started = await createProject(user.token, 'started');
    await start(user.token, started.id);
    const paused = await createProject(user.token, 'paused');
    await start(user.token, paused.id);
    await pause(user.token, paused.id);
    const before = await Promise.all([newed, started, paused].map((p) => getProject(user.token, p.id)));

    const cases: Array<[number, Record<string, unknown>, string]> = [
      [started.id, { state: 'paused', due_at: DUE }, '/project/due_at'],
      [started.id, { state: 'finished', due_at: DUE }, '/project/due_at'],
      [started.id, { state: 'paused', finished_at: T0S }, '/project/finished_at'],
      [newed.id, { state: 'started', due_at: DUE, finished_at: T0S }, '/project/finished_at'],
      [paused.id, { state: 'started', finished_at: T0S }, '/project/finished_at'],
      [paused.id, { state: 'started', due_at: DUE, finished_at: T0S }, '/project/finished_at'],
      [newed.id, { state: 'started', due_at: DUE, foo: 1 }, '/project/foo'],
      [started.id, { state: 'paused', foo: 'bar' }, '/project/foo'],
      [started.id, { state: 'finished', foo: null }, '/project/foo'],
      [paused.id, { state: 'started', name: 'renamed' }, '/project/name'],
      [started.id, { state: 'paused', paused_at: T0S }, '/project/paused_at'],
    ];
    for (const [id, project, pointer] of cases) {
      const res = await putState(user.token, id, project);
      expectError(res, 422, 'cannot_be_set', { pointer });
    }
    const after = await Promise.all([newed, started, paused].map((p) => getProject(user.token, p.id)));
    expect(after).toEqual(before);
  });

  it.each([
    ['{"project":{"state":"paused","a/b":1}}', '/project/a~1b'],
    ['{"project":{"state":"paused","c~d":1}}', '/project/c~0d'],
    ['{"project":{"state":"paused","__proto__":{"x":1}}}', '/project/__proto__'],
    ['{"project":{"state":"paused","constructor":1}}', '/project/constructor'],
  ])('names an unknown member with an escaped JSON Pointer: %s', async (rawBody, pointer) => {
    const user = await app.register();
    const p = await createProject(user.token, 'pointers');
    await start(user.token, p.id);
    const res = await app.request('PUT', `/api/projects/${p.id}/state`, {
      token: user.token, rawBody, headers: { 'Content-Type': 'application/json' },
    });
    expectError(res, 422, 'cannot_be_set', { pointer });
    expect((await getProject(user.token, p.id)).data.attributes.state).toBe('started');
  });

  it('answers invalid_transition for every move that is not in the state machine', async () => {
    const user = await app.register();
    const newed = await createProject(user.token, 'newed');
    const started = await createProject(user.token, 'started');
    await start(user.token, started.id);
    const paused = await createProject(user.token, 'paused');
    await start(user.token, paused.id);
    await pause(user.token, paused.id);
    const finished = await createProject(user.token, 'finished');
    await start(user.token, finished.id);
    await finish(user.token, finished.id);
    const projects = { newed, started, paused, finished };
    const before = await Promise.all(Object.values(projects).map((p) => getProject(user.token, p.id)));

    const valid = new Set(['newed>started', 'started>paused', 'paused>started', 'started>finished']);
    const requested = ['newed', 'started', 'paused', 'finished', 'abandoned', 'planned', 'foo', 'STARTED', 'Started', ' started', ''];
    let checked = 0;
    for (const [from, p] of Object.entries(projects)) {
      for (const to of requested) {
        if (valid.has(`${from}>${to}`)) continue;
        // Members that the move would need are given, so that only the transition is wrong.
        const project: Record<string, unknown> = { state: to };
        if (to === 'started') project.due_at = DUE;
        const res = await putState(user.token, p.id, project);
        expect(res.body?.errors?.[0]?.code, `${from} -> ${JSON.stringify(to)}: ${res.text}`).toBe('invalid_transition');
        expectError(res, 422, 'invalid_transition', { pointer: '/project/state' });
        checked++;
      }
    }
    expect(checked).toBe(4 * requested.length - 4);
    const after = await Promise.all(Object.values(projects).map((p) => getProject(user.token, p.id)));
    expect(after).toEqual(before);
  });

  it.each([
    ['a number', 1],
    ['null', null],
    ['true', true],
    ['an object', { to: 'started' }],
    ['an array', ['started']],
  ])('refuses a state that is %s as invalid on /project/state', async (_what, state) => {
    const user = await app.register();
    const p = await createProject(user.token, 'typed');
    expectError(await putState(user.token, p.id, { state, due_at: DUE }), 422, 'invalid', { pointer: '/project/state' });
    expect(await getProject(user.token, p.id)).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'typed' }));
  });

  it.each([
    ['an empty project', {}],
    ['only due_at', { due_at: DUE }],
    ['only finished_at and an unknown member', { finished_at: T0S, foo: 1 }],
  ])('answers must_be_set on /project/state for %s', async (_what, project) => {
    const user = await app.register();
    const p = await createProject(user.token, 'nostate');
    expectError(await putState(user.token, p.id, project), 422, 'must_be_set', { pointer: '/project/state' });
  });

  it.each([
    ['an empty body', {}],
    ['project a string', { project: 'started' }],
    ['project null', { project: null }],
    ['state outside the wrapper', { state: 'started', due_at: DUE }],
  ])('answers parameter_missing on /project for %s', async (_what, body) => {
    const user = await app.register();
    const p = await createProject(user.token, 'wrapped');
    const res = await app.request('PUT', `/api/projects/${p.id}/state`, { token: user.token, body });
    expectError(res, 422, 'parameter_missing', { pointer: '/project' });
  });

  it.each([
    ['due_at', '123'],
    ['due_at', String(DUE)],
    ['due_at', null],
    ['due_at', true],
    ['due_at', 1.5],
    ['due_at', DUE + 0.5],
    ['due_at', -1],
    ['due_at', [DUE]],
    ['finished_at', '123'],
    ['finished_at', null],
    ['finished_at', false],
    ['finished_at', -5],
  ])('refuses %s = %j as invalid', async (field, value) => {
    const user = await app.register();
    const p = await createProject(user.token, 'typed');
    const project: Record<string, unknown> =
      field === 'due_at' ? { state: 'started', due_at: value } : { state: 'started', due_at: DUE, finished_at: value };
    expectError(await putState(user.token, p.id, project), 422, 'invalid', { pointer: `/project/${field}` });
    expect(await getProject(user.token, p.id)).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'typed' }));
  });

  it('checks in the order of API-CONTRACT §2', async () => {
    const user = await app.register();
    const newed = await createProject(user.token, 'newed');
    const finished = await createProject(user.token, 'finished');
    await start(user.token, finished.id);
    await finish(user.token, finished.id);
    const started = await createProject(user.token, 'started');
    await start(user.token, started.id);

    const cases: Array<[string, number, Record<string, unknown>, string, string]> = [
      // invalid_transition before cannot_be_set / must_be_set
      ['newed -> paused with due_at', newed.id, { state: 'paused', due_at: DUE }, 'invalid_transition', '/project/state'],
      ['newed -> finished with finished_at', newed.id, { state: 'finished', finished_at: T0S }, 'invalid_transition', '/project/state'],
      ['newed -> unknown with an unknown member', newed.id, { state: 'foo', foo: 1 }, 'invalid_transition', '/project/state'],
      ['finished -> started without due_at', finished.id, { state: 'started' }, 'invalid_transition', '/project/state'],
      ['finished -> started with finished_at', finished.id, { state: 'started', finished_at: T0S }, 'invalid_transition', '/project/state'],
      ['started -> started without due_at', started.id, { state: 'started' }, 'invalid_transition', '/project/state'],
      // cannot_be_set before date rules
      ['start with a past due_at and finished_at', newed.id, { state: 'started', due_at: 0, finished_at: T0S }, 'cannot_be_set', '/project/finished_at'],
      ['start with a past due_at and an unknown member', newed.id, { state: 'started', due_at: 0, foo: 1 }, 'cannot_be_set', '/project/foo'],
      ['finish with due_at and a finished_at after today', started.id, { state: 'finished', due_at: DUE, finished_at: DUE }, 'cannot_be_set', '/project/due_at'],
      ['pause with a past due_at', started.id, { state: 'paused', due_at: 0 }, 'cannot_be_set', '/project/due_at'],
      // must_be_set before dates
      ['start without due_at', newed.id, { state: 'started' }, 'must_be_set', '/project/due_at'],
    ];
    for (const [what, id, project, code, pointer] of cases) {
      const res = await putState(user.token, id, project);
      expect(res.body?.errors?.[0]?.code, `${what}: ${res.text}`).toBe(code);
      expectError(res, 422, code, { pointer });
    }
  });
});

// =============================================================================================

describe('limit of 3 started projects', () => {
  it('refuses a 4th start and a restart with reached_max_started; pausing or finishing frees a slot', async () => {
    const user = await app.register();
    const ps = [];
    for (const name of ['one', 'two', 'three', 'four', 'five']) ps.push(await createProject(user.token, name));
    const [p1, p2, p3, p4, p5] = ps as [any, any, any, any, any];
    await start(user.token, p1.id);
    await start(user.token, p2.id);
    await start(user.token, p3.id);

    const fourth = await putState(user.token, p4.id, { state: 'started', due_at: DUE });
    expectError(fourth, 422, 'reached_max_started', { pointer: '/project/state' });
    expect(await getProject(user.token, p4.id)).toEqual(projectDoc({ id: p4.id, userId: user.id, name: 'four' }));

    // Pausing one frees a slot...
    app.clock.advance(HOUR);
    await pause(user.token, p1.id);
    const p4Started = await start(user.token, p4.id);
    expect(p4Started.attributes).toMatchObject({ state: 'started', startedAt: T0S + HOUR });

    // ...so restarting the paused one now hits the limit.
    const restart = await putState(user.token, p1.id, { state: 'started' });
    expectError(restart, 422, 'reached_max_started', { pointer: '/project/state' });
    expectError(await putState(user.token, p1.id, { state: 'started', due_at: DUE + DAY }), 422, 'reached_max_started', {
      pointer: '/project/state',
    });
    expect(await getProject(user.token, p1.id)).toEqual(
      projectDoc({ id: p1.id, userId: user.id, name: 'one', state: 'paused', startedAt: T0S, dueAt: DUE, pausedAt: T0S + HOUR }),
    );

    // Date rules and must_be_set come before the limit.
    expectError(await putState(user.token, p5.id, { state: 'started' }), 422, 'must_be_set', { pointer: '/project/due_at' });
    expectError(await putState(user.token, p5.id, { state: 'started', due_at: END_OF_TODAY }), 422, 'cannot_be_before_started_at', {
      pointer: '/project/due_at',
    });
    expectError(await putState(user.token, p1.id, { state: 'started', due_at: END_OF_TODAY }), 422, 'cannot_be_before_started_at', {
      pointer: '/project/due_at',
    });
    expectError(await putState(user.token, p1.id, { state: 'started', finished_at: T0S }), 422, 'cannot_be_set', {
      pointer: '/project/finished_at',
    });

    // Finishing one frees a slot for the restart.
    await finish(user.token, p2.id);
    const restarted = await putState(user.token, p1.id, { state: 'started' });
    expect(restarted.status, restarted.text).toBe(200);
    expect(restarted.body.data.attributes).toMatchObject({ state: 'started', pausedAt: 0, startedAt: T0S });
    expectError(await putState(user.token, p5.id, { state: 'started', due_at: DUE }), 422, 'reached_max_started', {
      pointer: '/project/state',
    });

    const list = await listProjects(user.token);
    expect(list.body.data.map((p: any) => [p.attributes.name, p.attributes.state])).toEqual([
      ['one', 'started'],
      ['two', 'finished'],
      ['three', 'started'],
      ['four', 'started'],
      ['five', 'newed'],
    ]);
  });

  it("counts only the user's own started projects", async () => {
    const alice = await app.register();
    const bob = await app.register();
    for (const name of ['a1', 'a2', 'a3']) await start(alice.token, (await createProject(alice.token, name)).id);
    for (const name of ['b1', 'b2', 'b3']) {
      const p = await createProject(bob.token, name);
      const res = await putState(bob.token, p.id, { state: 'started', due_at: DUE });
      expect(res.status, res.text).toBe(200);
    }
  });

  it('frees a slot when a started project is deleted', async () => {
    const user = await app.register();
    const ids = [];
    for (const name of ['d1', 'd2', 'd3', 'd4']) ids.push((await createProject(user.token, name)).id);
    for (const id of ids.slice(0, 3)) await start(user.token, id);
    expectError(await putState(user.token, ids[3]!, { state: 'started', due_at: DUE }), 422, 'reached_max_started', {
      pointer: '/project/state',
    });
    expect((await app.request('DELETE', `/api/projects/${ids[0]}`, { token: user.token })).status).toBe(204);
    expect((await start(user.token, ids[3]!)).attributes.state).toBe('started');
  });

  it('holds under 8 concurrent start requests: exactly 3 succeed', async () => {
    const user = await app.register();
    const ids: number[] = [];
    for (let i = 1; i <= 8; i++) ids.push((await createProject(user.token, `race${i}`)).id);
    const responses = await Promise.all(ids.map((id) => putState(user.token, id, { state: 'started', due_at: DUE })));
    const ok = responses.filter((r) => r.status === 200);
    const refused = responses.filter((r) => r.status !== 200);
    expect(ok).toHaveLength(3);
    expect(refused).toHaveLength(5);
    for (const r of refused) expectError(r, 422, 'reached_max_started', { pointer: '/project/state' });
    for (const r of ok) expect(r.body.data.attributes).toMatchObject({ state: 'started', startedAt: T0S, dueAt: DUE, isInProgress: true });

    const list = await listProjects(user.token);
    const startedIds = list.body.data.filter((p: any) => p.attributes.state === 'started').map((p: any) => p.id);
    expect(startedIds).toHaveLength(3);
    expect(startedIds.sort()).toEqual(ok.map((r) => r.body.data.id).sort());
    expect(list.body.data.filter((p: any) => p.attributes.state === 'newed')).toHaveLength(5);
  });
});

// =============================================================================================

describe('timestamps up to the end of year 9999', () => {
  it('accepts a far-future due_at (the largest year-9999 second)', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'far');
    const res = await putState(user.token, p.id, { state: 'started', due_at: 253_402_300_799 });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.attributes.dueAt).toBe(253_402_300_799);
  });

  it('accepts timestamps up to the end of year 9999 and refuses later ones as invalid (documented maximum)', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'farther');
    const late = await putState(user.token, p.id, { state: 'started', due_at: 253_402_300_800 });
    expectError(late, 422, 'invalid', { pointer: '/project/due_at' });
    const res = await putState(user.token, p.id, { state: 'started', due_at: 253_402_300_799 });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.attributes.dueAt).toBe(253_402_300_799);
  });
});
