/**
 * Passwords and access tokens. Passwords: scrypt (memory-hard, built into Node), with the
 * parameters stored beside each hash so they can be raised later. Tokens: 32 random bytes,
 * handed out once and stored only as their SHA-256.
 */
import { createHash, randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

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

export function newAccessToken(): string {
  return randomBytes(32).toString('base64url');
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
