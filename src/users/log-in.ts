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
  const token = issueToken(ctx.em, ctx.clock.now(), user);
  try {
    await ctx.em.flush();
  } catch (error) {
    // The user was deleted (API-CONTRACT.md §16) while the password was checked.
    if (error instanceof ForeignKeyConstraintViolationException) throw toTRPCError(DomainError.of('login_failed'));
    throw error;
  }
  return userWithToken(user, token);
}
