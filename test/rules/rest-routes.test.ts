/**
 * The REST door's routes (src/core/rest-routes.ts) are trpc-to-openapi's: for any method and
 * any path (the routes' own, with odd ids, other cases, extra or missing slashes and
 * segments, random text), the same procedure and the same path members as the library's
 * procedure cache, which its node handler used. And what the door works out once from each
 * input schema is what that handler worked out on every call: no input for a void one, the
 * array members, and its `coerceSchema`, which changes no input of this router.
 */
import fc from 'fast-check';
import {
  coerceSchema,
  createProcedureCache,
  getInputOutputParsers,
  instanceofZodTypeLikeVoid,
  instanceofZodTypeObject,
  instanceofZodTypeOptional,
  normalizePath,
  unwrapZodType,
} from 'trpc-to-openapi';
import { ZodArray } from 'zod/v4';
import { describe, expect, it } from 'vitest';
import { appRouter } from '../../src/app/router.js';
import { restRoutes } from '../../src/core/rest-routes.js';

const ours = restRoutes(appRouter);
const library = createProcedureCache(appRouter);
const procedures = Object.entries(appRouter._def.procedures as Record<string, any>).filter(
  ([, p]) => p._def.meta?.openapi && p._def.type !== 'subscription',
);
const templates = procedures.map(([, p]) => p._def.meta.openapi.path as string);
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

function both(method: string, path: string) {
  const mine = ours(method, path);
  const theirs = library(method as never, normalizePath(path));
  return {
    mine: mine ? { path: mine.procedure.path, pathInput: mine.pathInput } : undefined,
    theirs: theirs?.procedure ? { path: theirs.procedure.path, pathInput: { ...theirs.pathInput } } : undefined,
  };
}

/** A path member as a client might write it. */
const segment = fc.oneof(
  fc.constantFrom('1', '42', '01', '0', '-1', '1e3', '0x1', ' 1', '2147483648', 'me', 'abc', '%2F', '%20', '..', ''),
  fc.string({ maxLength: 12 }).filter((s) => !s.includes('/') && !s.includes('?') && !s.includes('#')),
);

/** A route's path, filled in, in another case, with slashes added (also in front) or a segment more or less. */
const routeLike = fc
  .tuple(fc.constantFrom(...templates), segment, fc.constantFrom('same', 'upper', 'lower'), fc.constantFrom('', '/', '/x', '//'), fc.boolean(), fc.constantFrom('', '/', '//x', '/\\x'))
  .map(([template, id, letterCase, tail, dropLast, lead]) => {
    let path = lead + template.replace(/\{(.+?)\}/g, () => id);
    if (dropLast) path = path.slice(0, path.lastIndexOf('/')) || '/';
    path += tail;
    return letterCase === 'upper' ? path.toUpperCase() : letterCase === 'lower' ? path.toLowerCase() : path;
  });

describe('the REST routes are the library’s', () => {
  it('every route with its own method answers its procedure, with its path members', () => {
    for (const [name, p] of procedures) {
      const path = (p._def.meta.openapi.path as string).replace(/\{(.+?)\}/g, '7');
      const { mine, theirs } = both(p._def.meta.openapi.method, path);
      expect(mine?.path).toBe(name);
      expect(mine).toEqual(theirs);
    }
  });

  it('for any method and any path like a route, or any text at all', () => {
    fc.assert(
      fc.property(fc.constantFrom(...METHODS), fc.oneof(routeLike, fc.string({ maxLength: 40 }).map((s) => `/${s}`)), (method, path) => {
        const { mine, theirs } = both(method, path);
        expect(mine).toEqual(theirs);
      }),
      { numRuns: 3000 },
    );
  });
});

describe('what a call needs from its input schema, worked out once', () => {
  const routeOf = (name: string, p: any) => ours(p._def.meta.openapi.method, (p._def.meta.openapi.path as string).replace(/\{(.+?)\}/g, '7'))!.procedure;

  it('no input for a void one, and the array members, as the library found them on every call', () => {
    for (const [name, p] of procedures) {
      const schema = unwrapZodType(getInputOutputParsers(p).inputParser, true);
      const arrays = instanceofZodTypeObject(schema)
        ? Object.entries(schema.shape as Record<string, any>)
            .filter(([, s]) => s instanceof ZodArray || (instanceofZodTypeOptional(s) && s.unwrap() instanceof ZodArray))
            .map(([key]) => key)
        : [];
      const mine = routeOf(name, p);
      expect({ name, void: mine.takesNoInput, arrays: mine.arrayMembers }).toEqual({ name, void: instanceofZodTypeLikeVoid(schema), arrays });
    }
    // Both kinds occur: the check above compares something.
    expect(procedures.some(([name, p]) => routeOf(name, p).takesNoInput)).toBe(true);
    expect(procedures.some(([name, p]) => !routeOf(name, p).takesNoInput)).toBe(true);
  });

  it("the library's coerceSchema changes no input: every number of an input is pinned strict", () => {
    /** Every schema reachable from an input through objects and wrappers, with its `coerce` flag. */
    const flags = (schema: any, path: string, out: string[]) => {
      const inner = unwrapZodType(schema, false) as any;
      out.push(`${path}:${inner._zod.def.type}:${String(inner._zod.def.coerce)}`);
      if (instanceofZodTypeObject(inner)) for (const [key, member] of Object.entries(inner.shape)) flags(member, `${path}.${key}`, out);
      return out;
    };
    for (const [name, p] of procedures) {
      const schema = unwrapZodType(getInputOutputParsers(p).inputParser, true);
      if (!instanceofZodTypeObject(schema)) continue;
      const before = flags(schema, name, []);
      coerceSchema(schema);
      expect(flags(schema, name, [])).toEqual(before);
    }
    // The inputs do hold numbers (ids, pages, orders), so the pinning is what keeps this true.
    const all = procedures.flatMap(([name, p]) => flags(unwrapZodType(getInputOutputParsers(p).inputParser, true), name, []));
    expect(all.filter((f) => /:(int|number):/.test(f)).length).toBeGreaterThan(0);
  });
});
