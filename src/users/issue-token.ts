/**
 * A new access token of a user (API-CONTRACT.md §3): shown once, in `meta.token`, and stored
 * only as its hash, valid TOKEN_LIFETIME_SECONDS. It names its user (src/users/credentials.ts),
 * which clients are not told: to them a token is opaque.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { AccessToken } from './access-token.entity.js';
import { TOKEN_LIFETIME_SECONDS, hashAccessToken, newAccessToken } from './credentials.js';
import { presentUser } from './user.schema.js';

/** A new access token of `user`, written with the next flush of `em`. */
export function issueToken(em: SqlEntityManager, now: Date, user: { id: number }): string {
  const token = newAccessToken(user.id);
  em.create(AccessToken, {
    userId: user.id,
    tokenHash: hashAccessToken(token),
    createdAt: now,
    // A session is used by the registration or login that makes it (API-CONTRACT.md §16's
    // lastUsedAt): its first requests within the minute write nothing more.
    lastUsedAt: now,
    expiresAt: new Date(now.getTime() + TOKEN_LIFETIME_SECONDS * 1000),
  });
  return token;
}

export function userWithToken(user: { id: number; username: string; timeZone: string }, token: string) {
  return { data: presentUser(user), meta: { token } };
}
