/**
 * openapi.json as a contract, read on its own (what the service answers against it is
 * test/http/contract.test.ts): every operation has an id, tag and summary; its examples are
 * accepted by its own schemas, with one example per documented error code; its parameters
 * have their types and defaults, and its security is its row of the one table of scopes
 * (src/app/scopes.ts, API-CONTRACT.md §16).
 */
import { describe, expect, it } from 'vitest';
import { doc, operations, schemaErrors, type Json } from '../helpers/openapi-document.js';
import { QUERY_PARAMETERS } from '../../src/core/list-query.js';
import { ACCESS } from '../../src/app/scopes.js';
import { SCOPES } from '../../src/core/scopes.js';

/** The procedure an operation id names: `tasks-changeState` is `tasks.changeState`. */
const procedureOf = (id: string) => id.replace('-', '.') as keyof typeof ACCESS;
/** REST's operations: every row of the table but the tRPC subscription (its REST form is `events.list` with Accept: text/event-stream). */
const REST_OPERATIONS = Object.keys(ACCESS).filter((path) => path !== 'events.onChange');

describe('openapi.json describes itself', () => {
  it('documents every operation of the table of scopes, each with an operationId, tag and summary', () => {
    expect(operations.map(({ id }) => procedureOf(id)).sort()).toEqual([...REST_OPERATIONS].sort());
    for (const { id, op } of operations) {
      expect(id).toMatch(/^(users|tokens|projects|tasks|batch|events|webhooks)-[a-zA-Z]+$/);
      expect(op.tags, id).toEqual([id.split('-')[0]]);
      expect(op.summary, id).toBeTruthy();
      expect(op.description, id).toBeTruthy();
    }
    expect(doc.tags.map((t: Json) => t.name)).toEqual(['users', 'tokens', 'projects', 'tasks', 'batch', 'events', 'webhooks']);
    for (const tag of doc.tags) expect(tag.description, tag.name).toBeTruthy();
  });

  it('gives each operation examples that its own schemas accept, with one example per documented error code', () => {
    for (const { id, op } of operations) {
      const body = op.requestBody?.content?.['application/json'];
      if (body) {
        const examples = Object.entries(body.examples ?? {}) as [string, Json][];
        expect(examples.length, `${id} request examples`).toBeGreaterThan(0);
        for (const [name, example] of examples) {
          expect(schemaErrors(`${id} request`, body.schema, example.value), `${id} request example ${name}`).toBeNull();
        }
      }
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        const content = response.content?.['application/json'];
        if (!content) continue;
        const examples = Object.entries(content.examples ?? {}) as [string, Json][];
        expect(examples.length, `${id} ${status} examples`).toBeGreaterThan(0);
        for (const [name, example] of examples) {
          expect(schemaErrors(`${id} ${status}`, content.schema, example.value), `${id} ${status} example ${name}`).toBeNull();
        }
        if (status.startsWith('2')) continue;
        const documented: string[] = response['x-error-codes'];
        expect(documented?.length, `${id} ${status} x-error-codes`).toBeGreaterThan(0);
        const exampleCodes = new Set(examples.flatMap(([, e]) => e.value.errors.map((x: Json) => x.code)));
        expect([...exampleCodes].sort(), `${id} ${status} example codes`).toEqual([...documented].sort());
        for (const [, e] of examples) for (const x of e.value.errors) expect(x.status, `${id} ${status}`).toBe(status);
        for (const code of documented) expect(response.description, `${id} ${status}`).toContain(`\`${code}\``);
      }
    }
  });

  it('documents parameters with their types and defaults, and the security of its row of the table of scopes', () => {
    for (const { id, path, op } of operations) {
      const parameters = (op.parameters ?? []) as Json[];
      const pathParams = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      expect(parameters.filter((p) => p.in === 'path').map((p) => p.name), id).toEqual(pathParams);
      for (const p of parameters) {
        expect(p.description, `${id} ${p.name}`).toBeTruthy();
        // Headers of API-CONTRACT.md §10–§11, event ids and tickets are strings; path ids, pages and the
        // integers of §12 are integers; the comma lists of §12 are arrays, written without explode.
        if (p.in === 'header') {
          expect(['Idempotency-Key', 'If-Match', 'If-None-Match', 'Accept', 'Last-Event-ID'], `${id} ${p.name}`).toContain(p.name);
          expect(p.schema.type, `${id} ${p.name}`).toBe('string');
          continue;
        }
        const kind = p.in === 'query' ? QUERY_PARAMETERS[p.name]?.kind : undefined;
        expect(p.schema.type, `${id} ${p.name}`).toBe(p.in === 'path' || kind === 'integer' ? 'integer' : kind === 'list' || kind === 'ids' ? 'array' : 'string');
        if (p.schema.type === 'array') expect(p, `${id} ${p.name}`).toMatchObject({ style: 'form', explode: false });
        if (p.in === 'query') expect(p.example, `${id} ${p.name}: an example`).toBeDefined();
        if (p.in === 'path') expect(p.required, id).toBe(true);
      }
      const page = parameters.find((p) => p.name === 'page');
      // The paged lists: projects and tasks (API-CONTRACT.md §7), a webhook's deliveries (§14).
      if (id === 'projects-list' || id === 'tasks-list' || id === 'webhooks-deliveries' || id === 'tokens-list') {
        expect(page).toMatchObject({ in: 'query', required: false, schema: { type: 'integer', minimum: 1, default: 1 } });
      } else {
        expect(page, id).toBeUndefined();
      }
      // API-CONTRACT.md §16: `{"token": ["tasks:write"]}`; any token: no scope named; no token (register, log in): none.
      const access: string = ACCESS[procedureOf(id)];
      expect(op.security, id).toEqual(access === 'public' ? [] : [{ token: access === 'token' ? [] : [access] }]);
      for (const requirement of op.security) for (const scope of requirement.token) expect(SCOPES, id).toContain(scope);
      // A scope of its own can be missing: 403 with the header that names it.
      if (access !== 'public' && access !== 'token') {
        expect(op.responses['403']?.['x-error-codes'], id).toEqual(['insufficient_scope']);
        expect(op.responses['403'].headers['WWW-Authenticate'], id).toEqual({ $ref: '#/components/headers/WWW-Authenticate' });
      }
    }
    expect(doc.components.securitySchemes.token).toMatchObject({ type: 'apiKey', in: 'header', name: 'Authorization' });
  });
});
