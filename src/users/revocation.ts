/**
 * Revoked tokens stop everywhere at once (API-CONTRACT.md §16): a request reads its token from
 * the database, so it is refused on every instance from the commit on; an open event stream
 * holds its token, so the revocation is also announced on a channel every instance listens to
 * (src/changes/event-hub.ts), which ends that token's streams there within moments, not at the
 * stream's next check.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { LiveEvents } from '../core/context.js';

export const TOKEN_REVOCATIONS_CHANNEL = 'token_revocations';

/** Hashes per notification: 64 characters each, within PostgreSQL's 8,000-byte payload. */
const HASHES_PER_NOTIFICATION = 100;

/**
 * Ends the streams of these tokens of `userId`, once their rows are deleted and committed:
 * here at once, and in every process through the channel. A failed announcement is not the
 * revocation's (it committed): the streams then end at their next check of the token.
 */
export async function announceRevoked(em: SqlEntityManager, live: LiveEvents | undefined, userId: number, tokenHashes: readonly string[]): Promise<void> {
  for (const hash of tokenHashes) live?.closeToken(hash);
  for (let at = 0; at < tokenHashes.length; at += HASHES_PER_NOTIFICATION) {
    const payload = `${userId}:${tokenHashes.slice(at, at + HASHES_PER_NOTIFICATION).join(',')}`;
    await em.execute('select pg_notify(?, ?)', [TOKEN_REVOCATIONS_CHANNEL, payload]).catch(() => undefined);
  }
}

/** The token hashes of a notification of the channel; none for a payload not of its form. */
export function revokedHashes(payload: string | undefined): string[] {
  const match = /^\d+:([0-9a-f]{64}(?:,[0-9a-f]{64})*)$/.exec(payload ?? '');
  return match ? match[1]!.split(',') : [];
}
