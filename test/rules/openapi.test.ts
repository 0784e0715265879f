/**
 * openapi.json against the code: what the router generates, a valid OpenAPI document, the
 * error envelope and the success status of every operation. What the running app serves of
 * it is in test/http/openapi.test.ts.
 */
import { readFileSync } from 'node:fs';
import SwaggerParser from '@apidevtools/swagger-parser';
import { describe, expect, it } from 'vitest';
import { buildOpenApiDocument, serializeOpenApiDocument } from '../../src/openapi/document.js';
import { ACCESS } from '../../src/app/scopes.js';

const committedPath = new URL('../../openapi.json', import.meta.url);

describe('openapi.json', () => {
  it('is what the router generates (run `npm run openapi` after changing a procedure)', () => {
    const committed = readFileSync(committedPath, 'utf8');
    expect(serializeOpenApiDocument(buildOpenApiDocument())).toBe(committed);
  });

  it('is a valid OpenAPI document', async () => {
    const doc = JSON.parse(readFileSync(committedPath, 'utf8'));
    await expect(SwaggerParser.validate(doc)).resolves.toBeTruthy();
  });

  it('documents every operation with the error envelope and the right success status', () => {
    const doc = buildOpenApiDocument() as any;
    const operations = Object.entries(doc.paths).flatMap(([path, methods]: [string, any]) =>
      Object.entries(methods).map(([method, op]: [string, any]) => ({ path, method, op })),
    );
    // Every operation of the table of scopes but the tRPC subscription (REST's is events.list with Accept: text/event-stream).
    expect(operations).toHaveLength(Object.keys(ACCESS).length - 1);
    for (const { method, path, op } of operations) {
      const statuses = Object.keys(op.responses);
      const success = statuses.filter((s) => s.startsWith('2'));
      expect(success, `${method} ${path}`).toHaveLength(1);
      if (method === 'delete') expect(success).toEqual(['204']);
      // A POST creates (201), but for the batch, which answers its operations' statuses inside a 200 (API-CONTRACT.md §15),
      // a webhook's replay and test, which are accepted (202) and delivered afterwards (§14), and the account's deletion.
      if (method === 'post') {
        const accepted = path === '/api/webhooks/{id}/replay' || path === '/api/webhooks/{id}/test';
        // The account's deletion is a POST so that the password travels in the body (§16): it creates nothing, 204.
        const expected = path === '/api/batch' ? '200' : accepted ? '202' : path === '/api/users/me/deletion' ? '204' : '201';
        expect(success, `${method} ${path}`).toEqual([expected]);
      }
      for (const status of statuses.filter((s) => !s.startsWith('2') && s !== '304')) {
        // Each error response is described by its status's name and its codes (every 403 once read "undefined: …").
        expect(op.responses[status].description, `${method} ${path} ${status}`).toMatch(/^[A-Z][a-z]+( [a-z]+)*: `[a-z_]+`/);
        // A 410 cursor_expired also gives the id to restart from (API-CONTRACT.md §10), a 403 the scope it needs (§16).
        const envelope = status === '410' ? 'CursorExpired' : status === '403' ? 'InsufficientScope' : 'ErrorEnvelope';
        expect(op.responses[status].content['application/json'].schema).toEqual({ $ref: `#/components/schemas/${envelope}` });
      }
      // 304 (If-None-Match on reads of projects and tasks) has no body, and carries the ETag.
      if (statuses.includes('304')) {
        expect(method, path).toBe('get');
        expect(op.responses['304'].content, path).toBeUndefined();
        expect(op.responses['304'].headers.ETag, path).toEqual({ $ref: '#/components/headers/ETag' });
      }
      const isPublic = path === '/api/users' || path === '/api/users/authorizations';
      // The public ones say so with an empty requirement (not by leaving it out); the others name their scope, if any
      // (test/rules/contract.test.ts compares each with its row of the table).
      expect(op.security, `${method} ${path} security`).toEqual(isPublic ? [] : [{ token: expect.any(Array) }]);
    }
  });
});
