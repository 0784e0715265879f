/**
 * openapi.json as the contract tests read it: its operations by id, and its schemas compiled
 * with ajv (draft 2020-12, strict, with the document's components so that $refs resolve).
 */
import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';

export type Json = Record<string, any>;
export const doc: Json = JSON.parse(readFileSync(new URL('../../openapi.json', import.meta.url), 'utf8'));

export const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;
export interface Operation {
  id: string;
  method: (typeof METHODS)[number];
  path: string;
  op: Json;
}
export const operations: Operation[] = Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) =>
  METHODS.filter((m) => item[m]).map((method) => ({ id: item[method].operationId as string, method, path, op: item[method] })),
);
export const operationById = new Map(operations.map((o) => [o.id, o]));

// --- ajv: draft 2020-12, strict, with the document's components so that $refs resolve. -----
const ajv = new Ajv2020({ strict: true, strictTypes: false, allErrors: true });
// A CommonJS module: its default export is `.default` under NodeNext.
ajvFormats.default(ajv);
// OpenAPI's own members next to JSON Schema keywords (a discriminator only names the branch a
// `oneOf` takes, which the branches' own `op` constants decide for a validator).
ajv.addVocabulary(['components', 'example', 'discriminator']);
/**
 * Compiled validators, by schema and by the schema's JSON text: the document repeats the same
 * schemas (about 400 request and response schemas, under 40 different ones: every error
 * status's envelope, every project or task document), each compiled once per process.
 */
const bySchema = new WeakMap<object, ValidateFunction>();
const byText = new Map<string, ValidateFunction>();
function validatorFor(key: string, schema: Json): ValidateFunction {
  let validate = bySchema.get(schema);
  if (validate) return validate;
  const text = JSON.stringify(schema);
  validate = byText.get(text);
  if (!validate) {
    try {
      validate = ajv.compile({ ...schema, components: doc.components });
    } catch (error) {
      throw new Error(`the schema of ${key} does not compile: ${(error as Error).message}`);
    }
    byText.set(text, validate);
  }
  bySchema.set(schema, validate);
  return validate;
}
/** What is wrong with `value` for `schema` (named `key` in a failure to compile it); null when nothing. */
export function schemaErrors(key: string, schema: Json, value: unknown): string | null {
  const validate = validatorFor(key, schema);
  return validate(value) ? null : ajv.errorsText(validate.errors, { dataVar: 'body' });
}

export function resolveHeader(header: Json): Json {
  if (typeof header.$ref !== 'string') return header;
  return doc.components.headers[header.$ref.replace('#/components/headers/', '')];
}
