/**
 * The tRPC door's transformer: superjson's wire format, without superjson's walk when the
 * value is plain JSON. superjson serialises a value with no Date, Map, Set, BigInt, undefined,
 * NaN, ±Infinity, -0 or shared reference as `{ json: value }` (no `meta`), after walking it with
 * a path per member: on a page of 50 tasks that walk is most of the door's cost. `plainJson`
 * tells those values apart in one cheaper pass, and everything else still goes through
 * superjson, so clients see the same bytes (test/rules/transformer.test.ts compares them).
 * Inputs: a plain JSON input (no `meta`) is the value as JSON.parse made it; one with `meta`
 * goes through superjson, whose copy turns an own `__proto__` member into the copy's
 * prototype: such members are put back as own members. Either way an input holds every member
 * it was sent with, as on REST (the state endpoints refuse `__proto__` as `cannot_be_set`).
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

/** Puts back, in `copy`, the own `__proto__` members of `sent` that superjson's copy dropped (along the same paths). */
function keepProtoMembers(sent: unknown, copy: unknown): void {
  if (typeof sent !== 'object' || sent === null || typeof copy !== 'object' || copy === null) return;
  for (const key of Object.keys(sent)) {
    const value = (sent as Record<string, unknown>)[key];
    if (key === '__proto__' && !Object.hasOwn(copy, key)) {
      Object.defineProperty(copy, key, { value, enumerable: true, writable: true, configurable: true });
    } else {
      keepProtoMembers(value, (copy as Record<string, unknown>)[key]);
    }
  }
}

export const transformer: TRPCDataTransformer = {
  serialize: (value: unknown): SuperJSONResult => (plainJson(value) ? { json: value as SuperJSONResult['json'] } : superjson.serialize(value)),
  deserialize: (payload: SuperJSONResult) => {
    if (typeof payload === 'object' && payload !== null && payload.meta === undefined) return payload.json;
    const value = superjson.deserialize(payload);
    keepProtoMembers((payload as Partial<SuperJSONResult> | null)?.json, value);
    return value;
  },
};
