/** Users and access tokens (API-CONTRACT.md §3). */
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { z } from 'zod';
import { DomainError } from '../core/errors.js';
import { authedProcedure, credentialsProcedure, router, toTRPCError, type Context } from '../core/trpc.js';
import { AccessToken } from './access-token.entity.js';
import {
  TOKEN_LIFETIME_SECONDS,
  hashAccessToken,
  hashPassword,
  newAccessToken,
  verifyPassword,
} from './credentials.js';
import { User } from './user.entity.js';
import {
  AuthorizeInput,
  RegisterInput,
  UserDocument,
  UserWithTokenDocument,
  presentUser,
} from './user.schema.js';

const TAGS = ['users'];

/** Compared against when the username is unknown, so both failures take the same time. */
let decoyHash: Promise<string> | undefined;

async function issueToken(ctx: Context, user: User) {
  const token = newAccessToken();
  const now = ctx.clock.now();
  ctx.em.create(AccessToken, {
    userId: user.id,
    tokenHash: hashAccessToken(token),
    createdAt: now,
    expiresAt: new Date(now.getTime() + TOKEN_LIFETIME_SECONDS * 1000),
  });
  await ctx.em.flush();
  return { data: presentUser(user), meta: { token } };
}

function taken(): DomainError {
  return DomainError.validation('taken', '/user/username', 'This username is already taken.');
}

export const usersRouter = router({
  register: credentialsProcedure
    .meta({
      openapi: {
        method: 'POST', path: '/api/users', tags: TAGS, protect: false,
        summary: 'Register a user',
        description: 'Creates a user and returns a first access token in `meta.token`. Username: 1 to 50 characters of a-z, 0-9, `_`, `-`, unique. Password: 8 to 200 characters.',
      },
      successStatus: 201,
      errorCodes: ['parameter_missing', 'invalid', 'too_long', 'too_short', 'taken'],
    })
    .input(RegisterInput)
    .output(UserWithTokenDocument)
    .mutation(async ({ ctx, input }) => {
      const { username, password } = input.user;
      if (await ctx.em.count(User, { username })) throw taken();
      const user = ctx.em.create(User, {
        username,
        passwordHash: await hashPassword(password, ctx.passwordHashCost),
        createdAt: ctx.clock.now(),
      });
      try {
        await ctx.em.flush();
      } catch (error) {
        if (error instanceof UniqueConstraintViolationException) throw taken();
        throw error;
      }
      return issueToken(ctx, user);
    }),

  authorize: credentialsProcedure
    .meta({
      openapi: {
        method: 'POST', path: '/api/users/authorizations', tags: TAGS, protect: false,
        summary: 'Log in',
        description: 'Exchanges a username and password for a new access token (valid 30 days). Wrong credentials are 401 `login_failed`.',
      },
      successStatus: 201,
      errorCodes: ['parameter_missing', 'invalid', 'login_failed'],
    })
    .input(AuthorizeInput)
    .output(UserWithTokenDocument)
    .mutation(async ({ ctx, input }) => {
      const user = await ctx.em.findOne(User, { username: input.username });
      decoyHash ??= hashPassword('decoy password', ctx.passwordHashCost);
      const valid = await verifyPassword(input.password, user?.passwordHash ?? (await decoyHash));
      if (!user || !valid) {
        throw toTRPCError(DomainError.of(401, 'login_failed', 'The username or the password is wrong.'));
      }
      return issueToken(ctx, user);
    }),

  me: authedProcedure
    .meta({ openapi: { method: 'GET', path: '/api/users/me', tags: TAGS, summary: 'The current user' } })
    .input(z.void())
    .output(UserDocument)
    .query(({ ctx }) => ({ data: presentUser(ctx.user) })),

  revoke: authedProcedure
    .meta({
      openapi: {
        method: 'DELETE', path: '/api/users/me/authorizations/current', tags: TAGS,
        summary: 'Log out',
        description: 'Revokes the access token used for this request. Other tokens of the user stay valid.',
      },
      successStatus: 204,
    })
    .input(z.void())
    .output(z.void())
    .mutation(async ({ ctx }) => {
      await ctx.em.nativeDelete(AccessToken, { tokenHash: ctx.tokenHash });
    }),
});
