/**
 * POST /api/batch (API-CONTRACT.md §15): the operations of a batch as one write, one call of `apply`
 * (docs/design/writes.md). Each is first read by its own procedure, as its request alone (`BatchStep`).
 * The first that fails ends the batch: its errors, under `/operations/<index>`, are the batch's.
 */
import { TRPCError } from '@trpc/server';
import type { AppMeta, AuthedContext, Authentication, Context } from '../core/context.js';
import { DomainError, type ApiError } from '../core/errors.js';
import { countFurtherRequests } from '../core/procedures.js';
import { allows, insufficientScope, type Scope } from '../core/scopes.js';
import { createCallerFactory, router } from '../core/trpc.js';
import { projectsRouter } from '../projects/projects.router.js';
import { tasksRouter } from '../tasks/tasks.router.js';
import { MAX_ID } from '../core/fields.js';
import { BatchStep, STOP, applyWrite, type Operation } from '../writes/write.js';
import { BATCH_OPERATIONS, isRecord, valueAt, type BatchAnswer, type BatchInput, type BatchOperationName } from './batch.schema.js';

/** The procedures operations call: the writes of projects and tasks, under their paths of §8. */
const writes = router({ projects: projectsRouter, tasks: tasksRouter });
const callerOf = createCallerFactory(writes);
type Procedure = (input: unknown) => Promise<unknown>;

const procedures = writes._def.procedures as unknown as Record<string, { _def: { meta?: AppMeta } }>;
const successStatusOf = (op: BatchOperationName): number => procedures[op]!._def.meta?.successStatus ?? 200;

/**
 * The scope the first operation of a batch needs and its token lacks (API-CONTRACT.md §16), read
 * from the operations as sent, before anything is parsed; an unknown op is the validation's.
 */
export function missingScope(ctx: Pick<AuthedContext, 'token'>, raw: unknown): DomainError | undefined {
  const operations = valueAt(raw, ['operations']);
  if (!Array.isArray(operations)) return undefined;
  for (const operation of operations) {
    const op = valueAt(operation, ['op']);
    if (typeof op !== 'string' || !Object.hasOwn(BATCH_OPERATIONS, op)) continue;
    const access = procedures[op]!._def.meta?.access;
    if (access === undefined) throw new Error(`${op} has no access`);
    if (!allows(ctx.token.scopes, access)) return insufficientScope(access as Scope);
  }
  return undefined;
}

export async function applyBatch(ctx: AuthedContext, input: BatchInput): Promise<BatchAnswer> {
  // Each operation is a request for the rate limit: the batch's own call counted one.
  await countFurtherRequests(ctx, input.operations.length - 1);
  const operations: Operation[] = [];
  let refused: { index: number; error: unknown; step: BatchInput['operations'][number] } | undefined;
  for (const [index, step] of input.operations.entries()) {
    const [group, name] = step.op.split('.') as [string, string];
    const refs = refsOf(step.op, step.input);
    const caller = callerOf(stepContext(ctx, step.if_match)) as unknown as Record<string, Record<string, Procedure>>;
    try {
      // Any id will do where the input says `{"ref": name}`: the database sets it.
      await caller[group]![name]!(refs.reduce((value, { at }) => replaced(value, at, MAX_ID), step.input));
      throw new Error(`${step.op} did not hand over its operation`);
    } catch (error) {
      const cause = error instanceof TRPCError ? error.cause : error;
      if (!(cause instanceof BatchStep)) {
        refused = { index, error, step };
        break;
      }
      operations.push({ ...cause.operation, status: successStatusOf(step.op), ...(step.ref !== undefined ? { ref: step.ref } : {}), ...(refs.length > 0 ? { refs } : {}) });
    }
  }
  // A refused input ends the batch there; the operations before it still run first (one may fail first).
  if (refused) operations.push(stopAt(refused.step));
  return applyWrite<BatchAnswer>(ctx, operations, (refusal, index) => failureAt(index, refusal === 'stop' ? refused!.error : refusal));
}

/**
 * The stop of a batch at an operation whose input was refused. Alone, an input refused on an id the
 * user has no record of is 404 (src/core/procedures.ts): the stop carries a well-formed id (or its
 * ref) to be looked up at its turn, once the operations before it ran (src/writes/write-functions.ts).
 */
function stopAt(step: BatchInput['operations'][number]): Operation {
  const resource = procedures[step.op]!._def.meta?.resource;
  const id = valueAt(step.input, ['id']);
  const ref = isRecord(id) && typeof id.ref === 'string' ? id.ref : undefined;
  const wellFormed = ref !== undefined || (typeof id === 'number' && Number.isSafeInteger(id) && id >= 1);
  if ((resource !== 'project' && resource !== 'task') || !wellFormed) return STOP;
  return { ...STOP, input: { [resource]: ref !== undefined ? MAX_ID : id }, ...(ref !== undefined ? { refs: [{ at: [resource], ref }] } : {}) };
}

/**
 * What an operation's call sees: the batch's user and token (not read again), its `if_match` as the only
 * conditional header, no rate limit (counted for the batch), no response headers; its ids JSON numbers, as on /trpc.
 */
function stepContext(ctx: AuthedContext, ifMatch: string | undefined): Context {
  const authentication: Authentication = { user: ctx.user, tokenHash: ctx.tokenHash, token: ctx.token, lastEventSeq: ctx.lastEventSeq };
  return {
    ...ctx,
    batchStep: true,
    door: undefined,
    refusal: undefined,
    batched: false,
    rateLimits: { ...ctx.rateLimits, perMinute: 0 },
    authenticate: async () => authentication,
    header: (header) => (header.toLowerCase() === 'if-match' ? ifMatch : undefined),
    setHeader: () => {},
    response: { notModified: false },
  };
}

/** The ids of an operation's input written `{"ref": name}` (the batch's schema checked every ref). */
function refsOf(op: BatchOperationName, input: unknown): Array<{ at: readonly string[]; ref: string }> {
  return (BATCH_OPERATIONS[op].ids as ReadonlyArray<{ at: readonly string[] }>).flatMap(({ at }) => {
    const value = valueAt(input, at);
    return isRecord(value) && typeof value.ref === 'string' ? [{ at: [...at], ref: value.ref }] : [];
  });
}

/** The input with the member at `at` set to `value`. */
function replaced(input: unknown, at: readonly string[], value: unknown): unknown {
  if (!isRecord(input) || !Object.hasOwn(input, at[0]!)) return input;
  const [key, ...rest] = at as [string, ...string[]];
  return { ...input, [key]: rest.length > 0 ? replaced(input[key], rest, value) : value };
}

/** An operation's failure as the batch's: its errors, each pointing under `/operations/<index>`. */
function failureAt(index: number, error: unknown): unknown {
  const cause = error instanceof TRPCError ? error.cause : error;
  if (!(cause instanceof DomainError)) return error;
  const at = `/operations/${index}`;
  const errors = cause.errors.map(({ source, ...rest }): ApiError => {
    const pointer = source?.pointer !== undefined ? at + source.pointer : source?.parameter === 'If-Match' ? `${at}/if_match` : at;
    return { ...rest, source: { pointer } };
  });
  const failure = new DomainError(errors);
  if (cause.retryAfter !== undefined) failure.withRetryAfter(cause.retryAfter);
  // An input that did not parse never ran: nothing is kept under the Idempotency-Key (API-CONTRACT.md §11).
  if (cause.beforeRun) failure.refusedBeforeRun();
  return failure;
}
