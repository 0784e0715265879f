/**
 * Who an Authorization header names (API-CONTRACT.md §3): the user of a known, unexpired
 * access token. A token names its user (src/users/credentials.ts), so the lookup names the
 * user on every table it reads and a database split by user answers it from one node; the
 * token's hash, stored for the whole string, is what proves it. The tRPC context is handed
 * this function, so the core never reads the users' tables itself.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { Authentication } from '../core/context.js';
import { isDatabaseUnavailable } from '../core/failures.js';
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
  /** Whether `last_used_at` is unset or a minute old: this use is written. */
  stale: boolean;
}

/** `lastUsedAt` moves at most once a minute per token: a write a minute, not one per request (API-CONTRACT.md §16). */
export const LAST_USED_STEP_SECONDS = 60;

const COLUMNS = `u.id, u.username, u.time_zone, u.last_event_seq::text as seq, t.id as token_id, t.kind, t.scopes,
  (t.last_used_at is null or t.last_used_at <= ?::timestamptz - interval '${LAST_USED_STEP_SECONDS} seconds') as stale`;

export async function authenticate(em: SqlEntityManager, authorization: string | undefined, now: Date): Promise<Authentication | null> {
  const token = tokenFromHeader(authorization);
  if (!token) return null;
  const tokenHash = hashAccessToken(token);
  let user: TokenUserRow | undefined;
  if (isOldFormAccessToken(token)) {
    // A token issued before tokens named their user, found by its hash alone: on a database
    // split by user this asks every node. It can go (with isOldFormAccessToken) once the
    // longest token lifetime (TOKEN_LIFETIME_SECONDS) has passed since tokens named their user.
    [user] = await execute<TokenUserRow>(
      em,
      `select ${COLUMNS} from access_tokens t join users u on u.id = t.user_id
        where t.token_hash = ? and t.expires_at > ?`,
      [now, tokenHash, now],
    );
  } else {
    const userId = userOfAccessToken(token);
    if (userId === null) return null;
    [user] = await execute<TokenUserRow>(
      em,
      `select ${COLUMNS} from access_tokens t join users u on u.id = t.user_id
        where t.user_id = ? and t.token_hash = ? and u.id = ? and t.expires_at > ?`,
      [now, userId, tokenHash, userId, now],
    );
  }
  if (!user) return null;
  if (user.stale) await noteUse(em, user.id, tokenHash, now);
  return {
    user: { id: user.id, username: user.username, timeZone: user.time_zone },
    tokenHash,
    token: { id: Number(user.token_id), kind: user.kind, scopes: user.scopes },
    lastEventSeq: user.seq,
  };
}

/**
 * Writes that the token was used now, unless another request wrote it within the minute since
 * it was read (two requests of one token at once write it once). A statement of its own, sent
 * at most once a minute per token, so that the lookup stays a read: a request is served by a
 * database that takes no writes (a standby, during a failover: API-CONTRACT.md §17), and then
 * the use is not noted, which is no reason to refuse it.
 */
async function noteUse(em: SqlEntityManager, userId: number, tokenHash: string, now: Date): Promise<void> {
  try {
    await execute(
      em,
      `update access_tokens set last_used_at = ? where user_id = ? and token_hash = ?
        and (last_used_at is null or last_used_at <= ?::timestamptz - interval '${LAST_USED_STEP_SECONDS} seconds')`,
      [now, userId, tokenHash, now],
    );
  } catch (error) {
    if (!isDatabaseUnavailable(error)) throw error;
  }
}

/**
 * Whether the access token of `userId` with this hash is still known and unexpired (open
 * streams re-check it, and a stream ticket's token is checked with it when it is redeemed).
 */
/** When the token expires; undefined when it is gone already. */
export async function tokenExpiry(em: SqlEntityManager, userId: number, tokenHash: string): Promise<Date | undefined> {
  const [row] = await em.execute<Array<{ expires_at: Date }>>('select expires_at from access_tokens where user_id = ? and token_hash = ?', [userId, tokenHash]);
  return row && new Date(row.expires_at);
}

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
