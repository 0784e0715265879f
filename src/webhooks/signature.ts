/**
 * Signing as the Standard Webhooks specification defines it (standardwebhooks.com): a secret
 * is `whsec_` and the base64 of its bytes; a signature is `v1,` and the base64 HMAC-SHA256,
 * keyed with those bytes, of `<webhook-id>.<webhook-timestamp>.<body>`. Several valid secrets
 * (a rotation) give several signatures, separated by spaces. The official libraries verify
 * what this writes (test/system/webhooks-delivery.test.ts and test/http/webhook-rotation.test.ts
 * check it with `standardwebhooks`).
 */
import { createHmac, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';

const PREFIX = 'whsec_';

/** A new secret: 32 random bytes. */
export function newSecret(): string {
  return PREFIX + randomBytes(32).toString('base64');
}

/** How long a secret a rotation retires keeps signing (API-CONTRACT.md §14). */
export const RETIRED_SECRET_HOURS = 24;

/** A secret a rotation retired, and when it stops signing. */
export interface RetiredSecret {
  secret: string;
  until: Date;
}

/**
 * The retired secrets that still sign at `now`: each until 24 hours after its own rotation,
 * whatever rotations followed it; at its `until` it signs no more.
 */
export function stillSigning(retired: readonly RetiredSecret[], now: Date): RetiredSecret[] {
  return retired.filter((r) => r.until.getTime() > now.getTime());
}

/** Keys of the secrets in use, decoded once each (a delivery signs with one, and one per secret still retiring). */
const keys = new Map<string, KeyObject>();
const KEYS = 1_000;

function keyOf(secret: string): KeyObject {
  let key = keys.get(secret);
  if (!key) {
    key = createSecretKey(Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64'));
    if (keys.size >= KEYS) keys.delete(keys.keys().next().value!);
    keys.set(secret, key);
  }
  return key;
}

function sign(secret: string, message: string): string {
  return `v1,${createHmac('sha256', keyOf(secret)).update(message).digest('base64')}`;
}

/** The headers of a delivery of `body` as the message `id`, signed with each of `secrets`. */
export function signedHeaders(id: string, timestamp: number, body: string, secrets: readonly string[]): Record<string, string> {
  const message = `${id}.${timestamp}.${body}`;
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets.map((s) => sign(s, message)).join(' '),
  };
}
