/**
 * The operations of POST /api/batch in openapi.json (API-CONTRACT.md §15), one schema each,
 * so that a generated client types every operation's input: the list's items are a `oneOf`
 * with a discriminator on `op`, and each branch gives that procedure's input, as on /trpc:
 * its REST body with the path id as `id`, where an id an earlier create may make takes
 * `{"ref": name}` too (batch.schema.ts `BATCH_OPERATIONS`). The inputs are read from the
 * document's own operations, so that a batch's operation is described as its request alone.
 *
 * The service checks each input with its procedure's schema when its turn comes; the batch's
 * own zod schema takes any input, and only this document spells them out.
 */
import { appRouter } from '../app/router.js';
import { BATCH_OPERATIONS, REF_RULES, type BatchOperationName } from '../batch/batch.schema.js';
import type { AppMeta } from '../core/context.js';
import { MAX_ID } from '../core/fields.js';
import type { Resource } from '../core/resource.js';

type Json = Record<string, unknown>;

const REF = 'BatchRef';
const refTo = (name: string) => ({ $ref: `#/components/schemas/${name}` });

/** `projects.changeState` → `BatchProjectsChangeState`. */
const schemaName = (op: string) => `Batch${op.split('.').map((part) => part[0]!.toUpperCase() + part.slice(1)).join('')}`;

/**
 * The schema at `at` of an input, made to take `{"ref": name}` beside what it takes (an id,
 * or null where the id may be unset).
 */
function withRef(input: Json, at: readonly string[]): void {
  let parent = input;
  for (const key of at.slice(0, -1)) parent = (parent.properties as Record<string, Json>)[key]!;
  const properties = parent.properties as Record<string, Json>;
  const last = at.at(-1)!;
  const { description, anyOf, ...schema } = properties[last]!;
  properties[last] = { ...(description === undefined ? {} : { description }), anyOf: [...((anyOf as Json[] | undefined) ?? [schema]), refTo(REF)] };
}

/** The input of `op` as openapi.json describes its request: the body, and the path id as `id`. */
function inputOf(doc: Json, op: BatchOperationName): Json {
  const procedures = appRouter._def.procedures as unknown as Record<string, { _def: { meta?: AppMeta } }>;
  const { path, method } = procedures[op]!._def.meta!.openapi!;
  const operation = (doc.paths as Record<string, Record<string, Json>>)[path]![method.toLowerCase()]!;
  const content = (operation.requestBody as { content: Record<string, { schema: Json }> } | undefined)?.content['application/json'];
  const body = structuredClone(content?.schema ?? { type: 'object', properties: {} });
  const takesId = path.includes('{id}');
  const input: Json = {
    type: 'object',
    properties: { ...(takesId ? { id: { type: 'integer', minimum: 1, maximum: MAX_ID } } : {}), ...(body.properties as Json) },
    required: [...(takesId ? ['id'] : []), ...((body.required as string[] | undefined) ?? [])],
    description: `The input of \`${op}\`, as on /trpc: the body of ${method} ${path}${takesId ? ', with the path id as `id`' : ''}.`,
  };
  for (const { at } of BATCH_OPERATIONS[op].ids as ReadonlyArray<{ at: readonly string[]; of: Resource }>) withRef(input, at);
  return input;
}

/**
 * Puts a schema per operation under components (`BatchProjectsCreate`, …, and `BatchRef`)
 * and makes the batch's list of operations a `oneOf` of them, told apart by `op`.
 */
export function describeBatchOperations(doc: Json, batchPath: string): void {
  const schemas = (doc.components as { schemas: Record<string, Json> }).schemas;
  const body = ((doc.paths as Record<string, Record<string, Json>>)[batchPath]!.post!.requestBody as { content: Record<string, { schema: Json }> }).content['application/json']!.schema;
  const operations = (body.properties as Record<string, Json>).operations!;
  const generic = (operations.items as { properties: Record<string, Json> }).properties;
  const { description: refDescription, ...refName } = generic.ref!;
  schemas[REF] = {
    type: 'object',
    description: 'In place of an id: the id of the resource an earlier create of the batch made with this `ref`.',
    properties: { ref: { ...refName, description: `The \`ref\` of an earlier create of this batch: ${REF_RULES}` } },
    required: ['ref'],
    additionalProperties: false,
  };
  const mapping: Record<string, string> = {};
  for (const op of Object.keys(BATCH_OPERATIONS) as BatchOperationName[]) {
    const creates = (BATCH_OPERATIONS[op] as { creates?: Resource }).creates !== undefined;
    schemas[schemaName(op)] = {
      type: 'object',
      properties: {
        op: { type: 'string', const: op, description: generic.op!.description },
        ...(creates ? { ref: { ...refName, description: refDescription } } : {}),
        input: inputOf(doc, op),
        if_match: generic.if_match,
      },
      required: ['op', 'input'],
    };
    mapping[op] = refTo(schemaName(op)).$ref;
  }
  operations.items = {
    oneOf: Object.values(mapping).map(($ref) => ({ $ref })),
    discriminator: { propertyName: 'op', mapping },
  };
}
