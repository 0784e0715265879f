/**
 * DELETE /api/users/me/authorizations/current (API-CONTRACT.md §3): the access token used for
 * the request stops working; the user's other tokens stay valid. Its open event streams end
 * now in this process, and in other processes at their next check.
 */
import type { AuthedContext } from '../core/context.js';
import { AccessToken } from './access-token.entity.js';

export async function revokeToken(ctx: AuthedContext): Promise<void> {
  // By its user and its hash: on a database split by user, one node (whatever the token's form).
  await ctx.em.nativeDelete(AccessToken, { userId: ctx.user.id, tokenHash: ctx.tokenHash });
  ctx.live?.closeToken(ctx.tokenHash);
}
