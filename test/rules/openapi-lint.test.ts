/**
 * openapi.json, as two independent linters read it (Redocly's `recommended` rules and
 * Spectral's `spectral:oas`), with the rules switched off in the committed configurations
 * (redocly.yaml, .spectral.yaml), each with its reason; and what the document must say that a
 * generated client needs to know before it asks (issue 10 §5). That the running app sends what
 * the document declares is in test/http/openapi-lint.test.ts.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createConfig, lint, parseYaml } from '@redocly/openapi-core';
import spectralCore from '@stoplight/spectral-core';
import spectralParsers from '@stoplight/spectral-parsers';
import { oas } from '@stoplight/spectral-rulesets';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const DOC_PATH = path.join(ROOT, 'openapi.json');
const text = readFileSync(DOC_PATH, 'utf8');
const doc = JSON.parse(text);
const operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([p, methods]) =>
  Object.entries(methods).map(([method, op]) => ({ path: p, method, op })),
);

describe('linters', () => {
  it("Redocly's recommended rules find nothing", async () => {
    const config = parseYaml(readFileSync(path.join(ROOT, 'redocly.yaml'), 'utf8')) as any;
    const problems = await lint({ ref: DOC_PATH, config: await createConfig(config) });
    expect(problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`)).toEqual([]);
  });

  it("Spectral's spectral:oas rules find nothing", async () => {
    const config = parseYaml(readFileSync(path.join(ROOT, '.spectral.yaml'), 'utf8')) as { extends: string[]; rules: Record<string, unknown> };
    expect(config.extends).toEqual(['spectral:oas']);
    const { Spectral, Document } = spectralCore as any;
    const spectral = new Spectral();
    spectral.setRuleset({ extends: [[oas, 'recommended']], rules: config.rules });
    const results = await spectral.run(new Document(text, (spectralParsers as any).Json, DOC_PATH));
    expect(results.map((r: any) => `${r.severity} ${r.code}: ${r.message} at ${r.path.join('.')}`)).toEqual([]);
  });
});

describe('what the document declares', () => {
  it('RateLimit-Policy, -Limit, -Remaining and -Reset on every answer of every operation', () => {
    for (const name of ['RateLimit-Policy', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']) {
      expect(doc.components.headers[name], name).toBeDefined();
      for (const { path: p, method, op } of operations) {
        for (const [status, response] of Object.entries(op.responses as Record<string, any>)) {
          expect(response.headers?.[name], `${name} on ${method} ${p} ${status}`).toEqual({ $ref: `#/components/headers/${name}` });
        }
      }
    }
  });

  it('registration and login say they need no token: security []', () => {
    const publicOps = operations.filter((o) => o.path === '/api/users' || o.path === '/api/users/authorizations');
    expect(publicOps).toHaveLength(2);
    for (const { op } of publicOps) expect(op.security).toEqual([]);
  });

  it('path ids and pages carry the pattern of their written form', () => {
    const params = operations.flatMap(({ op }) => (op.parameters ?? []) as any[]);
    const idsAndPages = params.filter((p) => p.name === 'id' || p.name === 'page');
    expect(idsAndPages.length).toBeGreaterThanOrEqual(9);
    for (const p of idsAndPages) {
      expect(p.schema.pattern, p.name).toBe('^[1-9][0-9]*$');
      const written = new RegExp(p.schema.pattern, 'u');
      expect(['1', '42'].every((v) => written.test(v))).toBe(true);
      expect(['01', '1e3', '+1', '0x1', ' 1', '0'].some((v) => written.test(v))).toBe(false);
    }
  });

  it('every text member of a request body refuses NUL and unpaired surrogates in its schema', () => {
    const texts: Array<[string, any]> = [];
    const walk = (schema: any, where: string) => {
      if (!schema || typeof schema !== 'object') return;
      if (schema.type === 'string' && !schema.enum) texts.push([where, schema]);
      for (const [key, sub] of Object.entries(schema.properties ?? {})) walk(sub, `${where}/${key}`);
      for (const sub of schema.anyOf ?? []) walk(sub, where);
    };
    for (const { path: p, method, op } of operations) {
      walk(op.requestBody?.content?.['application/json']?.schema, `${method} ${p} `);
    }
    // name, description (create, update), label (create, update), username and password (register, login)
    expect(texts.length).toBeGreaterThanOrEqual(8);
    for (const [where, schema] of texts) {
      if (where.endsWith('/state')) continue; // a state is matched against its enum, not stored
      expect(schema.pattern, where).toBeDefined();
      const pattern = new RegExp(schema.pattern, 'u');
      for (const bad of ['a\u0000b', 'x\ud800', '\udfffy']) expect(pattern.test(bad), `${where} takes ${JSON.stringify(bad)}`).toBe(false);
      expect(schema.description, where).toMatch(/no NUL character, no unpaired surrogate/);
    }
  });
});

describe('the document embedded in the docs page', () => {
  // swagger-ui-express writes the document into its page script with String.prototype.replace,
  // where "$`", "$'", "$&" and "$$" in the replacement are patterns: a description that wrote a
  // regular expression in backticks ("`^[1-9][0-9]*$`") broke the page's script.
  it('holds no replacement pattern of String.prototype.replace', () => {
    expect(text.match(/\$[`'&$]/g)).toBeNull();
  });
});
