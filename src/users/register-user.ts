/**
 * POST /api/users (API-CONTRACT.md §3): a user, its name in the directory of names, and its
 * first access token, in one transaction (never a user without its name or its token). A
 * username already taken is `taken`, also when two registrations race (the directory's
 * primary key decides).
 */
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { z } from 'zod';
import type { Context } from '../core/context.js';
import { DomainError, type ApiError } from '../core/errors.js';
import { DEFAULT_TIME_ZONE } from '../core/user-day.js';
import { hashPassword } from './credentials.js';
import { issueToken, userWithToken } from './issue-token.js';
import { usernameField, type RegisterInput } from './user.schema.js';
import { insertUser, isUsernameTaken } from './user.store.js';

function taken(): DomainError {
  return DomainError.validation('taken', '/user/username', 'This username is already taken.');
}

/**
 * `taken` for an input the schema refused (API-CONTRACT.md §2: every validation error of a
 * request is reported): a username that is someone's regardless of case (§3), also one the
 * schema refused only for its capitals (`Alice` beside `alice`: `invalid` and `taken`).
 */
export async function registerInputRules(ctx: Context, rawInput: unknown): Promise<ApiError[]> {
  const raw = (rawInput as { user?: { username?: unknown } } | null | undefined)?.user?.username;
  const username = usernameField.safeParse(typeof raw === 'string' ? raw.toLowerCase() : raw);
  return username.success && (await isUsernameTaken(ctx.em, username.data)) ? taken().errors : [];
}

export async function registerUser(ctx: Context, input: z.infer<typeof RegisterInput>) {
  const { username, password, time_zone: timeZone = DEFAULT_TIME_ZONE } = input.user;
  if (await isUsernameTaken(ctx.em, username)) throw taken();
  const passwordHash = await hashPassword(password, ctx.passwordHashCost);
  try {
    return await ctx.em.fork().transactional(async (em) => {
      const user = await insertUser(em, { username, passwordHash, timeZone, createdAt: ctx.clock.now() });
      const token = issueToken(em, ctx.clock.now(), user);
      await em.flush();
      return userWithToken(user, token);
    });
  } catch (error) {
    if (error instanceof UniqueConstraintViolationException) throw taken();
    throw error;
  }
}
