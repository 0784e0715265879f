/**
 * PUT /api/users/me/password (API-CONTRACT.md §16): the current password again (each attempt
 * counted as a login is: src/users/password-check.ts), then the new one, hashed as at
 * registration; a write of the user, with its Idempotency-Key (API-CONTRACT.md §11). In the
 * same transaction every other session token of the user is revoked;
 * the token of this request and the personal tokens stay. The revoked tokens' open event
 * streams end now in this process, and in the others at their next check of the token.
 */
import type { z } from 'zod';
import type { AuthedContext } from '../core/context.js';
import { DomainError, type ApiError } from '../core/errors.js';
import { hashPassword } from './credentials.js';
import { checkPassword } from './password-check.js';
import type { ChangePasswordInput } from './user.schema.js';
import { announceRevoked } from './revocation.js';
import { plainWrite } from '../writes/user-write.js';

/**
 * For an input whose new password (or another member) the schema refused: the current
 * password is checked too (and counted, as every attempt is), so that a wrong one is reported
 * beside the other faults (API-CONTRACT.md §2).
 */
export async function changePasswordInputRules(ctx: AuthedContext, rawInput: unknown): Promise<ApiError[]> {
  const current = (rawInput as { user?: { current_password?: unknown } } | undefined)?.user?.current_password;
  if (typeof current !== 'string') return [];
  try {
    await checkPassword(ctx, current, '/user/current_password');
    return [];
  } catch (error) {
    if (error instanceof DomainError && error.status === 422) return error.errors;
    throw error;
  }
}

export async function changePassword(ctx: AuthedContext, input: z.infer<typeof ChangePasswordInput>): Promise<void> {
  // Both hashes are worked out before the write, so the user's lock is not held through them;
  // a wrong current password is refused inside it, after a replay of the key is looked for.
  const passwordHash = await hashPassword(input.user.password, ctx.passwordHashCost);
  const checked = await checkPassword(ctx, input.user.current_password, '/user/current_password').then(
    (hash) => ({ hash }),
    (error: unknown) => {
      if (error instanceof DomainError && error.status === 422) return { refusal: error };
      throw error;
    },
  );
  let revoked: string[] = [];
  // A write of the user (src/writes/user-write.ts): under its lock, with its Idempotency-Key,
  // so a retry of a change that was made replays its 204 instead of finding the password changed.
  await plainWrite(ctx, async (em) => {
    // A wrong password is a refusal of the input, as the deletion's: nothing is kept under the key (§11).
    if ('refusal' in checked) throw checked.refusal.refusedBeforeRun();
    // Only over the hash that was checked: changed since, the current password given is no longer it.
    const changed = await em.execute<Array<{ id: number }>>('update users set password_hash = ? where id = ? and password_hash = ? returning id', [
      passwordHash, ctx.user.id, checked.hash,
    ]);
    if (changed.length === 0) throw DomainError.validation('invalid', '/user/current_password', 'The password is wrong.').refusedBeforeRun();
    // By the user: on a database split by user, one node.
    const rows = await em.execute<Array<{ token_hash: string }>>(
      `delete from access_tokens where user_id = ? and kind = 'session' and token_hash <> ? returning token_hash`,
      [ctx.user.id, ctx.tokenHash],
    );
    revoked = rows.map((r) => r.token_hash);
  });
  // Their streams end here and on every other instance (src/users/revocation.ts).
  await announceRevoked(ctx.em, ctx.live, ctx.user.id, revoked);
}
