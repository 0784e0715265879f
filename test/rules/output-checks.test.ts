/**
 * Output checks (src/core/output-checks.ts): strict in tests and development (an answer must
 * pass its schema and be its own parse), none in production. Every other test runs the app
 * strict, so every answer they see is one its schema accepts unchanged: what production,
 * which skips the check, then sends.
 */
import { initTRPC } from '@trpc/server';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { appRouter } from '../../src/app/router.js';
import { applyOutputChecks, outputChecksFor, sameValue, type OutputChecks } from '../../src/core/output-checks.js';

/** A router whose one procedure answers `answer`, its output schema `{ a: number }`. */
function answering(answer: unknown, mode?: OutputChecks) {
  const t = initTRPC.create();
  const router = t.router({ read: t.procedure.output(z.object({ a: z.number() })).query(() => answer as { a: number }) });
  if (mode) applyOutputChecks(router, mode);
  return t.createCallerFactory(router)({});
}

describe('output checks', () => {
  it('are off under NODE_ENV=production only', () => {
    expect(outputChecksFor({ NODE_ENV: 'production' })).toBe('off');
    expect(outputChecksFor({ NODE_ENV: 'test' })).toBe('strict');
    expect(outputChecksFor({ NODE_ENV: 'development' })).toBe('strict');
    expect(outputChecksFor({})).toBe('strict');
  });

  it('strict: a valid answer passes as it is; one its schema rejects, or would change, fails', async () => {
    expect(await answering({ a: 1 }, 'strict').read()).toEqual({ a: 1 });
    await expect(answering({ a: 'one' }, 'strict').read()).rejects.toMatchObject({ code: 'INTERNAL_SERVER_ERROR', message: 'Output validation failed' });
    // tRPC alone would send { a: 1 }, dropping the member; strict says so instead.
    expect(await answering({ a: 1, extra: true }).read()).toEqual({ a: 1 });
    await expect(answering({ a: 1, extra: true }, 'strict').read()).rejects.toThrow(/Output of read is not its own parse/);
  });

  it('off: the answer goes out unchecked', async () => {
    expect(await answering({ a: 1 }, 'off').read()).toEqual({ a: 1 });
    expect(await answering({ a: 'one' }, 'off').read()).toEqual({ a: 'one' });
  });

  it('the app runs strict under the tests: every procedure with an output schema checks it, none the plain way', () => {
    type Procedure = { _def: { output?: unknown; middlewares: Array<{ _type?: string; name: string }> } };
    const procedures = Object.entries(appRouter._def.procedures as unknown as Record<string, Procedure>);
    const withOutput = procedures.filter(([, p]) => p._def.output !== undefined);
    expect(withOutput.length).toBeGreaterThanOrEqual(17);
    for (const [path, p] of withOutput) {
      const checks = p._def.middlewares.filter((m) => m._type === 'output');
      expect(checks.map((m) => m.name), path).toEqual(['check']);
    }
  });

  it('tell an unchanged parse from a changed one', () => {
    const task = { type: 'task', id: 1, attributes: { label: 'a', at: new Date(0), tags: ['x', 'y'], project: null } };
    expect(sameValue(task, structuredClone(task))).toBe(true);
    expect(sameValue({ a: 1 }, { a: 1, b: undefined })).toBe(false); // a member dropped
    expect(sameValue({ a: 1, b: 2 }, { a: 1, c: 2 })).toBe(false);
    expect(sameValue({ a: '1' }, { a: 1 })).toBe(false); // coerced
    expect(sameValue({ a: [1, 2] }, { a: [1, 2, 3] })).toBe(false);
    expect(sameValue({ a: [1] }, { a: { 0: 1 } })).toBe(false);
    expect(sameValue(new Date(1), new Date(2))).toBe(false);
    expect(sameValue({ a: null }, { a: undefined })).toBe(false);
    expect(sameValue({ n: Number.NaN }, { n: Number.NaN })).toBe(true);
    expect(sameValue(Object.create(null), {})).toBe(false);
  });
});
