/**
 * Wire shapes of a batch (API-CONTRACT.md §15). The batch's own shape (how many operations, which
 * procedures, which refs) is checked here, before anything runs; each operation's input by its procedure.
 */
import { z } from 'zod';
import { inputObject, text } from '../core/fields.js';
import { DomainError } from '../core/errors.js';
import type { Resource } from '../core/resource.js';
import { ProjectDocument } from '../projects/project.schema.js';
import { TaskDocument, TaskOrderDocument } from '../tasks/task.schema.js';

export const MAX_OPERATIONS = 100;

/** A write procedure a batch runs: what it creates (its `ref` names that), where its input takes ids. */
type OperationSpec = { creates?: Resource; ids: ReadonlyArray<{ at: readonly string[]; of: Resource }> };

export const BATCH_OPERATIONS = {
  'projects.create': { creates: 'project', ids: [] },
  'projects.update': { ids: [{ at: ['id'], of: 'project' }] },
  'projects.changeState': { ids: [{ at: ['id'], of: 'project' }] },
  'projects.delete': { ids: [{ at: ['id'], of: 'project' }] },
  'tasks.create': { creates: 'task', ids: [{ at: ['task', 'project_id'], of: 'project' }] },
  'tasks.update': { ids: [{ at: ['id'], of: 'task' }, { at: ['task', 'project_id'], of: 'project' }] },
  'tasks.changeState': { ids: [{ at: ['id'], of: 'task' }] },
  'tasks.reorder': { ids: [{ at: ['id'], of: 'task' }] },
} as const satisfies Record<string, OperationSpec>;

export type BatchOperationName = keyof typeof BATCH_OPERATIONS;
const OPERATION_NAMES = Object.keys(BATCH_OPERATIONS) as [BatchOperationName, ...BatchOperationName[]];

const refName = text({ min: 1, max: 64, what: 'ref' });
/** How a ref is written (text()'s rules), as the documents say it. */
export const REF_RULES = refName.description!;

const Operation = z.object({
  // A string checked against the names (not an enum), so that a missing op is `parameter_missing`.
  op: z
    .string()
    .refine((op) => Object.hasOwn(BATCH_OPERATIONS, op), { message: `op must be one of ${OPERATION_NAMES.join(', ')}.` })
    .transform((op) => op as BatchOperationName)
    .meta({ enum: OPERATION_NAMES, description: 'A write procedure (API-CONTRACT.md §8).' }),
  ref: refName.optional().meta({
    description: `On a create: names the resource it creates, for later operations of the batch (\`{"ref": name}\` in place of its id). Unique in the batch; ${REF_RULES}`,
  }),
  input: z.unknown().optional().meta({
    description: 'The procedure\'s input, as on /trpc: the REST body with the path id as `id` (none is an empty one). An id may be `{"ref": name}`.',
  }),
  if_match: z.string().optional().meta({ description: 'This operation\'s If-Match.' }),
});

export const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The value at `path` of an input as sent, if there is one. */
export const valueAt = (input: unknown, path: readonly string[]): unknown =>
  path.reduce<unknown>((value, key) => (isRecord(value) && Object.hasOwn(value, key) ? value[key] : undefined), input);

/**
 * The batch's shape, on whatever was sent (wrong types are the member schemas'): at least one
 * operation; a `ref` only on a create, and unique; every `{"ref": name}` id naming an earlier create
 * of that kind. Pointers leave out `/input`, as the operation's own errors do (`/operations/1/task/project_id`).
 */
function checkShape(operations: unknown, invalid: (message: string, path: PropertyKey[]) => void): void {
  if (!Array.isArray(operations)) return;
  if (operations.length === 0) invalid('A batch holds at least one operation.', ['operations']);
  const created = new Map<string, Resource>();
  operations.forEach((operation, index) => {
    if (!isRecord(operation) || typeof operation.op !== 'string' || !Object.hasOwn(BATCH_OPERATIONS, operation.op)) return;
    const spec: OperationSpec = BATCH_OPERATIONS[operation.op as BatchOperationName];
    for (const { at, of } of spec.ids) {
      const value = valueAt(operation.input, at);
      if (!isRecord(value)) continue;
      const name = value.ref;
      const path = ['operations', index, ...at];
      if (typeof name !== 'string') invalid('An id is a positive integer or {"ref": name}.', path);
      else if (!created.has(name)) invalid(`No earlier operation of this batch has ref ${JSON.stringify(name)}.`, path);
      else if (created.get(name) !== of) invalid(`ref ${JSON.stringify(name)} names a ${created.get(name)}, not a ${of}.`, path);
    }
    if (typeof operation.ref !== 'string') return;
    const path = ['operations', index, 'ref'];
    if (!spec.creates) invalid('Only an operation that creates (projects.create, tasks.create) takes a ref.', path);
    else if (created.has(operation.ref)) invalid('This ref is taken by an earlier operation of the batch.', path);
    else created.set(operation.ref, spec.creates);
  });
}

/** If-Match and If-None-Match on a batch are `400 invalid` on the header, on both doors (API-CONTRACT.md §15). */
export function conditionalHeader(header: (name: string) => string | undefined): DomainError | undefined {
  const names = (['If-Match', 'If-None-Match'] as const).filter((n) => header(n) !== undefined);
  const detail = (name: string) => `${name} does not apply to a batch: give each operation its own if_match.`;
  const errors = names.flatMap((name) => DomainError.of('invalid', { status: 400, header: name, detail: detail(name) }).errors);
  return errors.length === 0 ? undefined : new DomainError(errors);
}

/** Over MAX_OPERATIONS is refused on the length alone: 100 KiB of zeros are 50,000 operations, each with its errors. */
export function tooManyOperations(raw: unknown): DomainError | undefined {
  const operations = isRecord(raw) ? raw.operations : undefined;
  if (!Array.isArray(operations) || operations.length <= MAX_OPERATIONS) return undefined;
  return DomainError.validation('too_long', '/operations', `A batch holds at most ${MAX_OPERATIONS} operations.`);
}

export const BatchInput = inputObject({
  operations: z.array(Operation).meta({ minItems: 1, maxItems: MAX_OPERATIONS }),
}).check(
  z.superRefine((value, ctx) => {
    const invalid = (message: string, path: PropertyKey[]) => ctx.addIssue({ code: 'custom', message, path, params: { code: 'invalid' } });
    checkShape(isRecord(value) ? value.operations : undefined, invalid);
  }, { when: () => true }),
);
export type BatchInput = z.infer<typeof BatchInput>;

export const BatchResult = z.object({
  status: z.int().meta({ description: 'The status the operation answers alone: 201 for a create, 204 for a delete, else 200.' }),
  body: z.union([ProjectDocument, TaskDocument, TaskOrderDocument, z.null()]).meta({ description: 'The operation\'s answer; null for a delete.' }),
});

export const BatchAnswer = z.object({ data: z.array(BatchResult) });
export type BatchAnswer = z.infer<typeof BatchAnswer>;
