/**
 * The password an account operation asks for again (API-CONTRACT.md §16: changing the
 * password, deleting the account). Each attempt counts against the login's rate limit, under
 * the keys a login of this user from this address counts (src/users/credentials-procedure.ts):
 * a stolen token cannot be used to guess the password faster than a login could. Counted
 * before the password is checked, as a login is, so attempts sent at once cannot pass the
 * limit between them; a right password counts too, as a login's does.
 */
import type { AuthedContext } from '../core/context.js';
import { DomainError } from '../core/errors.js';
import { enforceRateLimit } from '../core/rate-limit.js';
import { execute } from '../db/prepared.js';
import { verifyPassword } from './credentials.js';

/** Checks the password against the user's; returns the hash it was checked against. */
export async function checkPassword(ctx: AuthedContext, password: string, pointer: string): Promise<string> {
  const limit = ctx.rateLimits.authPerMinute;
  if (limit > 0) {
    const keys = [`ip:${ctx.clientIp}`, `login:${ctx.user.username.toLowerCase()}`];
    await enforceRateLimit(ctx.em, keys, limit, ctx.clock.now(), 'auth', ctx.setHeader);
  }
  const [row] = await execute<{ password_hash: string }>(ctx.em, 'select password_hash from users where id = ?', [ctx.user.id]);
  // Deleted since its token was read: as if the token were unknown.
  if (!row) throw DomainError.unauthorized('The access token is unknown, revoked or expired.');
  if (!(await verifyPassword(password, row.password_hash))) throw DomainError.validation('invalid', pointer, 'The password is wrong.');
  return row.password_hash;
}
