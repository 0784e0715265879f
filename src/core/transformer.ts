/**
 * The tRPC door's transformer: superjson's wire format, without superjson's walk when the
 * value is plain JSON. superjson serialises a value with no Date, Map, Set, BigInt, undefined,
 * NaN, ±Infinity, -0 or shared reference as `{ json: value }` (no `meta`), after walking it with
 * a path per member: on a page of 50 tasks that walk is most of the door's cost. `plainJson`
 * tells those values apart in one cheaper pass, and everything else still goes through
 * superjson, so clients see the same bytes (test/rules/transformer.test.ts compares them).
 * Inputs are superjson's as they were: they are small, and its copy drops `__proto__` members.
 */
import type { TRPCDataTransformer } from '@trpc/server';
import superjson, { type SuperJSONResult } from 'superjson';

/** Members superjson refuses (prototype pollution): left to superjson, which throws. */
const REFUSED_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * Whether superjson would send `value` as it is: JSON values only, each object or array met
 * once (superjson records a second meeting as a referential equality), plain objects only.
 */
export function plainJson(value: unknown, seen: Set<object> = new Set()): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(value) && !Object.is(value, -0);
    case 'object': {
      if (value === null) return true;
      if (seen.has(value)) return false;
      seen.add(value);
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          if (!(i in value) || !plainJson(value[i], seen)) return false;
        }
        return true;
      }
      const prototype = Object.getPrototypeOf(value);
      if (prototype !== Object.prototype && prototype !== null) return false;
      for (const key of Object.keys(value)) {
        if (REFUSED_KEYS.has(key) || !plainJson((value as Record<string, unknown>)[key], seen)) return false;
      }
      return true;
    }
    default:
      return false; // undefined, bigint, symbol, function
  }
}

export const transformer: TRPCDataTransformer = {
  serialize: (value: unknown): SuperJSONResult => (plainJson(value) ? { json: value as SuperJSONResult['json'] } : superjson.serialize(value)),
  deserialize: (payload: SuperJSONResult) => superjson.deserialize(payload),
};
