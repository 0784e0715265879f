/**
 * What becomes of the output schemas (`.output(...)`) of a router's procedures when they run.
 * The schemas themselves stay: they type the procedures and describe the answers in
 * openapi.json. What changes is the check tRPC runs on every answer:
 *
 * - `strict` (tests, development): the answer must pass its schema, as tRPC checks it, and
 *   parsing must give it back unchanged (no member dropped, defaulted or transformed); else
 *   the call fails with INTERNAL_SERVER_ERROR naming why. The whole test suite runs this way,
 *   so every answer a test sees is one its schema accepts as it is.
 * - `off` (NODE_ENV=production): no check. What strict proves (an answer is its own parse)
 *   is what makes this safe: the bytes are those the check would have let through. A page of
 *   50 tasks cost about 40 µs of parsing per request. (README.md's deployment starts its
 *   instances with NODE_ENV=production, and test/system/haproxy-deployment.test.ts runs it.)
 *
 * tRPC has no switch for it; its output check is the middleware `.output()` adds, marked
 * `_type: 'output'`, which the procedure reads from its `_def.middlewares` on every call.
 */
import { TRPCError } from '@trpc/server';
import { StreamedAnswer } from './streamed-answer.js';

export type OutputChecks = 'strict' | 'off';

/** `off` under NODE_ENV=production, `strict` otherwise. */
export function outputChecksFor(env: NodeJS.ProcessEnv = process.env): OutputChecks {
  return env.NODE_ENV === 'production' ? 'off' : 'strict';
}

interface Schema {
  parseAsync(value: unknown): Promise<unknown>;
}
type Middleware = ((opts: { next: () => Promise<{ ok: boolean; data?: unknown }> }) => Promise<unknown>) & { _type?: string };
interface ProcedureDef {
  middlewares: Middleware[];
  /** The schema `.output()` was given (tRPC 11 takes one). */
  output?: unknown;
}
interface RouterLike {
  _def: { procedures: object };
}

/** Applies `mode` to every procedure of `router` (once, where the router is made). */
export function applyOutputChecks(router: RouterLike, mode: OutputChecks): void {
  const procedures = Object.entries(router._def.procedures as Record<string, { _def?: Partial<ProcedureDef> }>);
  for (const [path, procedure] of procedures) {
    const def = procedure._def;
    if (!def || !Array.isArray(def.middlewares)) throw new Error(`applyOutputChecks: ${path} is not a procedure`);
    const schema = def.output as Schema | undefined;
    def.middlewares = def.middlewares.flatMap((middleware) => {
      if (middleware._type !== 'output') return [middleware];
      if (mode === 'off') return [];
      if (!schema || typeof schema.parseAsync !== 'function') return [middleware];
      return [strictOutput(path, schema)];
    });
  }
}

function strictOutput(path: string, schema: Schema): Middleware {
  const check: Middleware = async ({ next }) => {
    const result = await next();
    if (!result.ok) return result;
    // Written by the REST door as it is produced: its items are presented by the same code as
    // the whole value the procedure answers on /trpc, which this checks.
    if (result.data instanceof StreamedAnswer) return result;
    let parsed: unknown;
    try {
      parsed = await schema.parseAsync(result.data);
    } catch (cause) {
      throw new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: 'Output validation failed', cause });
    }
    if (!sameValue(parsed, result.data)) {
      throw new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: `Output of ${path} is not its own parse: its schema drops, defaults or changes a member` });
    }
    return result;
  };
  check._type = 'output';
  return check;
}

/**
 * Whether a parse gave `value` back unchanged: the same primitives, arrays of the same length,
 * objects with the same members, dates of the same instant. (node:util's isDeepStrictEqual
 * says the same for these values but cost about 160 µs on a page of 50 tasks, four times
 * the parse; this costs a few.)
 */
export function sameValue(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameValue(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  if (a instanceof Date || b instanceof Date) return a instanceof Date && b instanceof Date && Object.is(a.getTime(), b.getTime());
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  for (const key of keys) {
    if (!Object.hasOwn(b, key) || !sameValue((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key])) return false;
  }
  return true;
}
