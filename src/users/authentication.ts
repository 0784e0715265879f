/**
 * Who an Authorization header names (API-CONTRACT.md §3): the user of a known, unexpired
 * access token. A token names its user (src/users/credentials.ts), so the lookup names the
 * user on every table it reads and a database split by user answers it from one node; the
 * token's hash, stored for the whole string, is what proves it. The tRPC context is handed
 * this function, so the core never reads the users' tables itself.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { Authentication } from '../core/context.js';
import { execute } from '../db/prepared.js';
import { hashAccessToken, isOldFormAccessToken, tokenFromHeader, userOfAccessToken } from './credentials.js';

interface TokenUserRow {
  id: number;
  username: string;
  time_zone: string;
  seq: string;
  token_id: number;
  kind: 'session' | 'personal';
  scopes: string[] | null;
}

/** `lastUsedAt` moves at most once a minute per token: a write a minute, not one per request (API-CONTRACT.md §16). */
export const LAST_USED_STEP_SECONDS = 60;

/**
 * The lookup of a token, as one statement that also notes its use: the CTE writes
 * `last_used_at` only when it is unset or older than LAST_USED_STEP_SECONDS (so a token's row is
 * written at most once a minute, and two requests at once write it once), and the SELECT reads
 * the user and the token as they were. `where` finds the token, aliased `a` in the CTE and `t`
 * in the SELECT, with `?` for its values.
 */
function lookup(where: (alias: string) => string): string {
  return `with used as (
      update access_tokens a set last_used_at = ?
       where ${where('a')} and a.expires_at > ?
         and (a.last_used_at is null or a.last_used_at <= ?::timestamptz - interval '${LAST_USED_STEP_SECONDS} seconds')
      returning a.id)
    select u.id, u.username, u.time_zone, u.last_event_seq::text as seq, t.id as token_id, t.kind, t.scopes
      from access_tokens t join users u on u.id = t.user_id
     where ${where('t')} and t.expires_at > ?`;
}

export async function authenticate(em: SqlEntityManager, authorization: string | undefined, now: Date): Promise<Authentication | null> {
  const token = tokenFromHeader(authorization);
  if (!token) return null;
  const tokenHash = hashAccessToken(token);
  let user: TokenUserRow | undefined;
  if (isOldFormAccessToken(token)) {
    // A token issued before tokens named their user, found by its hash alone: on a database
    // split by user this asks every node. It can go (with isOldFormAccessToken) once the
    // longest token lifetime (TOKEN_LIFETIME_SECONDS) has passed since tokens named their user.
    [user] = await execute<TokenUserRow>(em, lookup((t) => `${t}.token_hash = ?`), [now, tokenHash, now, now, tokenHash, now]);
  } else {
    const userId = userOfAccessToken(token);
    if (userId === null) return null;
    [user] = await execute<TokenUserRow>(
      em,
      lookup((t) => `${t}.user_id = ? and ${t}.token_hash = ?${t === 't' ? ' and u.id = ?' : ''}`),
      [now, userId, tokenHash, now, now, userId, tokenHash, userId, now],
    );
  }
  if (!user) return null;
  return {
    user: { id: user.id, username: user.username, timeZone: user.time_zone },
    tokenHash,
    token: { id: Number(user.token_id), kind: user.kind, scopes: user.scopes },
    lastEventSeq: user.seq,
  };
}

/**
 * Whether the access token of `userId` with this hash is still known and unexpired (open
 * streams re-check it, and a stream ticket's token is checked with it when it is redeemed).
 */
export async function isTokenValid(em: SqlEntityManager, userId: number, tokenHash: string, now: Date): Promise<boolean> {
  const rows = await em.execute('select 1 from access_tokens where user_id = ? and token_hash = ? and expires_at > ?', [userId, tokenHash, now]);
  return rows.length > 0;
}

/**
 * Deletes access tokens past their expiry (a row per login would otherwise stay forever):
 * housekeeping over every user's tokens, so on a database split by user it asks every node.
 */
export async function pruneExpiredTokens(em: SqlEntityManager, now: Date): Promise<number> {
  const result = await em.execute<{ affectedRows: number }>('delete from access_tokens where expires_at < ?', [now], 'run');
  return result.affectedRows;
}
