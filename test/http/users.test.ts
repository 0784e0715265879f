import { describe, expect, it } from 'vitest';
import { DAY, onlyError, useTestApp } from '../helpers/test-app.js';

const app = useTestApp();

describe('register', () => {
  it('creates a user and returns a first token', async () => {
    const res = await app.request('POST', '/api/users', { body: { user: { username: 'alice', password: 'password1' } } });
    expect(res.status).toBe(201);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(res.body).toEqual({
      data: { type: 'user', id: expect.any(Number), attributes: { username: 'alice', timeZone: 'UTC' } },
      meta: { token: expect.stringMatching(/^[A-Za-z0-9_-]{54}$/) },
    });
    const me = await app.request('GET', '/api/users/me', { token: res.body.meta.token });
    expect(me.status).toBe(200);
    expect(me.body).toEqual({ data: { type: 'user', id: res.body.data.id, attributes: { username: 'alice', timeZone: 'UTC' } } });
  });

  it('refuses a taken username', async () => {
    await app.request('POST', '/api/users', { body: { user: { username: 'bob', password: 'password1' } } });
    const res = await app.request('POST', '/api/users', { body: { user: { username: 'bob', password: 'password2' } } });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({
      errors: [
        {
          status: '422',
          code: 'taken',
          title: 'Resource validation failed',
          detail: 'This username is already taken.',
          source: { pointer: '/user/username' },
        },
      ],
    });
  });

  it('reports a taken username beside the schema\'s errors of other members, on both doors, and registers nothing', async () => {
    await app.request('POST', '/api/users', { body: { user: { username: 'erin', password: 'password1' } } });
    const res = await app.request('POST', '/api/users', { body: { user: { username: 'erin', password: 'x' } } });
    expect(res.status).toBe(422);
    expect(res.body.errors.map((e: { code: string; source: { pointer: string } }) => [e.code, e.source.pointer])).toEqual([
      ['too_short', '/user/password'],
      ['taken', '/user/username'],
    ]);
    await expect(app.trpc().users.register.mutate({ user: { username: 'erin', password: 'password2', time_zone: 'Mars/Olympus' } })).rejects.toMatchObject({
      data: {
        code: 'invalid',
        httpStatus: 422,
        errors: [
          expect.objectContaining({ code: 'invalid', source: { pointer: '/user/time_zone' } }),
          expect.objectContaining({ code: 'taken', detail: 'This username is already taken.', source: { pointer: '/user/username' } }),
        ],
      },
    });
    // A free name adds nothing to the schema's errors, and nothing was registered.
    const free = await app.request('POST', '/api/users', { body: { user: { username: 'frank', password: 'x' } } });
    expect(free.body.errors.map((e: { code: string }) => e.code)).toEqual(['too_short']);
    expect((await app.request('POST', '/api/users/authorizations', { body: { username: 'frank', password: 'x' } })).status).toBe(401);
  });

  it('reports a name taken regardless of case (§3) beside its capitals being invalid, on both doors', async () => {
    await app.request('POST', '/api/users', { body: { user: { username: 'grace', password: 'password1' } } });
    for (const username of ['GRACE', 'Grace']) {
      const res = await app.request('POST', '/api/users', { body: { user: { username, password: 'password2' } } });
      expect(res.body.errors.map((e: { code: string; source: { pointer: string } }) => [e.code, e.source.pointer])).toEqual([
        ['invalid', '/user/username'],
        ['taken', '/user/username'],
      ]);
    }
    await expect(app.trpc().users.register.mutate({ user: { username: 'gRace', password: 'password2' } })).rejects.toMatchObject({
      data: { httpStatus: 422, errors: [expect.objectContaining({ code: 'invalid' }), expect.objectContaining({ code: 'taken' })] },
    });
    // Capitals alone, of a free name: invalid only.
    const free = await app.request('POST', '/api/users', { body: { user: { username: 'Heidi', password: 'password2' } } });
    expect(free.body.errors.map((e: { code: string }) => e.code)).toEqual(['invalid']);
  });

  it('8 parallel registrations of one username: one 201, seven 422 taken, one user with one token', async () => {
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) => app.request('POST', '/api/users', { body: { user: { username: 'racer', password: `password${i}` } } })),
    );
    expect(answers.map((r) => r.status).sort()).toEqual([201, 422, 422, 422, 422, 422, 422, 422]);
    for (const r of answers.filter((a) => a.status === 422)) expect(onlyError(r.body)).toMatchObject({ code: 'taken' });
    const winner = answers.find((r) => r.status === 201)!;
    expect((await app.request('GET', '/api/users/me', { token: winner.body.meta.token })).status).toBe(200);
    const rows = await app.orm.em.getConnection().execute('select count(*)::int as users, (select count(*)::int from access_tokens t join users u on u.id = t.user_id where u.username = ?) as tokens from users where username = ?', ['racer', 'racer']);
    expect(rows).toEqual([{ users: 1, tokens: 1 }]);
  });

  it.each([
    // Capitals of a name nobody has ('alice' is taken above: then also taken, tested below).
    ['Zoe', 'invalid'],
    ['al ice', 'invalid'],
    ['', 'invalid'],
    ['a'.repeat(51), 'too_long'],
  ])('refuses the username %j as %s', async (username, code) => {
    const res = await app.request('POST', '/api/users', { body: { user: { username, password: 'password1' } } });
    expect(res.status).toBe(422);
    expect(onlyError(res.body)).toMatchObject({ code, source: { pointer: '/user/username' } });
  });

  it('accepts a 50-character username and a 200-character password', async () => {
    const res = await app.request('POST', '/api/users', {
      body: { user: { username: 'a'.repeat(50), password: 'p'.repeat(200) } },
    });
    expect(res.status).toBe(201);
  });

  it.each([
    ['short', 'too_short'],
    ['p'.repeat(201), 'too_long'],
  ])('refuses the password %j as %s', async (password, code) => {
    const res = await app.request('POST', '/api/users', { body: { user: { username: 'carol', password } } });
    expect(res.status).toBe(422);
    expect(onlyError(res.body)).toMatchObject({ code, source: { pointer: '/user/password' } });
  });

  it('counts password length in code points', async () => {
    const res = await app.request('POST', '/api/users', { body: { user: { username: 'emoji', password: '🔑🔑🔑🔑🔑🔑🔑' } } });
    expect(res.status).toBe(422);
    expect(onlyError(res.body)).toMatchObject({ code: 'too_short' });
  });

  it('reports every missing member', async () => {
    const res = await app.request('POST', '/api/users', { body: { user: {} } });
    expect(res.status).toBe(422);
    expect(res.body.errors.map((e: any) => [e.code, e.source.pointer])).toEqual([
      ['parameter_missing', '/user/username'],
      ['parameter_missing', '/user/password'],
    ]);
    const wrapper = await app.request('POST', '/api/users', { body: { username: 'x' } });
    expect(onlyError(wrapper.body)).toMatchObject({ code: 'parameter_missing', source: { pointer: '/user' } });
  });
});

describe('authorize and revoke', () => {
  it('logs in with the right password only', async () => {
    const { username } = await app.register();
    const ok = await app.request('POST', '/api/users/authorizations', { body: { username, password: 'correct horse' } });
    expect(ok.status).toBe(201);
    expect(ok.body.meta.token).toMatch(/^[A-Za-z0-9_-]{54}$/);

    const wrong = await app.request('POST', '/api/users/authorizations', { body: { username, password: 'wrong horse' } });
    expect(wrong.status).toBe(401);
    expect(onlyError(wrong.body)).toMatchObject({ status: '401', code: 'login_failed' });
    expect(onlyError(wrong.body).source).toBeUndefined();

    const unknown = await app.request('POST', '/api/users/authorizations', { body: { username: 'nobody', password: 'correct horse' } });
    expect(unknown.status).toBe(401);
    expect(onlyError(unknown.body)).toMatchObject({ code: 'login_failed' });
  });

  it('accepts the token bare and as Bearer, and each token independently', async () => {
    const user = await app.register();
    const second = await app.request('POST', '/api/users/authorizations', { body: { username: user.username, password: 'correct horse' } });
    expect((await app.request('GET', '/api/users/me', { headers: { Authorization: `Bearer ${user.token}` } })).status).toBe(200);
    expect((await app.request('GET', '/api/users/me', { headers: { Authorization: `bearer ${user.token}` } })).status).toBe(200);

    const revoked = await app.request('DELETE', '/api/users/me/authorizations/current', { token: user.token });
    expect(revoked.status).toBe(204);
    expect(revoked.text).toBe('');
    const after = await app.request('GET', '/api/users/me', { token: user.token });
    expect(after.status).toBe(401);
    expect(onlyError(after.body)).toMatchObject({ status: '401', code: 'unauthorized' });
    expect((await app.request('GET', '/api/users/me', { token: second.body.meta.token })).status).toBe(200);
  });

  it('expires tokens after 30 days', async () => {
    const user = await app.register();
    app.clock.advance(30 * DAY - 1);
    expect((await app.request('GET', '/api/users/me', { token: user.token })).status).toBe(200);
    app.clock.advance(1);
    const expired = await app.request('GET', '/api/users/me', { token: user.token });
    expect(expired.status).toBe(401);
    expect(onlyError(expired.body)).toMatchObject({ code: 'unauthorized' });
  });

  it.each([
    ['no header', undefined],
    ['an unknown token', 'A'.repeat(43)],
    ['a malformed token', 'not a token'],
    ['an empty Bearer', 'Bearer '],
  ])('answers 401 to %s', async (_what, header) => {
    const res = await app.request('GET', '/api/users/me', { headers: header === undefined ? {} : { Authorization: header } });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({
      errors: [{ status: '401', code: 'unauthorized', title: 'Unauthorized', detail: expect.any(String) }],
    });
  });

  it('stores tokens and passwords only as hashes', async () => {
    const user = await app.register();
    const em = app.orm.em.fork();
    const tokens = await em.execute<{ token_hash: string }[]>('select token_hash from access_tokens where user_id = ?', [user.id]);
    expect(tokens).toHaveLength(1);
    expect(tokens[0]!.token_hash).not.toContain(user.token);
    expect(tokens[0]!.token_hash).toMatch(/^[0-9a-f]{64}$/);
    const [row] = await em.execute<{ password_hash: string }[]>('select password_hash from users where id = ?', [user.id]);
    expect(row!.password_hash).toMatch(/^scrypt\$\d+\$8\$/);
    expect(row!.password_hash).not.toContain('correct horse');
  });
});

describe('the tRPC door', () => {
  it('registers, logs in and reads the user', async () => {
    const anonymous = app.trpc();
    const created = await anonymous.users.register.mutate({ user: { username: 'trpc_user', password: 'password1' } });
    expect(created.data.attributes.username).toBe('trpc_user');
    const login = await anonymous.users.authorize.mutate({ username: 'trpc_user', password: 'password1' });
    const me = await app.trpc(login.meta.token).users.me.query();
    expect(me).toEqual({ data: { type: 'user', id: created.data.id, attributes: { username: 'trpc_user', timeZone: 'UTC' } } });
    await app.trpc(login.meta.token).users.revoke.mutate();
    await expect(app.trpc(login.meta.token).users.me.query()).rejects.toMatchObject({
      data: { code: 'unauthorized', httpStatus: 401 },
    });
  });

  it('reports the same codes as REST', async () => {
    await expect(
      app.trpc().users.register.mutate({ user: { username: 'Bad Name', password: 'x' } }),
    ).rejects.toMatchObject({
      data: {
        code: 'invalid',
        httpStatus: 422,
        errors: [
          expect.objectContaining({ code: 'invalid', source: { pointer: '/user/username' } }),
          expect.objectContaining({ code: 'too_short', source: { pointer: '/user/password' } }),
        ],
      },
    });
  });
});
