/** Users and access tokens (API-CONTRACT.md §3). */
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { z } from 'zod';
import { DomainError } from '../core/errors.js';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { Clock } from '../core/clock.js';
import { authedProcedure } from '../core/procedures.js';
import { router, toTRPCError } from '../core/trpc.js';
import { credentialsProcedure } from './credentials-procedure.js';
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

/** A new access token of `user`, written with the next flush of `em`. */
function addToken(em: SqlEntityManager, clock: Clock, user: User): string {
  const token = newAccessToken();
  const now = clock.now();
  em.create(AccessToken, {
    userId: user.id,
    tokenHash: hashAccessToken(token),
    createdAt: now,
    expiresAt: new Date(now.getTime() + TOKEN_LIFETIME_SECONDS * 1000),
  });
  return token;
}

function userWithToken(user: User, token: string) {
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
      const passwordHash = await hashPassword(password, ctx.passwordHashCost);
      try {
        // The user and its first token in one transaction: never a user without its token.
        return await ctx.em.transactional(async (em) => {
          const user = em.create(User, { username, passwordHash, createdAt: ctx.clock.now() });
          await em.flush();
          const token = addToken(em, ctx.clock, user);
          await em.flush();
          return userWithToken(user, token);
        });
      } catch (error) {
        if (error instanceof UniqueConstraintViolationException) throw taken();
        throw error;
      }
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
        throw toTRPCError(DomainError.of('login_failed'));
      }
      const token = addToken(ctx.em, ctx.clock, user);
      await ctx.em.flush();
      return userWithToken(user, token);
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
      // Its open event streams end now in this process; other processes at their next check.
      ctx.live?.closeToken(ctx.tokenHash);
    }),
});
