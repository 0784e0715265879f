/**
 * POST /api/batch (API-CONTRACT.md §15): the operations of a batch, in order, as one write of
 * the user: one call of `apply` (src/writes/write.ts), so one turn, one transaction under the
 * user's lock, one Idempotency-Key, the events of every operation appended in order.
 *
 * Each operation is first read by its own procedure (`BatchStep`): parsed, checked and shaped by
 * exactly the code of its request alone, with its `if_match` as If-Match. A `{"ref": name}` id
 * is read as a placeholder id and set to the created resource's id in the database, where the
 * operations run in order, each as its request alone runs. The first operation that fails ends
 * the batch (one whose input is refused ends it there, before it runs: `STOP`): its errors,
 * each pointer under `/operations/<index>`, are the batch's, and nothing is kept.
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
import { BATCH_OPERATIONS, type BatchAnswer, type BatchInput, type BatchOperationName } from './batch.schema.js';

/** The procedures operations call: the writes of projects and tasks, under their paths of §8. */
const writes = router({ projects: projectsRouter, tasks: tasksRouter });
const callerOf = createCallerFactory(writes);
type Procedure = (input: unknown) => Promise<unknown>;

const procedures = writes._def.procedures as unknown as Record<string, { _def: { meta?: AppMeta } }>;
const successStatusOf = (op: BatchOperationName): number => procedures[op]!._def.meta?.successStatus ?? 200;

/**
 * The scope the first operation of a batch needs and its token lacks (API-CONTRACT.md §16),
 * read from the operations as sent, before the batch is parsed or anything of it runs; an
 * operation whose name is no write is left to the batch's validation.
 */
export function missingScope(ctx: Pick<AuthedContext, 'token'>, raw: unknown): DomainError | undefined {
  const operations = typeof raw === 'object' && raw !== null ? (raw as { operations?: unknown }).operations : undefined;
  if (!Array.isArray(operations)) return undefined;
  for (const operation of operations) {
    const op = typeof operation === 'object' && operation !== null ? (operation as { op?: unknown }).op : undefined;
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
  let refused: { index: number; error: unknown } | undefined;
  for (const [index, step] of input.operations.entries()) {
    const [group, name] = step.op.split('.') as [string, string];
    const refs = refsOf(step.op, step.input);
    const caller = callerOf(stepContext(ctx, step.if_match)) as unknown as Record<string, Record<string, Procedure>>;
    try {
      await caller[group]![name]!(refs.reduce((value, { at }) => replaced(value, at, PLACEHOLDER_ID), step.input));
      throw new Error(`${step.op} did not hand over its operation`);
    } catch (error) {
      const cause = error instanceof TRPCError ? error.cause : error;
      if (!(cause instanceof BatchStep)) {
        refused = { index, error };
        break;
      }
      operations.push({ ...cause.operation, status: successStatusOf(step.op), ...(step.ref !== undefined ? { ref: step.ref } : {}), ...(refs.length > 0 ? { refs } : {}) });
    }
  }
  // A refused input ends the batch there: the operations before it run first (one of them may
  // fail first), and nothing is kept.
  if (refused) operations.push(STOP);
  return applyWrite<BatchAnswer>(ctx, operations, (refusal, index) => failureAt(index, refusal === 'stop' ? refused!.error : refusal));
}

/** The id an operation's procedure reads where its input says `{"ref": name}`: any id will do, it is set in the database. */
const PLACEHOLDER_ID = MAX_ID;

/**
 * What an operation's call sees: the batch's user and token (not read again), its own If-Match
 * as the only conditional header, no rate limit (counted for the batch) and no response
 * headers (the batch answers once). Its ids are JSON numbers on both doors, as on /trpc.
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

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The ids of an operation's input written `{"ref": name}` (the batch's schema checked every ref). */
function refsOf(op: BatchOperationName, input: unknown): Array<{ at: readonly string[]; ref: string }> {
  return (BATCH_OPERATIONS[op].ids as ReadonlyArray<{ at: readonly string[] }>).flatMap(({ at }) => {
    const value = at.reduce<unknown>((v, key) => (isRecord(v) && Object.hasOwn(v, key) ? v[key] : undefined), input);
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
  const errors = cause.errors.map((e): ApiError => {
    const { source, ...rest } = e;
    if (source?.pointer !== undefined) return { ...rest, source: { pointer: at + source.pointer } };
    if (source?.parameter === 'If-Match') return { ...rest, source: { pointer: `${at}/if_match` } };
    return { ...rest, source: { pointer: at } };
  });
  const failure = new DomainError(errors);
  if (cause.retryAfter !== undefined) failure.withRetryAfter(cause.retryAfter);
  // An operation whose input did not parse never ran: the batch keeps nothing of it under its
  // Idempotency-Key, as that request alone would not (API-CONTRACT.md §11).
  if (cause.beforeRun) failure.refusedBeforeRun();
  return failure;
}
