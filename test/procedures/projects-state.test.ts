/**
 * The project state machine (SPEC.md 3.1, 4.4; API-CONTRACT.md §2), in the fast tier: the
 * project procedures called directly (createCaller), on the real database and the injected
 * clock, without HTTP. Every move and its dates (due_at after today, finished_at up to the end
 * of today, both up to the end of year 9999), the members each move may carry, every refused
 * move, the order in which the checks are made, and the limit of 3 started projects. The
 * table itself is in test/rules/projects-state.test.ts; what HTTP adds to
 * PUT /api/projects/:id/state (the answer on the wire, the wrapper, members written in the
 * JSON text, parallel requests) is in test/http/projects-state.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { errorShape, projectDoc, type Source } from '../helpers/envelope.js';
import { expectProcedureError, procedureError, useProcedures } from '../helpers/procedures.js';
import { DAY, DUE, END_OF_TODAY, HOUR, NEXT_MIDNIGHT, T0S } from '../helpers/times.js';

const procedures = useProcedures({ resetClock: true });
const { clock } = procedures;
type User = Awaited<ReturnType<typeof procedures.register>>;

async function createProject(user: User, name: string): Promise<any> {
  return (await user.api.projects.create({ project: { name } })).data;
}
const getProject = (user: User, id: number) => user.api.projects.get({ id });
/** The project's state changed as a client asks for it; the input is sent as it is, checked or not. */
const changeState = (user: User, id: number, project: Record<string, unknown>): Promise<any> =>
  user.api.projects.changeState({ id, project } as never);
const start = async (user: User, id: number, dueAt = DUE) => (await changeState(user, id, { state: 'started', due_at: dueAt })).data;
/** The envelope of a failed call holds exactly this one error (as expectProcedureError checks). */
function expectOnlyError(response: { status: number; errors: unknown[] }, status: number, code: string, source: Source) {
  expect({ status: response.status, errors: response.errors }).toEqual({ status, errors: [errorShape(status, code, source)] });
}
const pause = async (user: User, id: number) => (await changeState(user, id, { state: 'paused' })).data;
const finish = async (user: User, id: number) => (await changeState(user, id, { state: 'finished' })).data;

describe('project state changes', () => {
  it('needs due_at to start (must_be_set /project/due_at)', async () => {
    const user = await procedures.register();
    const p = await createProject(user, 'nodue');
    await expectProcedureError(changeState(user, p.id, { state: 'started' }), 422, 'must_be_set', { pointer: '/project/due_at' });
    expect(await getProject(user, p.id)).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'nodue' }));
  });

  it('needs a due_at after today: the next UTC midnight is accepted, one second before is refused', async () => {
    const user = await procedures.register();
    const p = await createProject(user, 'edge');
    for (const dueAt of [END_OF_TODAY, T0S, T0S - DAY, 0]) {
      await expectProcedureError(changeState(user, p.id, { state: 'started', due_at: dueAt }), 422, 'cannot_be_before_started_at', {
        pointer: '/project/due_at',
      });
    }
    expect(await getProject(user, p.id)).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'edge' }));
    expect(await changeState(user, p.id, { state: 'started', due_at: NEXT_MIDNIGHT })).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'edge', state: 'started', startedAt: T0S, dueAt: NEXT_MIDNIGHT }),
    );
  });

  it('follows the clock: at 23:59:59 the next midnight is after today, at midnight it is not', async () => {
    const user = await procedures.register();
    const late = await createProject(user, 'late');
    const midnight = await createProject(user, 'midnight');

    clock.set(END_OF_TODAY * 1000);
    const ok = await changeState(user, late.id, { state: 'started', due_at: NEXT_MIDNIGHT });
    expect(ok.data.attributes).toMatchObject({ startedAt: END_OF_TODAY, dueAt: NEXT_MIDNIGHT });

    clock.set(NEXT_MIDNIGHT * 1000);
    await expectProcedureError(changeState(user, midnight.id, { state: 'started', due_at: NEXT_MIDNIGHT }), 422, 'cannot_be_before_started_at', {
      pointer: '/project/due_at',
    });
    await expectProcedureError(changeState(user, midnight.id, { state: 'started', due_at: NEXT_MIDNIGHT + DAY - 1 }), 422, 'cannot_be_before_started_at', {
      pointer: '/project/due_at',
    });
    expect(await changeState(user, midnight.id, { state: 'started', due_at: NEXT_MIDNIGHT + DAY })).toEqual(
      projectDoc({ id: midnight.id, userId: user.id, name: 'midnight', state: 'started', startedAt: NEXT_MIDNIGHT, dueAt: NEXT_MIDNIGHT + DAY }),
    );
  });

  it('pauses, restarts without due_at and with due_at, then finishes', async () => {
    const user = await procedures.register();
    const p = await createProject(user, 'Cycle');
    await start(user, p.id);

    clock.advance(HOUR);
    expect(await changeState(user, p.id, { state: 'paused' })).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'Cycle', state: 'paused', startedAt: T0S, dueAt: DUE, pausedAt: T0S + HOUR }),
    );

    clock.advance(HOUR);
    expect(await changeState(user, p.id, { state: 'started' })).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'Cycle', state: 'started', startedAt: T0S, dueAt: DUE }),
    );

    clock.advance(HOUR);
    await pause(user, p.id);
    clock.advance(DAY); // 2026-06-16T15:00:00Z; next midnight is 2026-06-17T00:00:00Z
    const tomorrow = NEXT_MIDNIGHT + DAY;
    await expectProcedureError(changeState(user, p.id, { state: 'started', due_at: tomorrow - 1 }), 422, 'cannot_be_before_started_at', {
      pointer: '/project/due_at',
    });
    expect((await getProject(user, p.id)).data.attributes).toMatchObject({ state: 'paused', pausedAt: T0S + 3 * HOUR, dueAt: DUE });
    expect(await changeState(user, p.id, { state: 'started', due_at: tomorrow })).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'Cycle', state: 'started', startedAt: T0S, dueAt: tomorrow }),
    );

    clock.advance(HOUR);
    const expected = projectDoc({
      id: p.id, userId: user.id, name: 'Cycle', state: 'finished',
      startedAt: T0S, dueAt: tomorrow, finishedAt: T0S + 3 * HOUR + DAY + HOUR,
    });
    expect(await changeState(user, p.id, { state: 'finished' })).toEqual(expected);
    expect(await getProject(user, p.id)).toEqual(expected);
  });

  it('checks finished_at: between startedAt and the end of today, both inclusive', async () => {
    const user = await procedures.register();
    const [a, b, c] = [await createProject(user, 'a'), await createProject(user, 'b'), await createProject(user, 'c')];
    for (const p of [a, b, c]) await start(user, p.id); // startedAt = T0S
    clock.advance(DAY); // 2026-06-16T12:00:00Z
    const endOfToday = END_OF_TODAY + DAY;

    for (const finishedAt of [T0S - 1, 0]) {
      await expectProcedureError(changeState(user, a.id, { state: 'finished', finished_at: finishedAt }), 422, 'cannot_be_before_started_at', {
        pointer: '/project/finished_at',
      });
    }
    for (const finishedAt of [endOfToday + 1, endOfToday + DAY]) {
      await expectProcedureError(changeState(user, a.id, { state: 'finished', finished_at: finishedAt }), 422, 'cannot_be_after_today', {
        pointer: '/project/finished_at',
      });
    }
    expect((await getProject(user, a.id)).data.attributes).toMatchObject({ state: 'started', finishedAt: 0 });

    expect(await changeState(user, a.id, { state: 'finished', finished_at: T0S })).toEqual(
      projectDoc({ id: a.id, userId: user.id, name: 'a', state: 'finished', startedAt: T0S, dueAt: DUE, finishedAt: T0S }),
    );
    expect(await changeState(user, b.id, { state: 'finished', finished_at: endOfToday })).toEqual(
      projectDoc({ id: b.id, userId: user.id, name: 'b', state: 'finished', startedAt: T0S, dueAt: DUE, finishedAt: endOfToday }),
    );
    expect(await changeState(user, c.id, { state: 'finished' })).toEqual(
      projectDoc({ id: c.id, userId: user.id, name: 'c', state: 'finished', startedAt: T0S, dueAt: DUE, finishedAt: T0S + DAY }),
    );
  });

  it('refuses due_at on pause and finish, finished_at on start and pause, and unknown members, as cannot_be_set', async () => {
    const user = await procedures.register();
    const newed = await createProject(user, 'newed');
    const started = await createProject(user, 'started');
    await start(user, started.id);
    const paused = await createProject(user, 'paused');
    await start(user, paused.id);
    await pause(user, paused.id);
    const before = await Promise.all([newed, started, paused].map((p) => getProject(user, p.id)));

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
      await expectProcedureError(changeState(user, id, project), 422, 'cannot_be_set', { pointer });
    }
    const after = await Promise.all([newed, started, paused].map((p) => getProject(user, p.id)));
    expect(after).toEqual(before);
  });

  it('answers invalid_transition for every move that is not in the state machine', async () => {
    const user = await procedures.register();
    const newed = await createProject(user, 'newed');
    const started = await createProject(user, 'started');
    await start(user, started.id);
    const paused = await createProject(user, 'paused');
    await start(user, paused.id);
    await pause(user, paused.id);
    const finished = await createProject(user, 'finished');
    await start(user, finished.id);
    await finish(user, finished.id);
    const projects = { newed, started, paused, finished };
    const before = await Promise.all(Object.values(projects).map((p) => getProject(user, p.id)));

    const valid = new Set(['newed>started', 'started>paused', 'paused>started', 'started>finished']);
    const requested = ['newed', 'started', 'paused', 'finished', 'abandoned', 'planned', 'foo', 'STARTED', 'Started', ' started', ''];
    let checked = 0;
    for (const [from, p] of Object.entries(projects)) {
      for (const to of requested) {
        if (valid.has(`${from}>${to}`)) continue;
        // Members that the move would need are given, so that only the transition is wrong.
        const project: Record<string, unknown> = { state: to };
        if (to === 'started') project.due_at = DUE;
        const response = await procedureError(changeState(user, p.id, project));
        expect(response.errors[0]?.code, `${from} -> ${JSON.stringify(to)}: ${JSON.stringify(response.errors)}`).toBe('invalid_transition');
        expectOnlyError(response, 422, 'invalid_transition', { pointer: '/project/state' });
        checked++;
      }
    }
    expect(checked).toBe(4 * requested.length - 4);
    const after = await Promise.all(Object.values(projects).map((p) => getProject(user, p.id)));
    expect(after).toEqual(before);
  });

  it.each([
    ['a number', 1],
    ['null', null],
    ['true', true],
    ['an object', { to: 'started' }],
    ['an array', ['started']],
  ])('refuses a state that is %s as invalid on /project/state', async (_what, state) => {
    const user = await procedures.register();
    const p = await createProject(user, 'typed');
    await expectProcedureError(changeState(user, p.id, { state, due_at: DUE }), 422, 'invalid', { pointer: '/project/state' });
    expect(await getProject(user, p.id)).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'typed' }));
  });

  it.each([
    ['an empty project', {}],
    ['only due_at', { due_at: DUE }],
    ['only finished_at and an unknown member', { finished_at: T0S, foo: 1 }],
  ])('answers must_be_set on /project/state for %s', async (_what, project) => {
    const user = await procedures.register();
    const p = await createProject(user, 'nostate');
    await expectProcedureError(changeState(user, p.id, project), 422, 'must_be_set', { pointer: '/project/state' });
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
    const user = await procedures.register();
    const p = await createProject(user, 'typed');
    const project: Record<string, unknown> =
      field === 'due_at' ? { state: 'started', due_at: value } : { state: 'started', due_at: DUE, finished_at: value };
    await expectProcedureError(changeState(user, p.id, project), 422, 'invalid', { pointer: `/project/${field}` });
    expect(await getProject(user, p.id)).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'typed' }));
  });

  it('checks in the order of API-CONTRACT §2', async () => {
    const user = await procedures.register();
    const newed = await createProject(user, 'newed');
    const finished = await createProject(user, 'finished');
    await start(user, finished.id);
    await finish(user, finished.id);
    const started = await createProject(user, 'started');
    await start(user, started.id);

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
      const response = await procedureError(changeState(user, id, project));
      expect(response.errors[0]?.code, `${what}: ${JSON.stringify(response.errors)}`).toBe(code);
      expectOnlyError(response, 422, code, { pointer });
    }
  });
});

// =============================================================================================

describe('limit of 3 started projects', () => {
  it('refuses a 4th start and a restart with reached_max_started; pausing or finishing frees a slot', async () => {
    const user = await procedures.register();
    const ps = [];
    for (const name of ['one', 'two', 'three', 'four', 'five']) ps.push(await createProject(user, name));
    const [p1, p2, p3, p4, p5] = ps as [any, any, any, any, any];
    await start(user, p1.id);
    await start(user, p2.id);
    await start(user, p3.id);

    await expectProcedureError(changeState(user, p4.id, { state: 'started', due_at: DUE }), 422, 'reached_max_started', { pointer: '/project/state' });
    expect(await getProject(user, p4.id)).toEqual(projectDoc({ id: p4.id, userId: user.id, name: 'four' }));

    // Pausing one frees a slot...
    clock.advance(HOUR);
    await pause(user, p1.id);
    const p4Started = await start(user, p4.id);
    expect(p4Started.attributes).toMatchObject({ state: 'started', startedAt: T0S + HOUR });

    // ...so restarting the paused one now hits the limit.
    await expectProcedureError(changeState(user, p1.id, { state: 'started' }), 422, 'reached_max_started', { pointer: '/project/state' });
    await expectProcedureError(changeState(user, p1.id, { state: 'started', due_at: DUE + DAY }), 422, 'reached_max_started', {
      pointer: '/project/state',
    });
    expect(await getProject(user, p1.id)).toEqual(
      projectDoc({ id: p1.id, userId: user.id, name: 'one', state: 'paused', startedAt: T0S, dueAt: DUE, pausedAt: T0S + HOUR }),
    );

    // Date rules and must_be_set come before the limit.
    await expectProcedureError(changeState(user, p5.id, { state: 'started' }), 422, 'must_be_set', { pointer: '/project/due_at' });
    await expectProcedureError(changeState(user, p5.id, { state: 'started', due_at: END_OF_TODAY }), 422, 'cannot_be_before_started_at', {
      pointer: '/project/due_at',
    });
    await expectProcedureError(changeState(user, p1.id, { state: 'started', due_at: END_OF_TODAY }), 422, 'cannot_be_before_started_at', {
      pointer: '/project/due_at',
    });
    await expectProcedureError(changeState(user, p1.id, { state: 'started', finished_at: T0S }), 422, 'cannot_be_set', {
      pointer: '/project/finished_at',
    });

    // Finishing one frees a slot for the restart.
    await finish(user, p2.id);
    const restarted = await changeState(user, p1.id, { state: 'started' });
    expect(restarted.data.attributes).toMatchObject({ state: 'started', pausedAt: 0, startedAt: T0S });
    await expectProcedureError(changeState(user, p5.id, { state: 'started', due_at: DUE }), 422, 'reached_max_started', {
      pointer: '/project/state',
    });

    const list = await user.api.projects.list({});
    expect(list.data.map((p: any) => [p.attributes.name, p.attributes.state])).toEqual([
      ['one', 'started'],
      ['two', 'finished'],
      ['three', 'started'],
      ['four', 'started'],
      ['five', 'newed'],
    ]);
  });

  it("counts only the user's own started projects", async () => {
    const alice = await procedures.register();
    const bob = await procedures.register();
    for (const name of ['a1', 'a2', 'a3']) await start(alice, (await createProject(alice, name)).id);
    for (const name of ['b1', 'b2', 'b3']) {
      const p = await createProject(bob, name);
      expect((await changeState(bob, p.id, { state: 'started', due_at: DUE })).data.attributes.state).toBe('started');
    }
  });

  it('frees a slot when a started project is deleted', async () => {
    const user = await procedures.register();
    const ids = [];
    for (const name of ['d1', 'd2', 'd3', 'd4']) ids.push((await createProject(user, name)).id);
    for (const id of ids.slice(0, 3)) await start(user, id);
    await expectProcedureError(changeState(user, ids[3]!, { state: 'started', due_at: DUE }), 422, 'reached_max_started', {
      pointer: '/project/state',
    });
    await user.api.projects.delete({ id: ids[0] });
    expect((await start(user, ids[3]!)).attributes.state).toBe('started');
  });
});

// =============================================================================================

describe('timestamps up to the end of year 9999', () => {
  it('accepts a far-future due_at (the largest year-9999 second)', async () => {
    const user = await procedures.register();
    const p = await createProject(user, 'far');
    expect((await changeState(user, p.id, { state: 'started', due_at: 253_402_300_799 })).data.attributes.dueAt).toBe(253_402_300_799);
  });

  it('accepts timestamps up to the end of year 9999 and refuses later ones as invalid (documented maximum)', async () => {
    const user = await procedures.register();
    const p = await createProject(user, 'farther');
    await expectProcedureError(changeState(user, p.id, { state: 'started', due_at: 253_402_300_800 }), 422, 'invalid', { pointer: '/project/due_at' });
    expect((await changeState(user, p.id, { state: 'started', due_at: 253_402_300_799 })).data.attributes.dueAt).toBe(253_402_300_799);
  });
});
