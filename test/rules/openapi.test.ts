/**
 * openapi.json against the code: what the router generates, a valid OpenAPI document, the
 * error envelope and the success status of every operation. What the running app serves of
 * it is in test/http/openapi.test.ts.
 */
import { readFileSync } from 'node:fs';
import SwaggerParser from '@apidevtools/swagger-parser';
import { describe, expect, it } from 'vitest';
import { buildOpenApiDocument, serializeOpenApiDocument } from '../../src/openapi/document.js';

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
    expect(operations).toHaveLength(30);
    for (const { method, path, op } of operations) {
      const statuses = Object.keys(op.responses);
      const success = statuses.filter((s) => s.startsWith('2'));
      expect(success, `${method} ${path}`).toHaveLength(1);
      if (method === 'delete') expect(success).toEqual(['204']);
      // A POST creates (201), but for the batch, which answers its operations' statuses inside a 200 (API-CONTRACT.md §15),
      // and a webhook's replay and test, which are accepted (202) and delivered afterwards (§14).
      if (method === 'post') {
        const accepted = path === '/api/webhooks/{id}/replay' || path === '/api/webhooks/{id}/test';
        expect(success, `${method} ${path}`).toEqual([path === '/api/batch' ? '200' : accepted ? '202' : '201']);
      }
      for (const status of statuses.filter((s) => !s.startsWith('2') && s !== '304')) {
        // A 410 cursor_expired also gives the id to restart from (API-CONTRACT.md §10).
        const envelope = status === '410' ? 'CursorExpired' : 'ErrorEnvelope';
        expect(op.responses[status].content['application/json'].schema).toEqual({ $ref: `#/components/schemas/${envelope}` });
      }
      // 304 (If-None-Match on reads of projects and tasks) has no body, and carries the ETag.
      if (statuses.includes('304')) {
        expect(method, path).toBe('get');
        expect(op.responses['304'].content, path).toBeUndefined();
        expect(op.responses['304'].headers.ETag, path).toEqual({ $ref: '#/components/headers/ETag' });
      }
      const isPublic = path === '/api/users' || path === '/api/users/authorizations';
      // The public ones say so with an empty requirement (not by leaving it out).
      expect(op.security, `${method} ${path} security`).toEqual(isPublic ? [] : [{ token: [] }]);
    }
  });
});
