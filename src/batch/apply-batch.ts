/**
 * POST /api/batch (API-CONTRACT.md §15): the operations of a batch, in order, as one write of
 * the user (src/writes/user-write.ts): one turn, one transaction under the owner's lock, one
 * Idempotency-Key, the events of every operation appended in order with its commit.
 *
 * Each operation is a call of its own procedure, made with the batch's transaction
 * (`withSteps`): it is parsed, checked and run by exactly the code of its request alone (its
 * If-Match against the resource as the earlier operations left it), and its answer is the
 * one it would give. The first operation that fails ends the batch: its errors, each pointer
 * under `/operations/<index>`, are the batch's, and the transaction rolls back.
 */
import { TRPCError } from '@trpc/server';
import type { AppMeta, AuthedContext, Authentication, Context } from '../core/context.js';
import { DomainError, type ApiError } from '../core/errors.js';
import { countFurtherRequests } from '../core/procedures.js';
import type { Resource } from '../core/resource.js';
import { allows, insufficientScope, type Scope } from '../core/scopes.js';
import { createCallerFactory, router } from '../core/trpc.js';
import { projectsRouter } from '../projects/projects.router.js';
import { tasksRouter } from '../tasks/tasks.router.js';
import { userWrite, withSteps, type UseCase } from '../writes/user-write.js';
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
  return userWrite(ctx, operationsOf(ctx), input);
}

function operationsOf(ctx: AuthedContext): UseCase<BatchInput, BatchAnswer> {
  return {
    transaction: (scope, { operations }) =>
      withSteps(scope, async (em) => {
        const refs = new Map<string, number>();
        const data: BatchAnswer['data'] = [];
        for (const [index, operation] of operations.entries()) {
          const [group, name] = operation.op.split('.') as [string, string];
          const caller = callerOf(stepContext(ctx, em, operation.if_match)) as unknown as Record<string, Record<string, Procedure>>;
          let answer: unknown;
          try {
            answer = await caller[group]![name]!(withRefs(operation.op, operation.input, refs));
          } catch (error) {
            throw failureAt(index, error);
          }
          if (operation.ref !== undefined) refs.set(operation.ref, (answer as { data: { id: number } }).data.id);
          data.push({ status: successStatusOf(operation.op), body: (answer ?? null) as BatchAnswer['data'][number]['body'] });
        }
        return { data };
      }),
  };
}

/**
 * What an operation's call sees: the batch's user and token (not read again), the batch's
 * transaction, its own If-Match as the only conditional header, no rate limit (counted for
 * the batch) and no response headers (the batch answers once). Its ids are JSON numbers on
 * both doors, as on /trpc.
 */
function stepContext(ctx: AuthedContext, em: AuthedContext['em'], ifMatch: string | undefined): Context {
  const authentication: Authentication = { user: ctx.user, tokenHash: ctx.tokenHash, token: ctx.token, lastEventSeq: ctx.lastEventSeq };
  return {
    ...ctx,
    em,
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

/** The input with each `{"ref": name}` in an id replaced by the id (the batch's schema checked every ref). */
function withRefs(op: BatchOperationName, input: unknown, refs: ReadonlyMap<string, number>): unknown {
  let result = input;
  for (const { at } of BATCH_OPERATIONS[op].ids as ReadonlyArray<{ at: readonly string[]; of: Resource }>) {
    result = replaced(result, at, refs);
  }
  return result;
}

function replaced(value: unknown, at: readonly string[], refs: ReadonlyMap<string, number>): unknown {
  if (!isRecord(value) || !Object.hasOwn(value, at[0]!)) return value;
  const [key, ...rest] = at as [string, ...string[]];
  const member = value[key];
  const next = rest.length > 0 ? replaced(member, rest, refs) : isRecord(member) && typeof member.ref === 'string' ? refs.get(member.ref) : member;
  return next === member ? value : { ...value, [key]: next };
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
