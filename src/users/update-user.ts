/**
 * PATCH /api/users/me (API-CONTRACT.md §3, §13): the user's time zone. The next request of
 * the user reads it with its token, so every "today" rule uses the new zone at once.
 */
import type { z } from 'zod';
import type { AuthedContext } from '../core/context.js';
import { presentUser, type UpdateUserInput } from './user.schema.js';
import { updateTimeZone } from './user.store.js';
import { plainWrite } from '../writes/user-write.js';

export async function updateUser(ctx: AuthedContext, input: z.infer<typeof UpdateUserInput>) {
  const { time_zone: timeZone } = input.user;
  // A write of the user (src/writes/user-write.ts): under its lock, with its Idempotency-Key.
  return plainWrite(ctx, async (em) => {
    const user = timeZone === undefined || timeZone === ctx.user.timeZone ? ctx.user : await updateTimeZone(em, ctx.user.id, timeZone);
    return { data: presentUser(user) };
  });
}
