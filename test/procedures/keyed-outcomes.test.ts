/**
 * What a keyed write that runs in TypeScript (`plainWrite`, src/writes/user-write.ts: the
 * webhooks' writes) keeps under its Idempotency-Key when its work fails (API-CONTRACT.md §11):
 * a refusal the work decided (a 422 of a rule) is kept and replayed; a failure of the moment
 * (a 503 of a database outage, a 429) and a refusal before anything ran (an input that did not
 * parse) are not, so a retry with the same key runs again. (The writes of projects, tasks and
 * batches keep theirs in the database: test/http/idempotency.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import type { AuthedContext } from '../../src/core/context.js';
import { DomainError } from '../../src/core/errors.js';
import { plainWrite } from '../../src/writes/user-write.js';
import { useProcedures } from '../helpers/procedures.js';

const procedures = useProcedures();

async function keyedContext(token: string, key: string, replayed: string[]): Promise<AuthedContext> {
  const ctx = procedures.contextFor(token, { 'Idempotency-Key': key });
  const authentication = (await ctx.authenticate(token))!;
  return {
    ...ctx,
    ...authentication,
    setHeader: (name, value) => void (name === 'Idempotent-Replayed' && replayed.push(value)),
    call: { path: 'test.write', meta: {}, rawInput: async () => ({ same: 'input' }) },
  };
}

/** A write whose work throws `error` the first time, and answers `ran` after. */
function failingOnce(error: () => DomainError): () => Promise<string> {
  let calls = 0;
  return async () => {
    if (calls++ === 0) throw error();
    return 'ran';
  };
}

describe('a keyed write whose work failed', () => {
  const cases: Array<[string, () => DomainError, 'kept' | 'not kept']> = [
    ['a rule\'s refusal (422)', () => DomainError.validation('invalid_transition', '/task/state'), 'kept'],
    ['a database outage (503)', () => DomainError.of('unavailable').withRetryAfter(5), 'not kept'],
    ['a rate limit (429)', () => DomainError.of('rate_limited').withRetryAfter(5), 'not kept'],
    ['an input that did not parse', () => DomainError.validation('invalid', '/task/label').refusedBeforeRun(), 'not kept'],
  ];

  it.each(cases)('%s is %s under the key', async (_name, error, kept) => {
    const user = await procedures.register();
    const key = `k-${Math.random().toString(36).slice(2)}`;
    const write = failingOnce(error);
    const replayed: string[] = [];
    const first = await plainWrite(await keyedContext(user.token, key, replayed), write).catch((e) => e);
    expect(first).toBeInstanceOf(DomainError);
    expect(first.status).toBe(error().status);
    const retry = await plainWrite(await keyedContext(user.token, key, replayed), write).catch((e) => e);
    if (kept === 'kept') {
      expect(retry).toBeInstanceOf(DomainError);
      expect(retry.errors).toEqual(first.errors);
      expect(replayed).toEqual(['true']);
    } else {
      expect(retry).toBe('ran');
      expect(replayed).toEqual([]);
    }
  });
});
