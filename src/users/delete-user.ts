/**
 * POST /api/users/me/deletion (API-CONTRACT.md §16): the password again (counted as a login
 * is: src/users/password-check.ts), then the user and everything theirs go in one
 * transaction, and the name is free again at its commit.
 *
 * - The user's row is locked first (`for update`), the lock every write of the user takes
 *   first (`for no key update`, src/writes/owner-lock.ts) and that excludes it: a write that
 *   holds it finishes (and is answered) before the deletion goes on; a write that waits for it
 *   finds no user once the deletion commits, and is refused as unauthorized (the write
 *   function `apply`; src/core/procedures.ts for the writes made of steps). `for update`, not
 *   `for no key update`, because the row's key goes: it also waits for the key-share locks of
 *   inserts that refer to the user (a login's token, a stream's ticket) and keeps new ones out.
 * - No webhook request of the user is sent after the answer: the deliverer marks a webhook
 *   `sending_until` just before each request, in a statement that also takes a key-share lock
 *   on the user's row and needs the webhook to be still there (src/webhooks/delivery.store.ts
 *   `markSending`). Once the deletion holds the user's lock no new mark can be made (the mark
 *   waits for the deletion, then finds nothing); so it waits, under the lock, until the marks
 *   made before are cleared (the attempt recorded) or past (the request's time limit is
 *   over), and only then deletes. The choice over re-checking before sending: a check cannot
 *   stop a request that follows it by a moment, and holding a row lock through each request
 *   would hold a pooled connection through it. A deletion thus waits at most one request's
 *   time limit, and only when one of the user's webhooks is being sent to.
 * - Every statement names the user (`user_id = ?`, `id = ?` on `users`, the username's key on
 *   `usernames`). On Citus every table but `usernames` is distributed by the user and
 *   co-located with `users`, so each of those statements goes to the user's one node, in one
 *   transaction there; `usernames` is a reference table, and a transaction that modifies one
 *   commits on every node with two-phase commit (Citus does this itself for reference tables),
 *   so the transaction is still all or nothing, and the name is free on every node at its
 *   commit.
 * - Children before parents, though the foreign keys to `users` cascade: each table is named
 *   here, so one without such a key (`event_stream_leases`) is not forgotten, and the
 *   catalogue test of test/http/account.test.ts finds any table a future change adds.
 * - The user's tokens are deleted reading their hashes, so that the open event streams of each
 *   end now in this process (and in the others at their next check of the token).
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { z } from 'zod';
import type { AuthedContext } from '../core/context.js';
import { DomainError } from '../core/errors.js';
import { checkPassword } from './password-check.js';
import type { DeleteUserInput } from './user.schema.js';
import { announceRevoked } from './revocation.js';
import { IdempotencyKey } from '../writes/idempotency.js';

/** The user's rows, children before parents; every table with a `user_id` but `usernames`. */
const USER_TABLES = [
  'webhook_deliveries',
  'webhooks',
  'tasks',
  'projects',
  'events',
  'event_stream_tickets',
  'event_stream_leases',
  'idempotency_keys',
] as const;

/** How often a deletion looks again for a webhook request under way. */
const SENDING_POLL_MS = 25;
/** Past this a deletion stops waiting for webhook requests and is refused (503): above the longest request time limit (WEBHOOK_TIMEOUT_MS, 10 minutes) and its margin. */
const SENDING_WAIT_LIMIT_MS = 11 * 60_000;

export async function deleteUser(ctx: AuthedContext, input: z.infer<typeof DeleteUserInput>): Promise<void> {
  // An Idempotency-Key is held to its form (API-CONTRACT.md §11), but nothing is kept under it:
  // the key's records go with the user, and a retry is 401, its token gone.
  await IdempotencyKey.of(ctx);
  await checkPassword(ctx, input.user.password, '/user/password');
  const userId = ctx.user.id;
  const tokenHashes = await ctx.em.fork().transactional(async (em) => {
    const [user] = await em.execute<Array<{ username: string }>>('select username from users where id = ? for update', [userId]);
    // Deleted meanwhile by another request of the user.
    if (!user) throw DomainError.unauthorized('The access token is unknown, revoked or expired.');
    await untilNoWebhookSending(ctx, em, userId);
    const tokens = await em.execute<Array<{ token_hash: string }>>('delete from access_tokens where user_id = ? returning token_hash', [userId]);
    for (const table of USER_TABLES) await em.execute(`delete from ${table} where user_id = ?`, [userId], 'run');
    await em.execute('delete from usernames where username = ? and user_id = ?', [user.username, userId], 'run');
    await em.execute('delete from users where id = ?', [userId], 'run');
    return tokens.map((t) => t.token_hash);
  });
  // Their streams end here and on every other instance (src/users/revocation.ts).
  await announceRevoked(ctx.em, ctx.live, ctx.user.id, tokenHashes);
}

/**
 * Waits, holding the user's lock, until no webhook of the user is marked as sending a request
 * now (the deliverer's clock wrote the mark, this process's clock reads it: the processes'
 * clocks are taken to agree, as the webhooks' leases take them).
 */
async function untilNoWebhookSending(ctx: AuthedContext, em: SqlEntityManager, userId: number): Promise<void> {
  const started = performance.now();
  for (;;) {
    const sending = await em.execute<Array<{ id: number }>>('select id from webhooks where user_id = ? and sending_until > ? limit 1', [userId, ctx.clock.now()]);
    if (sending.length === 0) return;
    if (performance.now() - started > SENDING_WAIT_LIMIT_MS) {
      throw DomainError.of('unavailable', { detail: 'A webhook request of this user is still under way; retry shortly.' }).withRetryAfter(5);
    }
    await new Promise((resolve) => setTimeout(resolve, SENDING_POLL_MS));
  }
}
