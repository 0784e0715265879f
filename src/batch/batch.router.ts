/**
 * A batch of writes (API-CONTRACT.md §15): `batch.apply`, at POST /api/batch. A plain record, not a `router()`,
 * which refuses `apply` as a key (its proxies take it for `Function.apply`): the client calls
 * `batch.apply.mutate(input)`, a server-side caller `caller.batch.apply.apply(null, [input])`.
 */
import { authedProcedure, routesUnder } from '../core/procedures.js';
import { t, toTRPCError } from '../core/trpc.js';
import type { AuthedContext } from '../core/context.js';
import { applyBatch, missingScope } from './apply-batch.js';
import { BatchAnswer, BatchInput, MAX_OPERATIONS, conditionalHeader, tooManyOperations } from './batch.schema.js';

/**
 * Refused before the input is parsed, so before anything runs or is kept: an operation whose scope
 * the token lacks (§16), then a conditional header, then a list over the limit.
 */
const boundedBatch = t.middleware(async ({ ctx, getRawInput, next }) => {
  const raw = await getRawInput();
  const refusal = missingScope(ctx as AuthedContext, raw) ?? conditionalHeader(ctx.header) ?? tooManyOperations(raw);
  if (refusal) throw toTRPCError(refusal);
  return next();
});

const route = routesUnder('batch', authedProcedure);

export const batchProcedures = {
  apply: route({
    method: 'POST', path: '/api/batch',
    summary: 'Apply several writes at once',
    description: [
      `Runs 1 to ${MAX_OPERATIONS} write operations of the current user in order, in one transaction: all of them, or none.`,
      'Each operation is a write procedure (`projects.create`, `.update`, `.changeState`, `.delete`, `tasks.create`, `.update`, `.changeState`, `.reorder`) with that procedure\'s input; `{"ref": name}` in place of an id stands for the resource an earlier create with that `ref` made; `if_match` is the operation\'s If-Match. Each operation sees the ones before it, and the rules hold after each step.',
      'The answers are in request order, each with the status the operation gives alone. The first operation that fails ends the batch and nothing is kept: its status and errors are the answer, each pointer under `/operations/<index>`. Idempotency-Key covers the whole batch; If-Match and If-None-Match headers are refused (400 `invalid`, `source.header`): preconditions go in each operation\'s `if_match`.',
      'Each operation counts as a request against the rate limit, once the batch is admitted; a batch that does not fit what is left of it is refused (429, with Retry-After when it will fit), runs nothing and counts as one request.',
    ].join('\n\n'),
  }, {
    errorCodes: [
      'parameter_missing', 'invalid', 'too_long', 'taken', 'record_not_found', 'must_be_set', 'cannot_be_set', 'invalid_transition',
      'cannot_be_before_started_at', 'cannot_be_after_today', 'reached_max_started', 'precondition_failed',
    ],
  })
    .use(boundedBatch)
    .input(BatchInput)
    .output(BatchAnswer)
    .mutation(({ ctx, input }) => applyBatch(ctx, input)),
};
