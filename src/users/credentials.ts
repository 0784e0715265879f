/**
 * Passwords and access tokens. Passwords: scrypt (memory-hard, built into Node), with the
 * parameters stored beside each hash so they can be raised later. Tokens (and event-stream
 * tickets): their user's id and 32 random bytes, handed out once and stored only as the
 * SHA-256 of the whole string.
 */
import { createHash, randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { MAX_ID } from '../core/fields.js';

const KEY_LENGTH = 32;
const BLOCK_SIZE = 8;

function derive(password: string, salt: Buffer, cost: number, blockSize: number): Promise<Buffer> {
  const options: ScryptOptions = { N: cost, r: blockSize, p: 1, maxmem: 256 * cost * blockSize };
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFC'), salt, KEY_LENGTH, options, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

export async function hashPassword(password: string, cost: number): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, cost, BLOCK_SIZE);
  return `scrypt$${cost}$${BLOCK_SIZE}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, salt, key] = stored.split('$');
  if (scheme !== 'scrypt' || !n || !r || !salt || !key) return false;
  const expected = Buffer.from(key, 'base64');
  const actual = await derive(password, Buffer.from(salt, 'base64'), Number(n), Number(r));
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** Lifetime of an access token. */
export const TOKEN_LIFETIME_SECONDS = 30 * 24 * 3600;

/**
 * A secret that names its user: 40 bytes, the user's id (8 bytes, big-endian) then 32 random
 * bytes, written as 54 characters of base64url. The id lets every lookup name the user, so a
 * database split by user asks one node for it (src/db/data-layout.ts). Changing the id does
 * not make another user's secret: what is stored is the SHA-256 of the whole string, which
 * matches no row of that user. Clients are not told the layout (API-CONTRACT.md §3: tokens are
 * opaque) and may not rely on it.
 */
const SECRET_USER_BYTES = 8;
const SECRET_RANDOM_BYTES = 32;
const USER_SECRET = /^[A-Za-z0-9_-]{54}$/;

/** A new secret of the user `userId`: an access token or an event-stream ticket. */
export function newUserSecret(userId: number): string {
  if (!Number.isSafeInteger(userId) || userId < 1 || userId > MAX_ID) throw new RangeError(`no user id: ${userId}`);
  const bytes = Buffer.alloc(SECRET_USER_BYTES + SECRET_RANDOM_BYTES);
  bytes.writeBigUInt64BE(BigInt(userId), 0);
  randomBytes(SECRET_RANDOM_BYTES).copy(bytes, SECRET_USER_BYTES);
  return bytes.toString('base64url');
}

/**
 * The user a secret of `newUserSecret`'s form names; null for any other string, and for one of
 * that form whose id is no user's id (0, or past MAX_ID, beyond the ids a JS number holds
 * exactly): such a string is refused without a query.
 */
export function userOfSecret(secret: string): number | null {
  if (!USER_SECRET.test(secret)) return null;
  const bytes = Buffer.from(secret, 'base64url');
  // One string per 40 bytes: the unused low bits of the last character must be zero.
  if (bytes.length !== SECRET_USER_BYTES + SECRET_RANDOM_BYTES || bytes.toString('base64url') !== secret) return null;
  const id = bytes.readBigUInt64BE(0);
  return id >= 1n && id <= BigInt(MAX_ID) ? Number(id) : null;
}

/** A new access token of the user `userId` (see `newUserSecret`). */
export function newAccessToken(userId: number): string {
  return newUserSecret(userId);
}

/**
 * What begins every personal access token (API-CONTRACT.md §16), so that secret scanners find a
 * leaked one; the rest is a secret of `newUserSecret`'s form.
 */
export const PERSONAL_TOKEN_PREFIX = 'plnr_';

/** A new personal access token of the user `userId`. */
export function newPersonalToken(userId: number): string {
  return PERSONAL_TOKEN_PREFIX + newUserSecret(userId);
}

/** The user an access token of either form names (see `userOfSecret`). */
export function userOfAccessToken(token: string): number | null {
  return userOfSecret(token.startsWith(PERSONAL_TOKEN_PREFIX) ? token.slice(PERSONAL_TOKEN_PREFIX.length) : token);
}

/**
 * Whether a token is of the form issued before tokens named their user: 32 random bytes as 43
 * characters of base64url. No token of the current form (54 characters) is of this one.
 */
export function isOldFormAccessToken(token: string): boolean {
  return /^[A-Za-z0-9_-]{43}$/.test(token);
}

export function hashAccessToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** `Authorization: <token>` (documented) or `Authorization: Bearer <token>`. */
export function tokenFromHeader(header: string | undefined): string | null {
  if (!header) return null;
  const value = header.trim();
  const match = /^bearer\s+(\S+)$/i.exec(value);
  const token = match ? match[1]! : value;
  return /^[A-Za-z0-9_-]{20,200}$/.test(token) ? token : null;
}
