/**
 * The tRPC door's transformer (src/core/transformer.ts) sends what superjson sends, byte for
 * byte, for any value: plain JSON without superjson's walk, anything else (Date, Map, Set,
 * BigInt, undefined, NaN, -0, shared references, class instances, refused keys) through it.
 */
import fc from 'fast-check';
import superjson from 'superjson';
import { describe, expect, it } from 'vitest';
import { plainJson, transformer } from '../../src/core/transformer.js';

/** What goes on the wire: the serialised JSON text, or the error superjson throws. */
function wire(serialize: (value: unknown) => unknown, value: unknown): string {
  try {
    return JSON.stringify(serialize(value));
  } catch (error) {
    return `throws ${(error as Error).message}`;
  }
}

function sameAsSuperjson(value: unknown): void {
  expect(wire(transformer.serialize, value)).toBe(wire(superjson.serialize, value));
}

describe('the transformer sends what superjson sends', () => {
  it('for any JSON value', () => {
    fc.assert(fc.property(fc.jsonValue(), (value) => {
      sameAsSuperjson(value);
    }));
  });

  it('for any value at all, nested (dates, maps, sets, bigints, undefined, NaN, -0, null prototypes, sparse arrays, boxed values)', () => {
    const anything = fc.anything({
      withBigInt: true, withDate: true, withMap: true, withSet: true, withNullPrototype: true, withSparseArray: true,
      withBoxedValues: true, withObjectString: true, maxDepth: 4,
    });
    fc.assert(fc.property(anything, (value) => {
      sameAsSuperjson(value);
    }));
  });

  it('for documents that share an object, reach one twice, or carry a refused key', () => {
    const shared = { type: 'user', id: 1 };
    const cases: unknown[] = [
      { a: shared, b: shared },
      [shared, shared],
      { data: [{ meta: shared }, { meta: shared }] },
      JSON.parse('{"task":{"__proto__":{"x":1}}}'),
      { constructor: 1 },
      { prototype: [1] },
      { at: new Date(0) },
      { n: -0 },
      { n: Number.NaN },
      { list: [1, undefined, 2] },
      { missing: undefined },
      undefined,
      null,
      new (class Resource { id = 1; })(),
      Object.assign(Object.create(null), { a: 1 }),
      { deep: { deeper: { deepest: [1, 'two', true, null, { 3: 4 }] } } },
      { '1': 'a', b: 'b', '0': 'c' },
    ];
    for (const value of cases) sameAsSuperjson(value);
  });

  it('skips superjson only where the value is plain JSON met once', () => {
    const shared = {};
    expect(plainJson({ data: [{ id: 1, label: 'x', done: false, at: 0, none: null }] })).toBe(true);
    for (const value of [{ a: shared, b: shared }, { d: new Date(0) }, { u: undefined }, { n: -0 }, [1, , 2], 1n, { constructor: 1 }]) {
      expect(plainJson(value), JSON.stringify(value, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v))).toBe(false);
    }
  });

  it('reads inputs as superjson does', () => {
    const sent = superjson.serialize({ task: { label: 'x', planned_at: 5 }, at: new Date(0) });
    expect(transformer.deserialize(sent)).toEqual(superjson.deserialize(sent));
  });
});
