/**
 * Nothing that walks request data recurses without a bound (issue: a UTF-16LE body hid deep
 * nesting from the doors' check and overflowed the idempotency fingerprint's stack, 500 on
 * every retry of its key). The doors refuse text nested deeper than MAX_JSON_DEPTH; what walks
 * a parsed value refuses a deeper one the same way, whatever path it came by.
 */
import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/core/errors.js';
import { MAX_JSON_DEPTH } from '../../src/core/limits.js';
import { fingerprintOf } from '../../src/writes/idempotency.js';
import { nestsDeeperThan } from '../../src/http/json-depth.js';

/** `levels` arrays inside one another, with a Map and a Set on the way (superjson gives tRPC inputs those). */
function nested(levels: number): unknown {
  let value: unknown = 'core';
  for (let i = 0; i < levels; i++) value = i % 50 === 7 ? new Set([value]) : [value];
  return value;
}

const call = (input: unknown) => ({ path: 'tasks.create', meta: undefined, rawInput: async () => input });

describe('the idempotency fingerprint', () => {
  it('refuses a value nested far beyond the limit as 400 invalid_json, not a stack overflow', async () => {
    for (const levels of [MAX_JSON_DEPTH + 1, 5_000, 100_000]) {
      const failure = await fingerprintOf(call({ task: { label: 'x', deep: nested(levels) } })).catch((e: unknown) => e);
      expect(failure, `${levels} levels`).toBeInstanceOf(DomainError);
      expect((failure as DomainError).errors[0]).toMatchObject({ status: '400', code: 'invalid_json' });
    }
  });

  it('takes a value exactly at the limit, as the doors do, and tells inputs apart', async () => {
    // The wrapper object is the first level, as `{"task":{"order":1}}` is 2 deep.
    const atLimit = { task: nested(MAX_JSON_DEPTH - 1) };
    expect(nestsDeeperThan(Buffer.from(JSON.stringify({ task: JSON.parse(JSON.stringify(nested(MAX_JSON_DEPTH - 1), (_k, v) => (v instanceof Set ? [...v] : v))) })))).toBe(false);
    const a = await fingerprintOf(call(atLimit));
    expect(a).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await fingerprintOf(call({ task: nested(MAX_JSON_DEPTH - 2) }))).not.toBe(a);
    expect(await fingerprintOf(call({ task: nested(MAX_JSON_DEPTH - 1) }))).toBe(a);
  });
});
