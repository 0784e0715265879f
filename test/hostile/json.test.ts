/**
 * Hostile JSON text, property-based (fast-check), on both doors. The generators write the
 * request body as text, so that it can hold what a JS value cannot, and they produce:
 *
 *   - deep nesting: arrays and objects inside one another, 1 to 300 levels, alone or under
 *     a member of the wrapper, an ignored member, or an array element;
 *   - long arrays of mixed types: 50 to 1,500 elements mixing integers, fractions, strings
 *     (NUL, lone surrogate escapes, emoji), null, booleans, small objects and arrays;
 *   - huge numbers written raw: 30-digit integers, 1e400, -1e400, 1e-400, -0, 2^53 + 1;
 *   - duplicate keys: a member or a whole wrapper given twice, with values of different types
 *     (JSON.parse keeps the last one).
 *
 * Every generated value knows its own nesting depth, which is the oracle: a body nested more
 * than 64 levels is 400 `invalid_json` (API-CONTRACT.md §1); one within the limit is never
 * `invalid_json` (it is valid JSON). A body over 100 KiB (a long array can be) is 413 first. Every answer is a 2xx or the error
 * envelope with a 4xx (never a 5xx, never a hang), and a refused request changes no row.
 *
 * A failure prints its seed and path; see test/helpers/fast-check-setup.ts to replay it.
 */
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH } from '../../src/core/limits.js';
import { withDeadline } from '../helpers/hostile.js';
import { useTestApp } from '../helpers/test-app.js';

const MAX_DEPTH = MAX_JSON_DEPTH;
const RUNS = Number(process.env.HOSTILE_RUNS ?? 40);

interface Json {
  text: string;
  /** Levels of arrays and objects: 0 for a scalar. */
  depth: number;
}

const scalar = (text: string): Json => ({ text, depth: 0 });

const HUGE_NUMBERS = ['123456789012345678901234567890', '-123456789012345678901234567890', '1e400', '-1e400', '1e-400', '-0', '9007199254740993', '2147483648', '1.5e308', '0.0000000000000000000001'];
const STRINGS = ['"a"', '""', '"\\u0000"', '"\\ud800"', '"x\\udfffy"', '"😀"', '"started"', '"planned"', '"1"', '" 1 "', '"0x10"'];

const scalarArb: fc.Arbitrary<Json> = fc.oneof(
  fc.integer({ min: -5, max: 2_000_000_000 }).map((n) => scalar(String(n))),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => scalar(JSON.stringify(n))),
  fc.constantFrom(...HUGE_NUMBERS).map(scalar),
  fc.constantFrom(...STRINGS).map(scalar),
  fc.string({ maxLength: 8 }).map((s) => scalar(JSON.stringify(s))),
  fc.constantFrom('null', 'true', 'false').map(scalar),
);

/** `levels` arrays or objects around `inner`. */
const nested = fc
  .tuple(fc.integer({ min: 1, max: 300 }), fc.constantFrom('array', 'object', 'mixed'), scalarArb)
  .map(([levels, kind, inner]): Json => {
    let text = inner.text;
    for (let i = 0; i < levels; i++) {
      const asArray = kind === 'array' || (kind === 'mixed' && i % 2 === 0);
      text = asArray ? `[${text}]` : `{"k${i % 3}":${text}}`;
    }
    return { text, depth: levels };
  });

const smallContainer = fc.oneof(
  fc.array(scalarArb, { maxLength: 3 }).map((items): Json => ({ text: `[${items.map((i) => i.text).join(',')}]`, depth: 1 })),
  fc.array(fc.tuple(fc.constantFrom('a', 'b', 'label'), scalarArb), { maxLength: 3 }).map(
    (members): Json => ({ text: `{${members.map(([k, v]) => `"${k}":${v.text}`).join(',')}}`, depth: 1 }),
  ),
);

const longMixedArray = fc
  .tuple(fc.integer({ min: 50, max: 1_500 }), fc.array(fc.oneof(scalarArb, smallContainer), { minLength: 1, maxLength: 12 }))
  .map(([length, pool]): Json => {
    const items = Array.from({ length }, (_, i) => pool[i % pool.length]!);
    return { text: `[${items.map((i) => i.text).join(',')}]`, depth: 1 + Math.max(...items.map((i) => i.depth)) };
  });

const hostileValue: fc.Arbitrary<Json> = fc.oneof(
  { weight: 3, arbitrary: scalarArb },
  { weight: 3, arbitrary: nested },
  { weight: 2, arbitrary: longMixedArray },
  { weight: 1, arbitrary: smallContainer },
);

/** An object's text from its members, duplicates kept as written. */
const objectText = (members: Array<[string, Json]>): Json => ({
  text: `{${members.map(([k, v]) => `${JSON.stringify(k)}:${v.text}`).join(',')}}`,
  depth: 1 + Math.max(0, ...members.map(([, v]) => v.depth)),
});

/** A body for a wrapper and its fields: each field valid or hostile, some given twice, plus extras. */
function bodyArb(wrapper: string, fields: Record<string, fc.Arbitrary<Json>>): fc.Arbitrary<Json> {
  const field = fc.constantFrom(...Object.keys(fields)).chain((name) =>
    fc.oneof(fields[name]!, hostileValue).map((value): [string, Json] => [name, value]),
  );
  const inner = fc
    .tuple(
      fc.array(field, { maxLength: 4 }), // the same name may come twice: duplicate keys
      fc.array(fc.tuple(fc.constantFrom('$where', 'extra', '__proto__'), hostileValue), { maxLength: 1 }),
    )
    .map(([members, extras]) => objectText([...members, ...extras]));
  return fc
    .tuple(inner, fc.option(hostileValue, { nil: undefined }), fc.option(inner, { nil: undefined }), fc.option(hostileValue, { nil: undefined }))
    .map(([wrapped, sibling, duplicateWrapper, whole]) => {
      if (whole && whole.depth > 0 && whole.text.length % 5 === 0) return whole; // sometimes the body is the hostile value itself
      const members: Array<[string, Json]> = [[wrapper, wrapped]];
      if (sibling) members.push(['ignored', sibling]);
      if (duplicateWrapper) members.push([wrapper, duplicateWrapper]);
      return objectText(members);
    });
}

const app = useTestApp();
let token: string;
let projectId: number;
let taskId: number;
beforeAll(async () => {
  ({ token } = await app.register());
  projectId = (await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Victim' } } })).body.data.id;
  taskId = (await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'Victim', project_id: projectId } } })).body.data.id;
});

async function digest(): Promise<string> {
  const [row] = await app.orm.em.fork().execute<{ d: string }[]>(
    `select md5(coalesce((select string_agg(p::text, ',' order by id) from projects p), '') ||
                coalesce((select string_agg(t::text, ',' order by id) from tasks t), '')) as d`,
  );
  return row!.d;
}

const text = (s: string) => scalar(JSON.stringify(s));
const ENDPOINTS = [
  { method: 'POST', path: () => '/api/users/me/projects', procedure: 'projects.create', wrapper: 'project', fields: { name: fc.constantFrom('Deep_1', 'a b').map(text) } },
  { method: 'POST', path: () => '/api/users/me/tasks', procedure: 'tasks.create', wrapper: 'task', fields: { label: fc.constant(text('x')), planned_at: fc.constant(scalar('1800000000')) } },
  { method: 'PATCH', path: () => `/api/projects/${projectId}`, procedure: 'projects.update', wrapper: 'project', fields: { description: fc.constant(text('d')) } },
  { method: 'PUT', path: () => `/api/tasks/${taskId}/state`, procedure: 'tasks.changeState', wrapper: 'task', fields: { state: fc.constantFrom(text('planned'), text('bogus')) } },
  { method: 'PUT', path: () => `/api/tasks/${taskId}/order`, procedure: 'tasks.reorder', wrapper: 'task', fields: { order: fc.constant(scalar('1')) } },
] as const;

/** Over the 100 KiB body limit: 413 comes first, whatever the nesting. */
const tooLarge = (body: string) => Buffer.byteLength(body) > 100 * 1024;

const short = (s: string) => (s.length > 160 ? `${s.slice(0, 160)}… (${s.length} chars)` : s);

describe.each(ENDPOINTS)('$method $procedure', (endpoint) => {
  const bodies = bodyArb(endpoint.wrapper, endpoint.fields as Record<string, fc.Arbitrary<Json>>);

  it('REST: deep bodies are invalid_json, all others get an answer of the contract, and a refusal changes nothing', async () => {
    await fc.assert(
      fc.asyncProperty(bodies, async (body) => {
        const before = await digest();
        const res = await withDeadline(`REST ${short(body.text)}`, fetch(app.baseUrl + endpoint.path(), {
          method: endpoint.method,
          headers: { Authorization: token, 'Content-Type': 'application/json' },
          body: body.text,
        }));
        const answer = await res.text();
        const what = `${endpoint.method} ${endpoint.path()} depth ${body.depth}: ${short(body.text)} -> ${res.status} ${short(answer)}`;
        expect(res.status, what).toBeLessThan(500);
        if (tooLarge(body.text)) {
          expect(res.status, what).toBe(413);
        } else if (res.status >= 300) {
          const errors = JSON.parse(answer).errors as Array<{ code: string }>;
          expect(errors.length, what).toBeGreaterThan(0);
          expect(errors[0]!.code === 'invalid_json', what).toBe(body.depth > MAX_DEPTH);
          expect(await digest(), `a refused request changed rows: ${what}`).toBe(before);
        } else {
          expect(body.depth, what).toBeLessThanOrEqual(MAX_DEPTH);
        }
      }),
      { numRuns: RUNS },
    );
  }, 120_000);

  it('tRPC: the same bodies as raw calls get the same verdicts', async () => {
    await fc.assert(
      fc.asyncProperty(bodies, async (body) => {
        const before = await digest();
        const id = endpoint.path().match(/\/(\d+)/)?.[1];
        // The procedure's input is the body with the path id merged in, under superjson's "json"
        // (which the limit does not count, as it does not on /api: the input's own levels).
        const input = id && body.text.startsWith('{') && body.text.length > 2 ? `{"id":${id},${body.text.slice(1)}` : body.text;
        const depth = id && body.text.startsWith('{') ? Math.max(1, body.depth) : body.depth;
        const res = await withDeadline(`tRPC ${short(input)}`, fetch(`${app.baseUrl}/trpc/${endpoint.procedure}`, {
          method: 'POST',
          headers: { Authorization: token, 'Content-Type': 'application/json' },
          body: `{"json":${input}}`,
        }));
        const answer = await res.text();
        const what = `${endpoint.procedure} depth ${depth}: ${short(input)} -> ${res.status} ${short(answer)}`;
        expect(res.status, what).toBeLessThan(500);
        if (tooLarge(`{"json":${input}}`)) {
          expect(res.status, what).toBe(413);
        } else if (res.status >= 300) {
          const data = JSON.parse(answer).error?.json?.data;
          expect(data?.errors?.length, what).toBeGreaterThan(0);
          expect(data.code === 'invalid_json', what).toBe(depth > MAX_DEPTH);
          expect(await digest(), `a refused request changed rows: ${what}`).toBe(before);
        } else {
          expect(depth, what).toBeLessThanOrEqual(MAX_DEPTH);
        }
      }),
      { numRuns: RUNS },
    );
  }, 120_000);
});
