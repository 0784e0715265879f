/**
 * POST /api/users/authorizations (API-CONTRACT.md §3): a username and password for a new
 * access token. An unknown username and a wrong password are the same `login_failed`, and
 * take the same time (a decoy hash is checked when there is no user).
 */
import { ForeignKeyConstraintViolationException } from '@mikro-orm/core';
import type { z } from 'zod';
import type { Context } from '../core/context.js';
import { DomainError } from '../core/errors.js';
import { toTRPCError } from '../core/trpc.js';
import { hashPassword, verifyPassword } from './credentials.js';
import { issueToken, userWithToken } from './issue-token.js';
import type { AuthorizeInput } from './user.schema.js';
import { userByName } from './user.store.js';

/** Compared against when the username is unknown, so both failures take the same time. */
let decoyHash: Promise<string> | undefined;

export async function logIn(ctx: Context, input: z.infer<typeof AuthorizeInput>) {
  const user = await userByName(ctx.em, input.username);
  decoyHash ??= hashPassword('decoy password', ctx.passwordHashCost);
  const valid = await verifyPassword(input.password, user?.passwordHash ?? (await decoyHash));
  if (!user || !valid) throw toTRPCError(DomainError.of('login_failed'));
  const passwordHash = user.passwordHash;
  let token: string;
  try {
    token = await ctx.em.fork().transactional(async (em) => {
      // The password checked must still be the user's when the session is made (API-CONTRACT.md
      // §16: a change of password ends every other session). A change that committed while it
      // was checked leaves no row here; one under way holds the row, and this waits for it
      // and then finds none. One that comes after waits for this share lock, then revokes the
      // session made here with the others.
      const [held] = await em.execute('select 1 as held from users where id = ? and password_hash = ? for share', [user.id, passwordHash]);
      if (!held) throw toTRPCError(DomainError.of('login_failed'));
      return issueToken(em, ctx.clock.now(), user);
    });
  } catch (error) {
    // The user was deleted (API-CONTRACT.md §16) while the password was checked.
    if (error instanceof ForeignKeyConstraintViolationException) throw toTRPCError(DomainError.of('login_failed'));
    throw error;
  }
  return userWithToken(user, token);
}
