/**
 * Who an Authorization header names (API-CONTRACT.md §3): the user of a known, unexpired
 * access token, found by the token's hash (tokens are opaque: the hash is all a request
 * gives; the key of `access_tokens`, (token_hash, user_id), leads with it). The tRPC context
 * is handed this function, so the core never reads the users' tables itself.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { Authentication } from '../core/context.js';
import { execute } from '../db/prepared.js';
import { hashAccessToken, tokenFromHeader } from './credentials.js';

export async function authenticate(em: SqlEntityManager, authorization: string | undefined, now: Date): Promise<Authentication | null> {
  const token = tokenFromHeader(authorization);
  if (!token) return null;
  const tokenHash = hashAccessToken(token);
  const [user] = await execute<{ id: number; username: string; time_zone: string; seq: string }>(
    em,
    `select u.id, u.username, u.time_zone, u.last_event_seq::text as seq from access_tokens t join users u on u.id = t.user_id
      where t.token_hash = ? and t.expires_at > ?`,
    [tokenHash, now],
  );
  return user ? { user: { id: user.id, username: user.username, timeZone: user.time_zone }, tokenHash, lastEventSeq: user.seq } : null;
}

/** Whether an access token, by its hash, is still known and unexpired (open streams re-check it). */
export async function isTokenValid(em: SqlEntityManager, tokenHash: string, now: Date): Promise<boolean> {
  const rows = await em.execute('select 1 from access_tokens where token_hash = ? and expires_at > ?', [tokenHash, now]);
  return rows.length > 0;
}

/** Deletes access tokens past their expiry (a row per login would otherwise stay forever). */
export async function pruneExpiredTokens(em: SqlEntityManager, now: Date): Promise<number> {
  const result = await em.execute<{ affectedRows: number }>('delete from access_tokens where expires_at < ?', [now], 'run');
  return result.affectedRows;
}
