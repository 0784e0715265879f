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
import { RE2JS } from 're2js';
import { describe, expect, it } from 'vitest';
import { schemaErrors } from '../helpers/openapi-document.js';
import { BATCH_OPERATIONS } from '../../src/batch/batch.schema.js';
import { dayParam } from '../../src/core/list-query.js';
import { PROJECT_TRANSITIONS } from '../../src/projects/project.lifecycle.js';
import { TASK_ACTIONS } from '../../src/tasks/task.lifecycle.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const DOC_PATH = path.join(ROOT, 'openapi.json');
const text = readFileSync(DOC_PATH, 'utf8');
const doc = JSON.parse(text);
const operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([p, methods]) =>
  Object.entries(methods).map(([method, op]) => ({ path: p, method, op })),
);

/**
 * A whole lint of the document is CPU-bound (Spectral takes about 20 s alone on two cores) and
 * runs beside other test files: it gets more than the default 30 s, while a hang still fails.
 */
const LINT_TIMEOUT_MS = 120_000;

describe('linters', () => {
  it("Redocly's recommended rules find nothing", async () => {
    const config = parseYaml(readFileSync(path.join(ROOT, 'redocly.yaml'), 'utf8')) as any;
    const problems = await lint({ ref: DOC_PATH, config: await createConfig(config) });
    expect(problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`)).toEqual([]);
  }, LINT_TIMEOUT_MS);

  it("Spectral's spectral:oas rules find nothing", async () => {
    const config = parseYaml(readFileSync(path.join(ROOT, '.spectral.yaml'), 'utf8')) as { extends: string[]; rules: Record<string, unknown> };
    expect(config.extends).toEqual(['spectral:oas']);
    const { Spectral, Document } = spectralCore as any;
    const spectral = new Spectral();
    spectral.setRuleset({ extends: [[oas, 'recommended']], rules: config.rules });
    const results = await spectral.run(new Document(text, (spectralParsers as any).Json, DOC_PATH));
    expect(results.map((r: any) => `${r.severity} ${r.code}: ${r.message} at ${r.path.join('.')}`)).toEqual([]);
  }, LINT_TIMEOUT_MS);
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

  it('every text member of a request body refuses NUL in its pattern and says the surrogate rule in its description', () => {
    const texts: Array<[string, any]> = [];
    const seen = new Set<unknown>();
    const walk = (schema: any, where: string) => {
      if (!schema || typeof schema !== 'object' || seen.has(schema)) return;
      seen.add(schema);
      if (typeof schema.$ref === 'string') return walk(doc.components.schemas[schema.$ref.split('/').pop()], `${where}(${schema.$ref.split('/').pop()})`);
      if (schema.type === 'string' && !schema.enum && schema.const === undefined) texts.push([where, schema]);
      for (const [key, sub] of Object.entries(schema.properties ?? {})) walk(sub, `${where}/${key}`);
      for (const sub of [...(schema.anyOf ?? []), ...(schema.oneOf ?? [])]) walk(sub, where);
      walk(schema.items, `${where}/*`);
    };
    for (const { path: p, method, op } of operations) {
      walk(op.requestBody?.content?.['application/json']?.schema, `${method} ${p} `);
      // And the text of a query: `q` (the others are enums, or patterns of their own).
      for (const parameter of op.parameters ?? []) if (parameter.in === 'query') walk(parameter.schema, `${method} ${p} ?${parameter.name}`);
    }
    // name, description (create, update), label (create, update), username and password (register, login),
    // the same in each operation of a batch, its refs, and the query's `q`
    expect(texts.length).toBeGreaterThanOrEqual(8);
    expect(texts.map(([where]) => where)).toEqual(expect.arrayContaining([
      'get /api/users/me/tasks ?q',
      'post /api/batch /operations/*(BatchTasksCreate)/input/task/label',
      'post /api/batch /operations/*(BatchProjectsUpdate)/input/project/description',
    ]));
    for (const [where, schema] of texts) {
      if (where.endsWith('/state')) continue; // a state is matched against its enum, not stored
      if (where.endsWith('/if_match')) continue; // an operation's If-Match is compared with entity tags, not stored: any odd value is 412
      expect(schema.pattern, where).toBeDefined();
      // Under every engine: JavaScript's (with and without the u flag) and RE2's.
      for (const pattern of [new RegExp(schema.pattern, 'u'), new RegExp(schema.pattern), RE2JS.compile(schema.pattern)]) {
        expect(pattern.test('a\u0000b'), `${where} takes NUL (${String(pattern)})`).toBe(false);
      }
      // An unpaired surrogate can only be written as a JSON escape; no pattern RE2 or Rust
      // reads can name one, so the rule is the description's (the service refuses it: 422),
      // unless the pattern allows only characters no surrogate is (a time zone name: ASCII).
      if (new RegExp(schema.pattern, 'u').test('\ud800')) expect(schema.description, where).toMatch(/no NUL character, no unpaired surrogate/);
    }
  });
});

describe('the operations of a batch, as a generated client reads them', () => {
  const body = doc.paths['/api/batch'].post.requestBody.content['application/json'].schema;
  const items = body.properties.operations.items;
  const component = (ref: string) => doc.components.schemas[ref.split('/').pop()!];
  const batchErrors = (operation: unknown) => schemaErrors('batch body', body, { operations: [operation] });

  it("are a oneOf told apart by op, a branch per write procedure, each with that procedure's input: its REST body, the path id as id", () => {
    expect(items.discriminator.propertyName).toBe('op');
    expect(Object.keys(items.discriminator.mapping)).toEqual(Object.keys(BATCH_OPERATIONS));
    expect(items.oneOf).toEqual(Object.values(items.discriminator.mapping).map(($ref) => ({ $ref })));
    for (const [op, ref] of Object.entries(items.discriminator.mapping as Record<string, string>)) {
      const branch = component(ref);
      expect(branch.properties.op, op).toMatchObject({ type: 'string', const: op });
      expect(branch.required, op).toEqual(['op', 'input']);
      expect(Object.hasOwn(branch.properties, 'ref'), `${op} takes a ref`).toBe('creates' in BATCH_OPERATIONS[op as keyof typeof BATCH_OPERATIONS]);
      const alone = operations.find(({ op: o }) => o.operationId === op.replace('.', '-'))!;
      const restBody = alone.op.requestBody?.content['application/json'].schema ?? { properties: {} };
      const input = branch.properties.input;
      const takesId = alone.path.includes('{id}');
      expect(Object.keys(input.properties), op).toEqual([...(takesId ? ['id'] : []), ...Object.keys(restBody.properties)]);
      expect(input.required, op).toEqual([...(takesId ? ['id'] : []), ...(restBody.required ?? [])]);
    }
  });

  it('accept each operation with its own input, refs where ids may be refs, and refuse an input of another shape', () => {
    const good = [
      { op: 'projects.create', ref: 'p', input: { project: { name: 'Trip' } } },
      { op: 'projects.update', input: { id: { ref: 'p' }, project: { description: 'Away' } }, if_match: '"p1.2.x"' },
      { op: 'projects.changeState', input: { id: 3, project: { state: 'started', due_at: 1_781_524_800 } } },
      { op: 'projects.delete', input: { id: { ref: 'p' } } },
      { op: 'tasks.create', ref: 't', input: { task: { label: 'Book train', project_id: { ref: 'p' } } } },
      { op: 'tasks.update', input: { id: { ref: 't' }, task: { project_id: null } } },
      { op: 'tasks.changeState', input: { id: 7, task: { state: 'planned' } } },
      { op: 'tasks.reorder', input: { id: { ref: 't' }, task: { order: 1 } } },
    ];
    for (const operation of good) expect(batchErrors(operation), JSON.stringify(operation)).toBeNull();
    const bad = [
      { op: 'tasks.create', input: { project: { name: 'Trip' } } },
      { op: 'tasks.create', input: { task: { label: 'a\u0000b' } } },
      { op: 'tasks.create', input: { task: { label: 'x', project_id: { ref: 1 } } } },
      { op: 'projects.delete', input: {} },
      { op: 'projects.delete', input: { id: 0 } },
      { op: 'projects.changeState', input: { id: 1, project: { state: 'started', other: 1 } } },
      { op: 'tasks.reorder', input: { id: { ref: 't', more: 1 }, task: { order: 1 } } },
      { op: 'tasks.reorder' },
      { op: 'tasks.list', input: {} },
    ];
    for (const operation of bad) expect(batchErrors(operation), JSON.stringify(operation)).not.toBeNull();
  });
});

describe('planned_on, as its pattern writes it', () => {
  const parameter = doc.paths['/api/users/me/tasks'].get.parameters.find((p: any) => p.name === 'planned_on');
  const pattern = new RegExp(parameter.schema.pattern, 'u');

  it('takes today, tomorrow and dates with a month 01 to 12 and a day 01 to 31; what it refuses, the service refuses too', () => {
    for (const day of ['today', 'tomorrow', '2026-06-15', '2024-02-29', '2026-12-31', '0001-01-01']) {
      expect(pattern.test(day), day).toBe(true);
    }
    for (const day of ['Today', ' today', '2026-13-01', '2026-00-10', '2026-06-32', '2026-06-00', '2026-6-1', '26-06-15', '2026-06-15T00:00', '']) {
      expect(pattern.test(day), day).toBe(false);
      expect(dayParam.safeParse(day).success, day).toBe(false);
    }
  });
});

describe('patterns as tools in other languages read them', () => {
  /** Every `pattern` of the document, with where it is. */
  const patterns: Array<[string, string]> = [];
  const walk = (node: unknown, where: string) => {
    if (Array.isArray(node)) node.forEach((n, i) => walk(n, `${where}/${i}`));
    else if (node && typeof node === 'object') {
      for (const [key, value] of Object.entries(node)) {
        if (key === 'pattern' && typeof value === 'string') patterns.push([where, value]);
        else walk(value, `${where}/${key}`);
      }
    }
  };
  walk(doc, '#');

  it('every pattern compiles under RE2 (the engine of Go, Rust-like and RE2-based validators) and ECMA-262 with the u and v flags', () => {
    expect(patterns.length).toBeGreaterThanOrEqual(10);
    for (const [where, pattern] of patterns) {
      expect(() => RE2JS.compile(pattern), `${where}: ${pattern}`).not.toThrow();
      for (const flags of ['', 'u', 'v']) expect(() => new RegExp(pattern, flags), `${where}: ${pattern} /${flags}`).not.toThrow();
      // The portable subset: no \u escapes (RE2 and Rust read \x{..}), no lookaround or backreference.
      expect(pattern, where).not.toMatch(/\\u|\(\?[=!<]|\\[1-9]/);
    }
  });

  it('every pattern accepts and refuses the same strings under RE2 as under JavaScript', () => {
    const samples = ['', 'a', 'Coffee', 'coffee-roasting_2', 'a b', '1', '01', '0', '42', '1e3', 'é', '😀', 'a\u0000b', 'x'.repeat(300), '-', '_'];
    for (const [where, pattern] of patterns) {
      const re2 = RE2JS.compile(pattern);
      const js = new RegExp(pattern, 'u');
      for (const sample of samples) expect(re2.test(sample), `${where}: ${pattern} on ${JSON.stringify(sample)}`).toBe(js.test(sample));
    }
  });
});

describe('the state changes, as the document says them', () => {
  const body = (p: string) => doc.paths[p].put.requestBody.content['application/json'].schema;
  const wrapper = (p: string, name: string) => {
    const schema = body(p);
    return (schema.properties ?? doc.components.schemas[schema.$ref?.split('/').pop()]?.properties)[name];
  };

  it('both bodies are closed (additionalProperties false): any other member is 422 cannot_be_set', () => {
    expect(wrapper('/api/projects/{id}/state', 'project').additionalProperties).toBe(false);
    expect(wrapper('/api/tasks/{id}/state', 'task').additionalProperties).toBe(false);
  });

  it('the task state change names every effect of every action of TASK_ACTIONS', () => {
    const lines = (doc.paths['/api/tasks/{id}/state'].put.description as string).split('\n');
    for (const action of TASK_ACTIONS) {
      const line = lines.find((l) => l.startsWith(`- ${action.action}: `));
      expect(line, action.action).toBeDefined();
      expect(line).toContain(`${action.from.join('/')} → ${action.to}`);
      for (const date of Object.keys(action.dates)) expect(line, `${action.action} ${date}`).toContain(date);
      if (action.counts) expect(line).toContain('plannedCount + 1');
    }
  });

  it('the project state change names every transition of PROJECT_TRANSITIONS with its conditions and effects', () => {
    const lines = (doc.paths['/api/projects/{id}/state'].put.description as string).split('\n');
    for (const t of PROJECT_TRANSITIONS) {
      const line = lines.find((l) => l.startsWith(`- ${t.action}: ${t.from} → ${t.to}`));
      expect(line, t.action).toBeDefined();
      if (t.dueAt !== 'forbidden') expect(line).toContain(`\`due_at\` ${t.dueAt}`);
      if (t.finishedAt !== 'forbidden') expect(line).toContain(`\`finished_at\` ${t.finishedAt}`);
      expect(line!.includes('started projects')).toBe(t.countsAsStarted);
      if (t.tasks) expect(line).toContain(`its ${t.tasks.states.join('/')} tasks become`);
      for (const date of Object.keys(t.dates)) expect(line, `${t.action} ${date}`).toContain(date);
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
