/**
 * DELETE /api/users/me/authorizations/current (API-CONTRACT.md §3): the access token used for
 * the request stops working; the user's other tokens stay valid. Its open event streams end,
 * in every process (src/users/revocation.ts).
 */
import type { AuthedContext } from '../core/context.js';
import { AccessToken } from './access-token.entity.js';
import { announceRevoked } from './revocation.js';
import { IdempotencyKey } from '../writes/idempotency.js';

export async function revokeToken(ctx: AuthedContext): Promise<void> {
  // An Idempotency-Key is held to its form (API-CONTRACT.md §11); a retry is 401, the token gone.
  await IdempotencyKey.of(ctx);
  // By its user and its hash: on a database split by user, one node (whatever the token's form).
  await ctx.em.nativeDelete(AccessToken, { userId: ctx.user.id, tokenHash: ctx.tokenHash });
  await announceRevoked(ctx.em, ctx.live, ctx.user.id, [ctx.tokenHash]);
}
