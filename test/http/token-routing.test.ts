/**
 * Access tokens and event-stream tickets that name their user (src/users/credentials.ts): the
 * lookup of a request's token, a login, a revocation and a ticket's redemption name the user
 * on every table they read, so that a database split by user asks one node for each. To
 * clients a token stays opaque (API-CONTRACT.md §3); these tests read it as the service does.
 *
 * What a request sends is read from the ORM's query log (as test/procedures/write-sql.test.ts
 * does), on an ORM of the test's own over the app's database.
 */
import { randomBytes } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openOrm } from '../../src/app/orm.js';
import { writes } from '../../src/app/write-functions.js';
import { createCaller } from '../../src/app/router.js';
import { hashTicket } from '../../src/changes/events.router.js';
import { redeemStreamTicket, userOfStreamTicket } from '../../src/changes/event.store.js';
import { ManualClock } from '../../src/core/clock.js';
import { createContextInner } from '../../src/core/context.js';
import { Announcer } from '../../src/writes/announcer.js';
import { MAX_ID } from '../../src/core/fields.js';
import { authenticate } from '../../src/users/authentication.js';
import { TOKEN_LIFETIME_SECONDS, hashAccessToken, userOfSecret } from '../../src/users/credentials.js';
import { userByName } from '../../src/users/user.store.js';
import { openStream } from '../helpers/sse.js';
import { T0, directUrlOf, onlyError, useTestAppWithSql } from '../helpers/test-app.js';

const { app, db } = useTestAppWithSql();
const EVENTS = '/api/users/me/events';

/** `token` with its user part naming `userId` instead (the random part kept). */
function naming(token: string, userId: bigint | number): string {
  const bytes = Buffer.from(token, 'base64url');
  bytes.writeBigUInt64BE(BigInt(userId), 0);
  return bytes.toString('base64url');
}

/** A string of the current form: `userId` in 8 bytes, then 32 random ones. */
function secretOf(userId: bigint): string {
  const bytes = Buffer.alloc(40);
  bytes.writeBigUInt64BE(userId, 0);
  randomBytes(32).copy(bytes, 8);
  return bytes.toString('base64url');
}

/** The REST answer to a token of no user, as before tokens named their user: every refused token gets exactly this. */
async function unauthorizedBody() {
  const res = await app.request('GET', '/api/users/me', { headers: { Authorization: 'Z'.repeat(43) } });
  expect(res.status).toBe(401);
  return res.body;
}

async function expectRefusedOnBothDoors(authorization: string, what: string) {
  const rest = await app.request('GET', '/api/users/me', { headers: { Authorization: authorization } });
  expect(rest.status, `${what} on REST: ${rest.text}`).toBe(401);
  expect(rest.body, what).toEqual(await unauthorizedBody());
  expect(onlyError(rest.body)).toMatchObject({ code: 'unauthorized' });
  await expect(app.trpc(authorization).users.me.query(), `${what} on tRPC`).rejects.toMatchObject({
    data: { code: 'unauthorized', httpStatus: 401 },
  });
}

/** A token issued before tokens named their user: 32 random bytes, its hash written directly. */
async function oldFormToken(userId: number, expiresAt: Date): Promise<string> {
  const token = randomBytes(32).toString('base64url');
  await db.query('insert into access_tokens (user_id, token_hash, created_at, expires_at) values ($1, $2, $3, $4)', [
    userId, hashAccessToken(token), new Date(T0), expiresAt,
  ]);
  return token;
}

describe('access tokens that name their user', () => {
  it('a token from registration and one from a login work on both doors, and each names its user', async () => {
    const u = await app.register();
    const login = await app.request('POST', '/api/users/authorizations', { body: { username: u.username, password: 'correct horse' } });
    expect(login.status).toBe(201);
    for (const token of [u.token, login.body.meta.token as string]) {
      expect(userOfSecret(token)).toBe(u.id);
      const rest = await app.request('GET', '/api/users/me', { token });
      expect(rest.status).toBe(200);
      expect(rest.body.data).toMatchObject({ type: 'user', id: u.id, attributes: { username: u.username } });
      expect((await app.trpc(token).users.me.query()).data).toMatchObject({ id: u.id, attributes: { username: u.username } });
      expect((await app.request('GET', '/api/users/me', { headers: { Authorization: `Bearer ${token}` } })).status).toBe(200);
    }
  });

  it("a token whose user part is changed to another user's id is 401 on both doors", async () => {
    const a = await app.register();
    const b = await app.register();
    await expectRefusedOnBothDoors(naming(a.token, b.id), "A's token naming B");
    await expectRefusedOnBothDoors(naming(b.token, a.id), "B's token naming A");
    // Both users' own tokens still work.
    expect((await app.request('GET', '/api/users/me', { token: a.token })).body.data.id).toBe(a.id);
    expect((await app.request('GET', '/api/users/me', { token: b.token })).body.data.id).toBe(b.id);
  });

  it.each([
    ['its user id 0', () => secretOf(0n)],
    ['its user id one past the largest id', () => secretOf(BigInt(MAX_ID) + 1n)],
    ['its user id 2^53', () => secretOf(2n ** 53n)],
    ['its user id 2^63', () => secretOf(2n ** 63n)],
    ['every bit set', () => '_'.repeat(54)],
    ['a user that does not exist', () => secretOf(BigInt(MAX_ID))],
    ['a last character with its unused bits set', () => secretOf(1n).slice(0, 53) + 'B'],
    ['53 characters', () => secretOf(1n).slice(0, 53)],
    ['55 characters', () => `${secretOf(1n)}A`],
    ['44 characters', () => 'A'.repeat(44)],
    ['42 characters', () => 'A'.repeat(42)],
    ['an unknown old-form token', () => 'Z'.repeat(43)],
    ['200 characters', () => 'A'.repeat(200)],
    ['201 characters', () => 'A'.repeat(201)],
    ['19 characters', () => 'A'.repeat(19)],
    ['standard base64 (+ and /)', () => secretOf(1n).slice(0, 52) + '+/'],
    ['base64 padding', () => `${secretOf(1n).slice(0, 52)}==`],
    ['a dot inside', () => `${secretOf(1n).slice(0, 27)}.${secretOf(1n).slice(28)}`],
    ['a non-ASCII letter', () => `${secretOf(1n).slice(0, 53)}é`],
    ['two tokens', () => `${secretOf(1n)} ${secretOf(1n)}`],
    ['a percent-encoded token', () => encodeURIComponent(`${secretOf(1n).slice(0, 50)}+/==`)],
  ])('a token of %s is 401 on both doors, never a 500', async (what, make) => {
    const token = make();
    await expectRefusedOnBothDoors(token, what);
    await expectRefusedOnBothDoors(`Bearer ${token}`, `${what} as Bearer`);
  });

  it('a token issued before tokens named their user still works until it expires, and can be revoked', async () => {
    const u = await app.register();
    const old = await oldFormToken(u.id, new Date(T0 + TOKEN_LIFETIME_SECONDS * 1000));
    expect(userOfSecret(old)).toBeNull();
    expect((await app.request('GET', '/api/users/me', { token: old })).body.data.id).toBe(u.id);
    expect((await app.trpc(old).users.me.query()).data.id).toBe(u.id);
    const expired = await oldFormToken(u.id, new Date(T0 - 1000));
    await expectRefusedOnBothDoors(expired, 'an expired old-form token');
    expect((await app.request('DELETE', '/api/users/me/authorizations/current', { token: old })).status).toBe(204);
    await expectRefusedOnBothDoors(old, 'a revoked old-form token');
    expect((await app.request('GET', '/api/users/me', { token: u.token })).status).toBe(200);
  });

  it("revoking a token ends it on both doors; the user's other token still works", async () => {
    const u = await app.register();
    const other = (await app.request('POST', '/api/users/authorizations', { body: { username: u.username, password: 'correct horse' } })).body.meta
      .token as string;
    await app.trpc(u.token).users.revoke.mutate();
    await expectRefusedOnBothDoors(u.token, 'a revoked token');
    expect((await app.request('DELETE', '/api/users/me/authorizations/current', { token: u.token })).status).toBe(401);
    expect((await app.trpc(other).users.me.query()).data.id).toBe(u.id);
    const { rows } = await db.query<{ n: number }>('select count(*)::int as n from access_tokens where user_id = $1', [u.id]);
    expect(rows[0]!.n).toBe(1);
  });
});

describe('stream tickets that name their user', () => {
  async function ticketOf(token: string): Promise<string> {
    const res = await app.request('POST', `${EVENTS}/tickets`, { token });
    expect(res.status).toBe(201);
    return res.body.data.attributes.ticket as string;
  }

  async function openWith(ticket: string) {
    return openStream(`${app.baseUrl}${EVENTS}?ticket=${encodeURIComponent(ticket)}&after=0`);
  }

  it('a ticket names the user it was issued to, opens one stream once, and changed to name another user opens none', async () => {
    const a = await app.register();
    const b = await app.register();
    const ticket = await ticketOf(a.token);
    expect(userOfStreamTicket(ticket)).toBe(a.id);
    const forged = await openWith(naming(ticket, b.id));
    expect(forged.status).toBe(401);
    expect(onlyError(JSON.parse(forged.text!))).toMatchObject({ code: 'unauthorized' });
    const s = await openWith(ticket);
    try {
      expect(s.status).toBe(200);
    } finally {
      s.close();
    }
    expect((await openWith(ticket)).status).toBe(401);
  });

  it('a ticket is not redeemed for another user, and the attempt does not use it up', async () => {
    const a = await app.register();
    const b = await app.register();
    const ticket = await ticketOf(a.token);
    const now = app.clock.now();
    expect(await redeemStreamTicket(app.orm.em.fork(), b.id, hashTicket(ticket), now)).toBeNull();
    expect(await redeemStreamTicket(app.orm.em.fork(), a.id, hashTicket(ticket), now)).toEqual({ userId: a.id, tokenHash: hashAccessToken(a.token) });
    expect(await redeemStreamTicket(app.orm.em.fork(), a.id, hashTicket(ticket), now)).toBeNull();
  });

  it.each([
    ['its user id 0', () => secretOf(0n)],
    ['its user id one past the largest id', () => secretOf(BigInt(MAX_ID) + 1n)],
    ['its user id 2^63', () => secretOf(2n ** 63n)],
    ['the old form (24 random bytes)', () => randomBytes(24).toString('base64url')],
    ['53 characters', () => secretOf(1n).slice(0, 53)],
    ['a last character with its unused bits set', () => secretOf(1n).slice(0, 53) + 'B'],
    ['standard base64 (+ and /)', () => secretOf(1n).slice(0, 52) + '+/'],
    ['1000 characters', () => 'A'.repeat(1000)],
    ['nothing', () => ''],
  ])('a ticket of %s is 401 unauthorized, never a 500', async (_what, make) => {
    const s = await openWith(make());
    expect(s.status).toBe(401);
    expect(onlyError(JSON.parse(s.text!))).toMatchObject({ code: 'unauthorized' });
  });
});

describe('the statements name the user', () => {
  const clock = new ManualClock(T0);
  let orm: MikroORM;
  const announcer = new Announcer(() => orm.em.fork());
  let log: string[] | null = null;

  beforeAll(async () => {
    orm = await openOrm(app.databaseUrl, {
      migrate: false,
      poolSize: 2,
      directUrl: directUrlOf(app.databaseUrl),
      onQuery: (line) => {
        if (log && line.startsWith('[query]')) log.push(line);
      },
    });
  });
  afterAll(async () => {
    await orm?.close(true);
  });

  /** A statement as logged, without the log's prefix and timing, its white space folded. */
  const statementOf = (line: string) => line.replace(/^\[query\] /, '').replace(/ \[took \d+ ms(, [^\]]*)?\]$/, '').replace(/\s+/g, ' ').trim();

  async function sqlOf<T>(run: () => Promise<T>): Promise<{ result: T; statements: string[] }> {
    log = [];
    try {
      const result = await run();
      return { result, statements: log.map(statementOf) };
    } finally {
      log = null;
    }
  }

  it("a new token's lookup names the user on both tables it reads; only an old-form token's goes by its hash alone", async () => {
    const u = await app.register();
    const fresh = await sqlOf(() => authenticate(orm.em.fork(), u.token, clock.now()));
    expect(fresh.result?.user.id).toBe(u.id);
    expect(fresh.statements).toHaveLength(1);
    expect(fresh.statements[0]).toMatch(
      /from access_tokens t join users u on u\.id = t\.user_id where t\.user_id = \? and t\.token_hash = \? and u\.id = \? and t\.expires_at > /,
    );

    const old = await oldFormToken(u.id, new Date(T0 + 86_400_000));
    const byHash = await sqlOf(() => authenticate(orm.em.fork(), old, clock.now()));
    expect(byHash.result?.user.id).toBe(u.id);
    // Its first use is noted (API-CONTRACT.md §16's lastUsedAt), by its user and hash: a write a minute at most.
    expect(byHash.statements).toHaveLength(2);
    expect(byHash.statements[0]).toMatch(/where t\.token_hash = \? and t\.expires_at > /);
    expect(byHash.statements[0]).not.toMatch(/user_id = \? and/);
    expect(byHash.statements[1]).toMatch(/^update access_tokens set last_used_at = \? where user_id = \? and token_hash = \?/);
    const again = await sqlOf(() => authenticate(orm.em.fork(), old, clock.now()));
    expect(again.statements).toHaveLength(1);
  });

  it('a token of the current form that names no user is refused without a query', async () => {
    for (const token of [secretOf(0n), secretOf(BigInt(MAX_ID) + 1n), secretOf(2n ** 63n), '_'.repeat(54), secretOf(1n).slice(0, 53) + 'B']) {
      const { result, statements } = await sqlOf(() => authenticate(orm.em.fork(), token, clock.now()));
      expect(result, token).toBeNull();
      expect(statements, token).toEqual([]);
    }
  });

  it('a login reads the directory of names by name, then the user by id', async () => {
    const u = await app.register();
    const { result, statements } = await sqlOf(() => userByName(orm.em.fork(), u.username));
    expect(result?.id).toBe(u.id);
    expect(statements).toEqual([
      expect.stringMatching(/^select user_id from usernames where username = \?$/),
      expect.stringMatching(/^select id, username, time_zone, password_hash from users where id = \?$/),
    ]);
    const none = await sqlOf(() => userByName(orm.em.fork(), 'nobody_at_all'));
    expect(none.result).toBeNull();
    expect(none.statements).toHaveLength(1);
  });

  it('revoking deletes by the user and the hash', async () => {
    const u = await app.register();
    const caller = createCaller(() => {
      const em = orm.em.fork();
      return createContextInner({
        em, clock, writes, announcer, passwordHashCost: 1024,
        authenticate: (a) => authenticate(em, a, clock.now()),
        headers: { authorization: u.token },
      });
    });
    const { statements } = await sqlOf(() => caller.users.revoke());
    // Then the revocation is announced to every instance's streams (src/users/revocation.ts).
    expect(statements.at(-2)).toMatch(/^delete from "access_tokens" where "user_id" = \? and "token_hash" = \?$/);
    expect(statements.at(-1)).toBe('select pg_notify(?, ?)');
  });

  it('redeeming a ticket names the user on each table it reads, and returns plain columns', async () => {
    const u = await app.register();
    const ticket = (await app.request('POST', `${EVENTS}/tickets`, { token: u.token })).body.data.attributes.ticket as string;
    const { result, statements } = await sqlOf(() => redeemStreamTicket(orm.em.fork(), u.id, hashTicket(ticket), clock.now()));
    expect(result).toEqual({ userId: u.id, tokenHash: hashAccessToken(u.token) });
    expect(statements).toEqual([
      expect.stringMatching(/^delete from event_stream_tickets where user_id = \? and ticket_hash = \? returning token_hash, expires_at$/),
      expect.stringMatching(/^select 1 from access_tokens where user_id = \? and token_hash = \? and expires_at > /),
    ]);
  });
});
