/**
 * openapi.json as a contract, read on its own (what the service answers against it is
 * test/http/contract.test.ts): every operation has an id, tag and summary; its examples are
 * accepted by its own schemas, with one example per documented error code; its parameters
 * have their types and defaults, and security is on all but register and login.
 */
import { describe, expect, it } from 'vitest';
import { doc, operations, schemaErrors, type Json } from '../helpers/openapi-document.js';
import { QUERY_PARAMETERS } from '../../src/core/list-query.js';

describe('openapi.json describes itself', () => {
  it('documents 31 operations, each with an operationId, tag and summary', () => {
    expect(operations).toHaveLength(31);
    for (const { id, op } of operations) {
      expect(id).toMatch(/^(users|projects|tasks|batch|events|webhooks)-[a-zA-Z]+$/);
      expect(op.tags, id).toEqual([id.split('-')[0]]);
      expect(op.summary, id).toBeTruthy();
      expect(op.description, id).toBeTruthy();
    }
    expect(doc.tags.map((t: Json) => t.name)).toEqual(['users', 'projects', 'tasks', 'batch', 'events', 'webhooks']);
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

  it('documents parameters with their types and defaults, and security on all but register and login', () => {
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
      if (id === 'projects-list' || id === 'tasks-list' || id === 'webhooks-deliveries') {
        expect(page).toMatchObject({ in: 'query', required: false, schema: { type: 'integer', minimum: 1, default: 1 } });
      } else {
        expect(page, id).toBeUndefined();
      }
      const isPublic = id === 'users-register' || id === 'users-authorize';
      expect(op.security, id).toEqual(isPublic ? [] : [{ token: [] }]);
    }
    expect(doc.components.securitySchemes.token).toMatchObject({ type: 'apiKey', in: 'header', name: 'Authorization' });
  });
});
