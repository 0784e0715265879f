/**
 * Creating and editing projects (SPEC.md 4.1, 4.3; API-CONTRACT.md §2, §6, §8): full success
 * bodies, the name rules (characters, length in code points, uniqueness per user in any case,
 * also under concurrent requests), descriptions, due_at edits by state, the wrappers, and
 * malformed or unknown ids on every project path.
 */
import { describe, expect, it } from 'vitest';
import { apiSteps } from '../helpers/api-steps.js';
import { expectError, expectErrors, JSON_CT, projectDoc } from '../helpers/envelope.js';
import { useTestApp } from '../helpers/test-app.js';
import { DAY, DUE, HOUR, T0S } from '../helpers/times.js';

const app = useTestApp({ resetClock: true });
const { createProjectRes, createProject, getProject, patchProject: patch, startProject: start, pauseProject: pause, finishProject: finish, listProjects } = apiSteps(app);

describe('POST /api/users/me/projects', () => {
  it('creates a newed project and answers 201 with the full body', async () => {
    const user = await app.register();
    const res = await createProjectRes(user.token, { project: { name: 'Coffee_Break-2' } });
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    expect(res.body).toEqual(projectDoc({ id: expect.any(Number) as unknown as number, userId: user.id, name: 'Coffee_Break-2' }));
    const id = res.body.data.id;
    expect(Number.isInteger(id) && id >= 1).toBe(true);
    expect(res.body.data.attributes.slug).toBe('coffee_break-2');

    // The same project is then readable.
    const got = await app.request('GET', `/api/projects/${id}`, { token: user.token });
    expect(got.status).toBe(200);
    expect(got.headers.get('content-type')).toBe(JSON_CT);
    expect(got.body).toEqual(projectDoc({ id, userId: user.id, name: 'Coffee_Break-2' }));
  });

  it('gives increasing ids', async () => {
    const user = await app.register();
    const a = await createProject(user.token, 'first');
    const b = await createProject(user.token, 'second');
    expect(b.id).toBeGreaterThan(a.id);
  });

  it('ignores unknown extra members', async () => {
    const user = await app.register();
    const res = await createProjectRes(user.token, { project: { name: 'extra', foo: 1, state: 'started' }, bar: true });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual(projectDoc({ id: res.body.data.id, userId: user.id, name: 'extra' }));
  });

  it('accepts a name of exactly 100 characters and refuses 101 as too_long', async () => {
    const user = await app.register();
    const name100 = 'a'.repeat(50) + 'B'.repeat(25) + '0123456789_-_-_-_-_-_-_-_';
    expect(name100).toHaveLength(100);
    const ok = await createProjectRes(user.token, { project: { name: name100 } });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.body).toEqual(projectDoc({ id: ok.body.data.id, userId: user.id, name: name100 }));

    const tooLong = await createProjectRes(user.token, { project: { name: 'x'.repeat(101) } });
    expectError(tooLong, 422, 'too_long', { pointer: '/project/name' });
  });

  it('reports both invalid and too_long for a 120-character name with a space', async () => {
    const user = await app.register();
    const res = await createProjectRes(user.token, { project: { name: 'a'.repeat(60) + ' ' + 'b'.repeat(59) } });
    expectErrors(res, [
      ['invalid', '/project/name'],
      ['too_long', '/project/name'],
    ]);
  });

  it('counts the name length in code points (99 letters and an emoji is only invalid)', async () => {
    const user = await app.register();
    const res = await createProjectRes(user.token, { project: { name: 'a'.repeat(99) + '😀' } });
    expectError(res, 422, 'invalid', { pointer: '/project/name' });
  });

  it.each([
    ['a space', 'has space'],
    ['a dot', 'dot.name'],
    ['an accented letter', 'café'],
    ['an emoji', 'rocket🚀'],
    ['a slash', 'a/b'],
    ['a tab', 'tab\tname'],
    ['a trailing newline', 'name\n'],
    ['a NUL', 'nul\u0000'],
    ['nothing', ''],
  ])('refuses a name with %s as invalid', async (_what, name) => {
    const user = await app.register();
    const res = await createProjectRes(user.token, { project: { name } });
    expectError(res, 422, 'invalid', { pointer: '/project/name' });
  });

  it('accepts letters, digits, underscores and hyphens', async () => {
    const user = await app.register();
    for (const name of ['abc', 'XYZ', '123', '_', '-', 'a-b_C9']) {
      const res = await createProjectRes(user.token, { project: { name } });
      expect(res.status, `${name}: ${res.text}`).toBe(201);
      expect(res.body.data.attributes).toMatchObject({ name, slug: name.toLowerCase() });
    }
  });

  it('refuses a name already used by the user, regardless of case, as taken', async () => {
    const user = await app.register();
    await createProject(user.token, 'Coffee');
    for (const name of ['Coffee', 'coffee', 'COFFEE', 'cOfFeE']) {
      const res = await createProjectRes(user.token, { project: { name } });
      expectError(res, 422, 'taken', { pointer: '/project/name' });
    }
    // Another user may use the name.
    const other = await app.register();
    const theirs = await createProjectRes(other.token, { project: { name: 'coffee' } });
    expect(theirs.status, theirs.text).toBe(201);
    // Only one project exists for the first user.
    const list = await listProjects(user.token);
    expect(list.body.data.map((p: any) => p.attributes.name)).toEqual(['Coffee']);
  });

  it.each([
    ['an empty body', {}],
    ['project null', { project: null }],
    ['project a string', { project: 'coffee' }],
    ['project a number', { project: 5 }],
    ['project an array', { project: [{ name: 'coffee' }] }],
    ['name outside the wrapper', { name: 'coffee' }],
  ])('answers parameter_missing on /project for %s', async (_what, body) => {
    const user = await app.register();
    const res = await createProjectRes(user.token, body);
    expectError(res, 422, 'parameter_missing', { pointer: '/project' });
  });

  it.each([
    ['an empty project', {}],
    ['only a description', { description: 'x' }],
  ])('answers parameter_missing on /project/name for %s', async (_what, project) => {
    const user = await app.register();
    const res = await createProjectRes(user.token, { project });
    expectError(res, 422, 'parameter_missing', { pointer: '/project/name' });
  });

  it.each([
    ['a number', 123],
    ['null', null],
    ['true', true],
    ['an array', ['coffee']],
    ['an object', { value: 'coffee' }],
  ])('refuses a name that is %s as invalid', async (_what, name) => {
    const user = await app.register();
    const res = await createProjectRes(user.token, { project: { name } });
    expectError(res, 422, 'invalid', { pointer: '/project/name' });
  });
});

// =============================================================================================

describe('GET /api/projects/:id', () => {
  it('answers 404 record_not_found for an unknown id', async () => {
    const user = await app.register();
    const res = await app.request('GET', '/api/projects/2147483000', { token: user.token });
    expectError(res, 404, 'record_not_found', { pointer: '/project' });
  });

  const malformed = ['abc', '0', '-1', '1.5', '99999999999999999999', '2147483648', '%20'];
  const calls: Array<[string, string, unknown]> = [
    ['GET', '', undefined],
    ['PATCH', '', { project: { name: 'renamed' } }],
    ['PUT', '/state', { project: { state: 'started', due_at: DUE } }],
    ['DELETE', '', undefined],
  ];
  const cases = malformed.flatMap((id) => calls.map(([method, suffix, body]) => [method, id, suffix, body] as const));
  it.each(cases)('%s /api/projects/%s%s answers 404 record_not_found', async (method, id, suffix, body) => {
    const user = await app.register();
    await createProject(user.token, 'existing');
    const res = await app.request(method, `/api/projects/${id}${suffix}`, { token: user.token, body });
    expectError(res, 404, 'record_not_found', { pointer: '/project' });
  });
});

// =============================================================================================

describe('PATCH /api/projects/:id', () => {
  it('renames and describes a project, answering the full body', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'Coffee');
    const res = await patch(user.token, p.id, { name: 'Tea_Time', description: 'Brew some tea.\nTwice.' });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toBe(JSON_CT);
    const expected = projectDoc({ id: p.id, userId: user.id, name: 'Tea_Time', description: 'Brew some tea.\nTwice.' });
    expect(res.body).toEqual(expected);
    expect(res.body.data.attributes.slug).toBe('tea_time');
    expect(await getProject(user.token, p.id)).toEqual(expected);
    // The old name is free again, the new one is taken.
    expect((await createProjectRes(user.token, { project: { name: 'coffee' } })).status).toBe(201);
    expectError(await createProjectRes(user.token, { project: { name: 'TEA_TIME' } }), 422, 'taken', { pointer: '/project/name' });
  });

  it('changes nothing for an empty project and ignores unknown members', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'Same');
    const res = await patch(user.token, p.id, { foo: 'bar' });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'Same' }));
    const empty = await patch(user.token, p.id, {});
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'Same' }));
  });

  it('allows renaming a project to its own name in another case', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'coffee');
    const res = await patch(user.token, p.id, { name: 'COFFEE' });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'COFFEE' }));
    expect(res.body.data.attributes.slug).toBe('coffee');
  });

  it("refuses another project's name in any case as taken and leaves the project unchanged", async () => {
    const user = await app.register();
    await createProject(user.token, 'Coffee');
    const p = await createProject(user.token, 'Tea');
    const res = await patch(user.token, p.id, { name: 'cOFFEE' });
    expectError(res, 422, 'taken', { pointer: '/project/name' });
    expect(await getProject(user.token, p.id)).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'Tea' }));
  });

  it('applies the name rules of creation', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'named');
    expectError(await patch(user.token, p.id, { name: 'n'.repeat(101) }), 422, 'too_long', { pointer: '/project/name' });
    expectError(await patch(user.token, p.id, { name: 'two words' }), 422, 'invalid', { pointer: '/project/name' });
    expectError(await patch(user.token, p.id, { name: '' }), 422, 'invalid', { pointer: '/project/name' });
    expectErrors(await patch(user.token, p.id, { name: 'a b'.repeat(40) }), [
      ['invalid', '/project/name'],
      ['too_long', '/project/name'],
    ]);
    const ok = await patch(user.token, p.id, { name: 'N'.repeat(100) });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'N'.repeat(100) }));
  });

  it('accepts a description of 10,000 code points and refuses 10,001 as too_long', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'described');

    const plain = 'd'.repeat(10_000);
    const ok = await patch(user.token, p.id, { description: plain });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'described', description: plain }));

    expectError(await patch(user.token, p.id, { description: 'd'.repeat(10_001) }), 422, 'too_long', {
      pointer: '/project/description',
    });

    // An emoji is one character: 10,000 emoji (20,000 UTF-16 units) fit, and come back intact.
    const emoji = '😀'.repeat(10_000);
    const emojiOk = await patch(user.token, p.id, { description: emoji });
    expect(emojiOk.status, emojiOk.text).toBe(200);
    expect(emojiOk.body.data.attributes.description).toBe(emoji);
    expect((await getProject(user.token, p.id)).data.attributes.description).toBe(emoji);

    const mixed = 'd'.repeat(9_999) + '🚀';
    const mixedOk = await patch(user.token, p.id, { description: mixed });
    expect(mixedOk.status, mixedOk.text).toBe(200);
    expect(mixedOk.body.data.attributes.description).toBe(mixed);

    expectError(await patch(user.token, p.id, { description: 'd'.repeat(10_000) + '🚀' }), 422, 'too_long', {
      pointer: '/project/description',
    });
    expectError(await patch(user.token, p.id, { description: '😀'.repeat(10_001) }), 422, 'too_long', {
      pointer: '/project/description',
    });
    // The refused descriptions did not replace the last accepted one.
    expect((await getProject(user.token, p.id)).data.attributes.description).toBe(mixed);

    // An empty description is fine.
    const cleared = await patch(user.token, p.id, { description: '' });
    expect(cleared.body).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'described' }));
  });

  it.each([
    ['a NUL character', 'before\u0000after'],
    ['an unpaired surrogate', 'broken \ud800 text'],
  ])('refuses a description with %s as invalid', async (_what, description) => {
    const user = await app.register();
    const p = await createProject(user.token, 'described');
    expectError(await patch(user.token, p.id, { description }), 422, 'invalid', { pointer: '/project/description' });
  });

  it.each([
    ['name', 123],
    ['name', null],
    ['name', true],
    ['description', 5],
    ['description', null],
    ['description', ['x']],
    ['due_at', '123'],
    ['due_at', String(DUE)],
    ['due_at', null],
    ['due_at', true],
    ['due_at', 1.5],
    ['due_at', -1],
    ['due_at', { at: DUE }],
  ])('refuses %s = %j as invalid', async (field, value) => {
    const user = await app.register();
    const p = await createProject(user.token, 'typed');
    await start(user.token, p.id);
    const res = await patch(user.token, p.id, { [field]: value });
    expectError(res, 422, 'invalid', { pointer: `/project/${field}` });
    expect(await getProject(user.token, p.id)).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'typed', state: 'started', startedAt: T0S, dueAt: DUE }),
    );
  });

  it.each([
    ['an empty body', {}],
    ['project a string', { project: 'x' }],
    ['project null', { project: null }],
  ])('answers parameter_missing on /project for %s', async (_what, body) => {
    const user = await app.register();
    const p = await createProject(user.token, 'wrapped');
    const res = await app.request('PATCH', `/api/projects/${p.id}`, { token: user.token, body });
    expectError(res, 422, 'parameter_missing', { pointer: '/project' });
  });

  it('reports a taken name and a cannot_be_set due_at together', async () => {
    const user = await app.register();
    await createProject(user.token, 'Taken');
    const p = await createProject(user.token, 'Mine');
    const res = await patch(user.token, p.id, { name: 'taken', due_at: DUE });
    expectErrors(res, [
      ['taken', '/project/name'],
      ['cannot_be_set', '/project/due_at'],
    ]);
    expect(await getProject(user.token, p.id)).toEqual(projectDoc({ id: p.id, userId: user.id, name: 'Mine' }));
  });

  it('reports a taken name and the due_at rules beside the schema\'s errors, on both doors, and changes nothing', async () => {
    // API-CONTRACT §2: every validation error of a request is reported, also those that need
    // the database (src/projects/project-input-rules.ts) when the schema refused another member.
    const user = await app.register();
    await createProject(user.token, 'Taken');
    const p = await createProject(user.token, 'Mine');
    const res = await patch(user.token, p.id, { name: 'taken', description: 'd'.repeat(10_001) });
    expectErrors(res, [['too_long', '/project/description'], ['taken', '/project/name']]);
    expectErrors(await patch(user.token, p.id, { name: 'a b', due_at: DUE }), [['invalid', '/project/name'], ['cannot_be_set', '/project/due_at']]);
    // A name the schema refuses is reported by the schema alone; a due_at equal to the stored one (0) is no change.
    expectErrors(await patch(user.token, p.id, { name: 'T'.repeat(101), description: 'd'.repeat(10_001), due_at: 0 }), [
      ['too_long', '/project/name'],
      ['too_long', '/project/description'],
    ]);
    await expect(app.trpc(user.token).projects.update.mutate({ id: p.id, project: { name: 'TAKEN', description: 'd'.repeat(10_001), due_at: DUE } })).rejects.toMatchObject({
      data: {
        code: 'too_long',
        httpStatus: 422,
        errors: [
          { code: 'too_long', source: { pointer: '/project/description' } },
          { code: 'taken', source: { pointer: '/project/name' } },
          { code: 'cannot_be_set', source: { pointer: '/project/due_at' } },
        ],
      },
    });
    // Another user's project is none of theirs, whatever the body: 404.
    const other = await app.register();
    const foreign = await patch(other.token, p.id, { name: 'mine', description: 'd'.repeat(10_001) });
    expect([foreign.status, foreign.body.errors]).toEqual([404, [expect.objectContaining({ code: 'record_not_found', source: { pointer: '/project' } })]]);
    const again = await patch(user.token, p.id, { name: 'taken', description: 'd'.repeat(10_000) });
    expectErrors(again, [['taken', '/project/name']]);
    expect((await getProject(user.token, p.id)).data.attributes).toMatchObject({ name: 'Mine', description: '' });
  });

  it('reports a due_at before the start beside the schema\'s errors', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'Started');
    await start(user.token, p.id);
    const before = await getProject(user.token, p.id);
    expectErrors(await patch(user.token, p.id, { description: 'd'.repeat(10_001), due_at: 1 }), [
      ['too_long', '/project/description'],
      ['cannot_be_before_started_at', '/project/due_at'],
    ]);
    expect(await getProject(user.token, p.id)).toEqual(before);
  });
});

// =============================================================================================

describe('PATCH due_at', () => {
  it('cannot be set while the project is newed, paused or finished', async () => {
    const user = await app.register();
    const newed = await createProject(user.token, 'newed');
    expectError(await patch(user.token, newed.id, { due_at: DUE }), 422, 'cannot_be_set', { pointer: '/project/due_at' });
    expect(await getProject(user.token, newed.id)).toEqual(projectDoc({ id: newed.id, userId: user.id, name: 'newed' }));

    const paused = await createProject(user.token, 'paused');
    await start(user.token, paused.id);
    app.clock.advance(HOUR);
    await pause(user.token, paused.id);
    expectError(await patch(user.token, paused.id, { due_at: DUE + DAY }), 422, 'cannot_be_set', { pointer: '/project/due_at' });
    expect(await getProject(user.token, paused.id)).toEqual(
      projectDoc({ id: paused.id, userId: user.id, name: 'paused', state: 'paused', startedAt: T0S, dueAt: DUE, pausedAt: T0S + HOUR }),
    );

    const finished = await createProject(user.token, 'finished');
    await start(user.token, finished.id);
    await finish(user.token, finished.id);
    expectError(await patch(user.token, finished.id, { due_at: DUE + DAY }), 422, 'cannot_be_set', { pointer: '/project/due_at' });
    expect((await getProject(user.token, finished.id)).data.attributes.dueAt).toBe(DUE);
  });

  it('can be changed while started, but not to before startedAt', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'due');
    await start(user.token, p.id); // startedAt = T0S
    app.clock.advance(2 * DAY);

    expectError(await patch(user.token, p.id, { due_at: T0S - 1 }), 422, 'cannot_be_before_started_at', {
      pointer: '/project/due_at',
    });
    expectError(await patch(user.token, p.id, { due_at: 0 }), 422, 'cannot_be_before_started_at', { pointer: '/project/due_at' });
    expect((await getProject(user.token, p.id)).data.attributes.dueAt).toBe(DUE);

    const later = await patch(user.token, p.id, { due_at: DUE + 3 * DAY });
    expect(later.status, later.text).toBe(200);
    expect(later.body).toEqual(
      projectDoc({ id: p.id, userId: user.id, name: 'due', state: 'started', startedAt: T0S, dueAt: DUE + 3 * DAY }),
    );

    const atStart = await patch(user.token, p.id, { due_at: T0S });
    expect(atStart.status, atStart.text).toBe(200);
    expect(atStart.body.data.attributes.dueAt).toBe(T0S);
  });

  it('changes name, description and due_at of a started project together', async () => {
    const user = await app.register();
    const p = await createProject(user.token, 'all');
    await start(user.token, p.id);
    const res = await patch(user.token, p.id, { name: 'All_Three', description: 'everything', due_at: DUE + DAY });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(
      projectDoc({
        id: p.id, userId: user.id, name: 'All_Three', description: 'everything',
        state: 'started', startedAt: T0S, dueAt: DUE + DAY,
      }),
    );
  });
});

// =============================================================================================

describe('name uniqueness under concurrent requests', () => {
  it('keeps names unique under concurrent creation: one 201, the others taken', async () => {
    const user = await app.register();
    const names = ['Race', 'race', 'RACE', 'rAcE', 'RaCe', 'racE'];
    const responses = await Promise.all(names.map((name) => createProjectRes(user.token, { project: { name } })));
    const created = responses.filter((r) => r.status === 201);
    expect(created, responses.map((r) => r.text).join('\n')).toHaveLength(1);
    for (const r of responses.filter((x) => x.status !== 201)) expectError(r, 422, 'taken', { pointer: '/project/name' });
    expect((await listProjects(user.token)).body.data).toEqual([created[0]!.body.data]);
  });

  it('keeps names unique under concurrent renames: one 200, the other taken', async () => {
    const user = await app.register();
    const a = await createProject(user.token, 'left');
    const b = await createProject(user.token, 'right');
    const responses = await Promise.all([patch(user.token, a.id, { name: 'Center' }), patch(user.token, b.id, { name: 'center' })]);
    expect(responses.map((r) => r.status).sort()).toEqual([200, 422]);
    expectError(responses.find((r) => r.status === 422)!, 422, 'taken', { pointer: '/project/name' });
    const names = (await listProjects(user.token)).body.data.map((p: any) => p.attributes.slug).sort();
    expect(names).toEqual(['center', responses[0]!.status === 200 ? 'right' : 'left'].sort());
  });
});
