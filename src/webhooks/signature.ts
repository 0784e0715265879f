/**
 * Signing as the Standard Webhooks specification defines it (standardwebhooks.com): a secret
 * is `whsec_` and the base64 of its bytes; a signature is `v1,` and the base64 HMAC-SHA256,
 * keyed with those bytes, of `<webhook-id>.<webhook-timestamp>.<body>`. Several valid secrets
 * (a rotation) give several signatures, separated by spaces. The official libraries verify
 * what this writes (test/http/webhooks-delivery.test.ts checks it with `standardwebhooks`).
 */
import { createHmac, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';

const PREFIX = 'whsec_';

/** A new secret: 32 random bytes. */
export function newSecret(): string {
  return PREFIX + randomBytes(32).toString('base64');
}

/** Keys of the secrets in use, decoded once each (a delivery signs with one or two). */
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
