/**
 * Hostile batches (API-CONTRACT.md §1, §2, §11, §15) on both doors, the shape of a batch:
 * POST /api/batch and the tRPC procedure batch.apply, raw HTTP with superjson's `{"json": …}`
 * written by hand. Every refusal must be a 4xx in the contract's envelope (never a 5xx, never
 * a hang) with the pointer the contract gives, and must keep nothing: the user's projects,
 * tasks, change-log events, users row (last_event_seq) and idempotency keys, read with SQL,
 * are the same before and after, and so are the other user's, whose ids serve as foreign ids
 * (the harness: test/helpers/hostile.ts and test/helpers/hostile-batch.ts).
 *
 * Covered: the list of operations (empty, not an array, of non-objects, nested, 101 of them,
 * a list far over the limit, exactly 100 operations in exactly 100 KiB and one byte more);
 * `op` (missing, of the wrong type, every near miss of a write procedure's name); `ref`
 * (empty, 65 characters, NUL, lone surrogates, duplicate, on a non-create, before its
 * definition, of the wrong kind, a ref object that is not `{"ref": name}`); `if_match` (wrong
 * types, huge and odd values); `input` (missing, wrong types, wrong wrapper, nesting at and
 * over the 64-level limit, `__proto__` members, duplicate keys in the JSON text, odd numbers
 * as ids, other users' ids). The tRPC door's own cases and Idempotency-Key are in
 * batch-trpc.test.ts; the two properties in batch-values.test.ts.
 *
 * A list of thousands of non-operations in 100 KiB is refused on its length alone: one
 * too_long, not one error per element (it was about 7 MB of errors for 100 KiB).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_OPERATIONS } from '../../src/batch/batch.schema.js';
import { BODY_LIMIT_BYTES, MAX_JSON_DEPTH } from '../../src/core/limits.js';
import { describeAfterTheRun, expectContract, judgeTrpcHttp, newVictim, other, short, toJsonText, type Victim, withDeadline } from '../helpers/hostile.js';
import { type Answer, arrays, create, depthOf, DOORS, type Expected, framed, fresh, landed, many, objects, pairs, parse, post, refused, rowsOf, useHostileBatchApp } from '../helpers/hostile-batch.js';

const app = useHostileBatchApp();

// ---------------------------------------------------------------------------------------------
// The list of operations
// ---------------------------------------------------------------------------------------------

describe.each(DOORS)('the list of operations, through %s', (door) => {
  let victim: Victim;
  beforeAll(async () => {
    victim = await newVictim();
  });

  it('refuses a body or list of the wrong shape with 422 on /operations, and keeps nothing', async () => {
    const good = create('never');
    for (const [body, errors] of [
      ['{}', [['parameter_missing', '/operations']]],
      ['null', [['parameter_missing', '/operations']]],
      ['[]', [['parameter_missing', '/operations']]],
      ['7', [['parameter_missing', '/operations']]],
      ['"operations"', [['parameter_missing', '/operations']]],
      [toJsonText([good]), [['parameter_missing', '/operations']]],
      ['{"Operations":[]}', [['parameter_missing', '/operations']]],
      ['{"operations":[]}', [['invalid', '/operations']]],
      ['{"operations":null}', [['invalid', '/operations']]],
      ['{"operations":0}', [['invalid', '/operations']]],
      ['{"operations":-1.5}', [['invalid', '/operations']]],
      ['{"operations":1e400}', [['invalid', '/operations']]],
      ['{"operations":""}', [['invalid', '/operations']]],
      ['{"operations":"[]"}', [['invalid', '/operations']]],
      ['{"operations":true}', [['invalid', '/operations']]],
      [toJsonText({ operations: { 0: good } }), [['invalid', '/operations']]],
      [toJsonText({ operations: { length: 1, 0: good } }), [['invalid', '/operations']]],
    ] as Array<[string, Array<[string, string]>]>) {
      await refused(door, victim, body, { status: 422, errors });
    }
  });

  it('refuses elements that are not operation objects, each at its index, with the good ones beside them not run', async () => {
    await refused(door, victim, { operations: [null] }, { status: 422, errors: [['invalid', '/operations/0']] });
    await refused(door, victim, { operations: [create('a'), 1, 'tasks.create', true, null, [], [create('nested')], [[[]]], create('b')] }, {
      status: 422,
      errors: [1, 2, 3, 4, 5, 6, 7].map((i) => ['invalid', `/operations/${i}`] as [string, string]),
    });
    // An array of operations inside the list is not flattened into it.
    await refused(door, victim, { operations: [[create('nested1'), create('nested2')]] }, { status: 422, errors: [['invalid', '/operations/0']] });
  });

  it(`refuses ${MAX_OPERATIONS + 1} good operations as one too_long on /operations, before any runs`, async () => {
    await refused(door, victim, { operations: many(MAX_OPERATIONS + 1) }, { status: 422, errors: [['too_long', '/operations']] });
    // Bad ones among them do not hide the length.
    await refused(door, victim, { operations: [...many(MAX_OPERATIONS), { op: 'tasks.list' }, 5] }, { status: 422, some: [['too_long', '/operations']] });
  });

  it('serves exactly 100 operations in a body of exactly 100 KiB, and refuses one byte more with 413', async () => {
    /** A batch of 100 creates whose labels (at most 1,000 characters) fill the body to `bytes`. */
    const exactly = (bytes: number) => {
      const skeleton = framed(door, JSON.stringify({ operations: Array.from({ length: MAX_OPERATIONS }, () => create('')) }));
      const spare = bytes - Buffer.byteLength(skeleton);
      const labels = Array.from({ length: MAX_OPERATIONS }, (_, i) => `${i}:`.padEnd(Math.floor(spare / MAX_OPERATIONS) + (i < spare % MAX_OPERATIONS ? 1 : 0), 'L'));
      const text = JSON.stringify({ operations: labels.map((label) => create(label)) });
      expect(Buffer.byteLength(framed(door, text))).toBe(bytes);
      expect(Math.max(...labels.map((l) => l.length))).toBeLessThanOrEqual(1_000);
      return { text, labels };
    };
    const over = exactly(BODY_LIMIT_BYTES + 1);
    await refused(door, victim, over.text, { status: 413, errors: [['payload_too_large', undefined]] });

    const before = await rowsOf(victim.id);
    const { text, labels } = exactly(BODY_LIMIT_BYTES);
    const data = await landed(door, victim, text);
    expect(data.map((d) => d.status)).toEqual(labels.map(() => 201));
    expect(data.map((d) => d.body.data.attributes.label)).toEqual(labels);
    const after = await rowsOf(victim.id);
    expect(after.tasks.length - before.tasks.length).toBe(MAX_OPERATIONS);
    const events = after.events.slice(before.events.length);
    expect(events.map((e: any) => `${e.type}:${e.data.id}`)).toEqual(data.map((d) => `task.created:${d.body.data.id}`));
    expect(Number(after.user[0]!.last_event_seq)).toBe(Number(before.user[0]!.last_event_seq) + MAX_OPERATIONS);
  });

  /** 50,000 zeros: the most elements 100 KiB can hold. */
  const farOver = `{"operations":[${Array.from({ length: 50_000 }, () => '0').join(',')}]}`;

  it('answers a list far over the limit (50,000 non-objects in 100 KiB) with 422 too_long, in time, keeping nothing', async () => {
    const answer = await refused(door, victim, farOver, { status: 422, some: [['too_long', '/operations']] });
    expect(answer.errors.every((e) => e.status === '422')).toBe(true);
  });

  // It was answered with 50,001 errors (one "invalid" per element, then too_long), about 7 MB
  // for a 100 KiB request; as a tRPC batch over its cap (test/http/trpc-door.test.ts), it is one.
  it('answers a list far over the limit with the one too_long, not one error per element', async () => {
    const answer = await post(door, victim.token, farOver);
    expect(pairs(answer.errors)).toEqual([['too_long', '/operations']]);
  });
});

// ---------------------------------------------------------------------------------------------
// op, ref, if_match
// ---------------------------------------------------------------------------------------------

/** Near misses of the write procedures' names, and procedures a batch does not run. */
const UNKNOWN_OPS = [
  'tasks.list', 'tasks.get', 'projects.list', 'projects.get', 'users.register', 'users.authorize', 'users.me', 'events.onChange', 'batch.apply',
  '__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf', '__defineGetter__',
  'projects.create ', ' projects.create', 'projects.create\n', 'projects.create\u0000', 'projects.create\u200b', 'projects.\u0441reate',
  'Projects.create', 'PROJECTS.CREATE', 'tasks.Create', 'tasks.changestate', 'projects', 'projects.', '.create', 'projects..create',
  'projects.create.x', 'tasks/create', 'tasks_create', 'tasks.create,tasks.create', 'projects.__proto__', '__proto__.create',
  'projects.constructor', 'tasks.apply', 'tasks.call', '', '\ud800', 'x'.repeat(5_000),
];

describe.each(DOORS)('op, ref and if_match, through %s', (door) => {
  let victim: Victim;
  beforeAll(async () => {
    victim = await newVictim();
  });

  it('refuses a missing op, an op of the wrong type and every unknown op, each at its index, all at once', async () => {
    await refused(door, victim, { operations: [{ input: { task: { label: 'x' } } }] }, { status: 422, errors: [['parameter_missing', '/operations/0/op']] });
    const wrongTypes = [1, 0, null, true, [], ['projects.create'], {}, { op: 'projects.create' }];
    await refused(door, victim, { operations: wrongTypes.map((op) => ({ op, input: { project: { name: fresh() } } })) }, {
      status: 422,
      errors: wrongTypes.map((_, i) => ['invalid', `/operations/${i}/op`] as [string, string]),
    });
    await refused(door, victim, { operations: [create('first'), ...UNKNOWN_OPS.map((op) => ({ op, input: { project: { name: fresh() } } }))] }, {
      status: 422,
      errors: UNKNOWN_OPS.map((_, i) => ['invalid', `/operations/${i + 1}/op`] as [string, string]),
    });
  });

  it('refuses refs that are empty, too long, not strings, NUL or lone surrogates; 64 code points are a ref', async () => {
    const project = (ref: unknown) => ({ op: 'projects.create', ref, input: { project: { name: fresh() } } });
    const cases: Array<[unknown, string]> = [
      ['', 'invalid'], ['r'.repeat(65), 'too_long'], ['😀'.repeat(65), 'too_long'], [5, 'invalid'], [null, 'invalid'], [true, 'invalid'],
      [[], 'invalid'], [['p'], 'invalid'], [{}, 'invalid'], [{ ref: 'p' }, 'invalid'], ['a\u0000b', 'invalid'], ['\ud800', 'invalid'],
      ['x\udfffy', 'invalid'], ['\udc00\ud800', 'invalid'],
    ];
    await refused(door, victim, { operations: cases.map(([ref]) => project(ref)) }, {
      status: 422,
      errors: cases.map(([, code], i) => [code, `/operations/${i}/ref`] as [string, string]),
    });
    const ref = '😀'.repeat(64);
    const data = await landed(door, victim, { operations: [project(ref), { op: 'tasks.create', input: { task: { label: 'emoji ref', project_id: { ref } } } }] });
    expect(data[1]!.body.data.relationships.project.data.id).toBe(data[0]!.body.data.id);
  });

  it('refuses a duplicate ref, a ref on an operation that creates nothing, and refs used before, by, or for the wrong kind', async () => {
    const [project] = victim.projectIds as [number];
    const [task] = victim.taskIds as [number];
    const P = (ref: string) => ({ op: 'projects.create', ref, input: { project: { name: fresh() } } });
    const T = (ref: string, project_id?: unknown) => ({ op: 'tasks.create', ref, input: { task: { label: 'x', ...(project_id === undefined ? {} : { project_id }) } } });
    await refused(door, victim, { operations: [P('a'), P('a')] }, { status: 422, errors: [['invalid', '/operations/1/ref']] });
    await refused(door, victim, { operations: [P('a'), T('a')] }, { status: 422, errors: [['invalid', '/operations/1/ref']] });
    for (const [op, input] of [
      ['projects.update', { id: project, project: { description: 'x' } }],
      ['projects.changeState', { id: project, project: { state: 'paused' } }],
      ['projects.delete', { id: project }],
      ['tasks.update', { id: task, task: { label: 'x' } }],
      ['tasks.changeState', { id: task, task: { state: 'abandoned' } }],
      ['tasks.reorder', { id: task, task: { order: 1 } }],
    ] as const) {
      await refused(door, victim, { operations: [{ op, ref: 'r', input }] }, { status: 422, errors: [['invalid', '/operations/0/ref']] });
    }
    // Used before its create, by its own create, or never defined.
    await refused(door, victim, { operations: [T('t', { ref: 'p' }), P('p')] }, { status: 422, errors: [['invalid', '/operations/0/task/project_id']] });
    await refused(door, victim, { operations: [T('p', { ref: 'p' })] }, { status: 422, errors: [['invalid', '/operations/0/task/project_id']] });
    await refused(door, victim, { operations: [P('p'), { op: 'tasks.reorder', input: { id: { ref: 'nope' }, task: { order: 1 } } }] }, { status: 422, errors: [['invalid', '/operations/1/id']] });
    await refused(door, victim, { operations: [{ op: 'tasks.create', input: { task: { label: 'x', project_id: { ref: 'toString' } } } }] }, { status: 422, errors: [['invalid', '/operations/0/task/project_id']] });
    // A task's ref where a project's id goes, and the other way round.
    await refused(door, victim, { operations: [T('t'), T('u', { ref: 't' })] }, { status: 422, errors: [['invalid', '/operations/1/task/project_id']] });
    await refused(door, victim, { operations: [T('t'), { op: 'tasks.update', input: { id: { ref: 't' }, task: { project_id: { ref: 't' } } } }] }, { status: 422, errors: [['invalid', '/operations/1/task/project_id']] });
    await refused(door, victim, { operations: [T('t'), { op: 'projects.update', input: { id: { ref: 't' }, project: { name: fresh() } } }] }, { status: 422, errors: [['invalid', '/operations/1/id']] });
    await refused(door, victim, { operations: [P('p'), { op: 'tasks.changeState', input: { id: { ref: 'p' }, task: { state: 'abandoned' } } }] }, { status: 422, errors: [['invalid', '/operations/1/id']] });
    // Ref objects that are not {"ref": name}.
    for (const id of [{ ref: { ref: 'p' } }, { ref: ['p'] }, { ref: null }, { ref: 7 }, {}, { id: 'p' }, { Ref: 'p' }]) {
      await refused(door, victim, { operations: [P('p'), { op: 'projects.delete', input: { id } }] }, { status: 422, errors: [['invalid', '/operations/1/id']] });
    }
  });

  it('resolves refs named like prototype members, and a ref object with an extra member (ignored, §2)', async () => {
    const data = await landed(door, victim, {
      operations: [
        { op: 'projects.create', ref: '__proto__', input: { project: { name: fresh() } } },
        { op: 'tasks.create', ref: 'constructor', input: { task: { label: 'proto ref', project_id: { ref: '__proto__' } } } },
        { op: 'tasks.create', ref: 'hasOwnProperty', input: { task: { label: 'extra member', project_id: { ref: '__proto__', extra: 1 } } } },
        { op: 'tasks.reorder', input: { id: { ref: 'constructor' }, task: { order: 1 } } },
      ],
    });
    const projectId = data[0]!.body.data.id;
    expect(data[1]!.body.data.relationships.project.data.id).toBe(projectId);
    expect(data[2]!.body.data.relationships.project.data.id).toBe(projectId);
    expect(data[3]!.body.data[0]).toEqual({ type: 'task', id: data[1]!.body.data.id, attributes: { order: 1 } });
  });

  it('refuses a ref to a project an earlier operation deleted, at that operation, and keeps nothing', async () => {
    const P = { op: 'projects.create', ref: 'd', input: { project: { name: fresh() } } };
    const deleted = { op: 'projects.delete', input: { id: { ref: 'd' } } };
    await refused(door, victim, { operations: [P, deleted, { op: 'tasks.create', input: { task: { label: 'x', project_id: { ref: 'd' } } } }] }, {
      status: 422,
      errors: [['record_not_found', '/operations/2/task/project_id']],
    });
    await refused(door, victim, { operations: [P, deleted, { op: 'projects.update', input: { id: { ref: 'd' }, project: { name: fresh() } } }] }, {
      status: 404,
      errors: [['record_not_found', '/operations/2/project']],
    });
  });

  it('refuses an if_match that is not a string at its operation', async () => {
    const values = [5, 0, null, true, [], ['"x"'], {}, { if_match: '*' }];
    await refused(door, victim, { operations: values.map((if_match) => ({ ...create('x'), if_match })) }, {
      status: 422,
      errors: values.map((_, i) => ['invalid', `/operations/${i}/if_match`] as [string, string]),
    });
  });

  it('answers an odd or huge if_match 412 at /operations/<i>/if_match (strong comparison), and keeps the create before it', async () => {
    const created = await app.request('POST', '/api/users/me/projects', { token: victim.token, body: { project: { name: fresh() } } });
    const id = created.body.data.id as number;
    const etag = created.headers.get('etag')!;
    for (const if_match of [
      '', ' ', ',', '""', '"', 'W/', `W/${etag}`, etag.toUpperCase(), etag.slice(1, -1), `"${etag}"`, '\u0000', `"${'\u0000'}"`, '\ud800', `"\ud800"`,
      '😀', '*x', '* *', 'x'.repeat(60_000), '"a'.repeat(30_000), 'W/'.repeat(30_000), '"'.repeat(40_000),
    ]) {
      await refused(door, victim, { operations: [create('before'), { op: 'projects.update', input: { id, project: { description: 'changed' } }, if_match }] }, {
        status: 412,
        errors: [['precondition_failed', '/operations/1/if_match']],
      });
    }
    // A list that holds the current tag matches; so does *.
    const data = await landed(door, victim, { operations: [{ op: 'projects.update', input: { id, project: { description: 'one' } }, if_match: `"nope", ${etag}` }] });
    expect(data[0]!.body.data.attributes.description).toBe('one');
    await landed(door, victim, { operations: [{ op: 'projects.update', input: { id, project: { description: 'two' } }, if_match: '*' }] });
    // On a resource made earlier in the batch, a made-up tag does not match.
    await refused(door, victim, { operations: [{ op: 'projects.create', ref: 'n', input: { project: { name: fresh() } } }, { op: 'projects.update', input: { id: { ref: 'n' }, project: { description: 'x' } }, if_match: '"p1.1.x"' }] }, {
      status: 412,
      errors: [['precondition_failed', '/operations/1/if_match']],
    });
  });
});

// ---------------------------------------------------------------------------------------------
// input
// ---------------------------------------------------------------------------------------------

const OPS_WITH_IDS = [
  { op: 'projects.update', resource: 'project', rest: (v: Victim) => ({ project: { description: `by ${v.username}` } }) },
  { op: 'projects.changeState', resource: 'project', rest: () => ({ project: { state: 'paused' } }) },
  { op: 'projects.delete', resource: 'project', rest: () => ({}) },
  { op: 'tasks.update', resource: 'task', rest: () => ({ task: { label: 'moved' } }) },
  { op: 'tasks.changeState', resource: 'task', rest: () => ({ task: { state: 'abandoned' } }) },
  { op: 'tasks.reorder', resource: 'task', rest: () => ({ task: { order: 1 } }) },
] as const;

/** A raw call of one procedure on /trpc, its input written as JSON text: a batch's operation alone. */
async function single(token: string, procedure: string, inputText: string): Promise<Answer> {
  const request = `trpc ${procedure} ${short(inputText)}`;
  const res = await withDeadline(request, fetch(`${app.baseUrl}/trpc/${procedure}`, {
    method: 'POST',
    headers: { Authorization: token, 'Content-Type': 'application/json' },
    body: `{"json":${inputText}}`,
  }));
  const text = await res.text();
  expectContract(judgeTrpcHttp(request, res.status, text));
  const parsed = parse(text) as any;
  return { status: res.status, errors: parsed?.error?.json?.data?.errors ?? [], data: [], headers: res.headers, text };
}

describe.each(DOORS)('input, through %s', (door) => {
  let victim: Victim;
  beforeAll(async () => {
    victim = await newVictim();
  });

  it('refuses a missing input, an input of the wrong type or with the wrong wrapper, at the operation', async () => {
    // A missing input is an empty one, as a procedure called with none: its wrapper is missing.
    await refused(door, victim, { operations: [create('a'), { op: 'projects.create' }] }, { status: 422, errors: [['parameter_missing', '/operations/1/project']] });
    for (const input of [null, [], [{ project: { name: 'x' } }], 5, 'project', true, {}, { task: { label: 'x' } }, { Project: { name: 'x' } }, { project: null }, { project: [] }, { project: 'x' }, { project: [{ name: 'x' }] }]) {
      await refused(door, victim, { operations: [create('a'), { op: 'projects.create', input }] }, { status: 422, errors: [['parameter_missing', '/operations/1/project']] });
    }
    for (const input of [null, [], { project: { label: 'x' } }, { task: 'x' }, { task: null }]) {
      await refused(door, victim, { operations: [{ op: 'tasks.create', input }] }, { status: 422, errors: [['parameter_missing', '/operations/0/task']] });
    }
    for (const { op, resource } of OPS_WITH_IDS) {
      const id = resource === 'project' ? victim.projectIds[0] : victim.taskIds[0];
      if (op !== 'projects.delete') {
        await refused(door, victim, { operations: [{ op, input: { id, [resource]: [] } }] }, { status: 422, errors: [['parameter_missing', `/operations/0/${resource}`]] });
      }
      await refused(door, victim, { operations: [{ op, input: [id] }] }, { status: 404, errors: [['record_not_found', `/operations/0/${resource}`]] });
    }
  });

  it(`reads an input nested up to ${MAX_JSON_DEPTH} levels and refuses one more as 400 invalid_json, wherever it is`, async () => {
    // The input's own levels, on either door: superjson's {"json": …} around it is not counted.
    const limit = MAX_JSON_DEPTH;
    const body = (at: (n: number) => string, n: number) => {
      const text = at(n);
      return { text, depth: depthOf(JSON.parse(text)) };
    };
    const placements: Array<{ what: string; at: (n: number) => string; base: number; atLimit: Expected | 'lands' }> = [
      { what: 'an ignored member', at: (n) => `{"operations":[{"op":"tasks.create","input":{"task":{"label":"deep","x":${arrays(n)}}}}]}`, base: 5, atLimit: 'lands' },
      { what: 'project_id', at: (n) => `{"operations":[{"op":"tasks.create","input":{"task":{"label":"deep","project_id":${arrays(n, '1')}}}}]}`, base: 5, atLimit: { status: 422, errors: [['invalid', '/operations/0/task/project_id']] } },
      { what: 'the ref of an id', at: (n) => `{"operations":[{"op":"tasks.reorder","input":{"id":{"ref":${objects(n)}},"task":{"order":1}}}]}`, base: 5, atLimit: { status: 422, errors: [['invalid', '/operations/0/id']] } },
      { what: 'op', at: (n) => `{"operations":[{"op":${arrays(n, '"tasks.create"')},"input":{"task":{"label":"x"}}}]}`, base: 3, atLimit: { status: 422, errors: [['invalid', '/operations/0/op']] } },
      { what: 'the list itself', at: (n) => `{"operations":${arrays(n)}}`, base: 1, atLimit: { status: 422, errors: [['invalid', '/operations/0']] } },
      { what: 'an ignored member beside the list', at: (n) => `{"x":${objects(n)},"operations":[]}`, base: 1, atLimit: { status: 422, errors: [['invalid', '/operations']] } },
    ];
    for (const { what, at, base, atLimit } of placements) {
      const ok = body(at, limit - base);
      expect(ok.depth, what).toBe(limit);
      if (atLimit === 'lands') await landed(door, victim, ok.text);
      else await refused(door, victim, ok.text, atLimit);
      const over = body(at, limit - base + 1);
      await refused(door, victim, over.text, { status: 400, errors: [['invalid_json', undefined]] });
      await refused(door, victim, at(5_000), { status: 400, errors: [['invalid_json', undefined]] });
    }
  });

  it('takes __proto__, constructor and prototype members as plain members: nothing is inherited, nothing polluted', async () => {
    const [own] = victim.taskIds as [number];
    const [foreign] = other().projectIds as [number];
    await refused(door, victim, `{"__proto__":{"operations":[{"op":"tasks.create","input":{"task":{"label":"inherited"}}}]}}`, { status: 422, errors: [['parameter_missing', '/operations']] });
    await refused(door, victim, `{"operations":{"__proto__":[]}}`, { status: 422, errors: [['invalid', '/operations']] });
    await refused(door, victim, `{"operations":[{"__proto__":{"op":"tasks.create","input":{"task":{"label":"inherited"}}}}]}`, { status: 422, some: [['parameter_missing', '/operations/0/op']] });
    await refused(door, victim, `{"operations":[{"op":"tasks.create","input":{"__proto__":{"task":{"label":"inherited"}}}}]}`, { status: 422, errors: [['parameter_missing', '/operations/0/task']] });
    await refused(door, victim, `{"operations":[{"op":"tasks.update","input":{"__proto__":{"id":${own}},"task":{"label":"inherited"}}}]}`, { status: 404, errors: [['record_not_found', '/operations/0/task']] });
    await refused(door, victim, `{"operations":[{"op":"projects.create","ref":"p","input":{"project":{"name":"${fresh()}"}}},{"op":"tasks.create","input":{"task":{"label":"x","project_id":{"__proto__":{"ref":"p"}}}}}]}`, {
      status: 422,
      errors: [['invalid', '/operations/1/task/project_id']],
    });
    // A state change refuses every member but its own, __proto__ too, as the endpoint does alone. On
    // /trpc superjson's copy of the input drops __proto__ members before any procedure sees them
    // (src/core/transformer.ts), there alone and in a batch: that door is only held to the envelope.
    const pause = `{"operations":[{"op":"projects.changeState","input":{"id":${victim.projectIds[1]},"project":{"state":"paused","__proto__":{"x":1}}}}]}`;
    if (door === 'rest') await refused(door, victim, pause, { status: 422, errors: [['cannot_be_set', '/operations/0/project/__proto__']] });
    else await post(door, victim.token, pause);
    const data = await landed(door, victim, `{"__proto__":{"isAdmin":true},"constructor":{"prototype":{"polluted":"yes"}},"operations":[
      {"op":"tasks.create","__proto__":{"ref":"t"},"input":{"task":{"label":"proto","__proto__":{"project_id":${foreign}},"prototype":{"polluted":"yes"}}}},
      {"op":"tasks.create","constructor":{"prototype":{"polluted":"yes"}},"input":{"constructor":{"prototype":{"polluted":"yes"}},"task":{"label":"ctor"}}}]}`);
    expect(data.map((d) => [d.body.data.attributes.label, d.body.data.relationships.project.data])).toEqual([['proto', null], ['ctor', null]]);
    expect(({} as any).polluted).toBeUndefined();
  });

  it('reads duplicate keys as JSON.parse does (the last one), on every level', async () => {
    const [own] = victim.projectIds as [number];
    const [foreign] = other().projectIds as [number];
    const good = (label: string) => `{"op":"tasks.create","input":{"task":{"label":"${label}"}}}`;
    const name = () => `"${fresh()}"`;
    const refusals: Array<[string, Expected]> = [
      [`{"operations":[${good('first list')}],"operations":[]}`, { status: 422, errors: [['invalid', '/operations']] }],
      [`{"operations":[${good('first list')}],"operations":null}`, { status: 422, errors: [['invalid', '/operations']] }],
      [`{"operations":[{"op":"tasks.create","op":"tasks.list","input":{"task":{"label":"x"}}}]}`, { status: 422, errors: [['invalid', '/operations/0/op']] }],
      [`{"operations":[{"op":"tasks.create","input":{"task":{"label":"x"}},"input":null}]}`, { status: 422, errors: [['parameter_missing', '/operations/0/task']] }],
      [`{"operations":[{"op":"tasks.create","input":{"task":{"label":"x"},"task":null}}]}`, { status: 422, errors: [['parameter_missing', '/operations/0/task']] }],
      [`{"operations":[{"op":"projects.update","input":{"id":${own},"id":${foreign},"project":{"description":"dup"}}}]}`, { status: 404, errors: [['record_not_found', '/operations/0/project']] }],
      [`{"operations":[{"op":"projects.create","ref":"a","ref":"b","input":{"project":{"name":${name()}}}},{"op":"tasks.create","input":{"task":{"label":"x","project_id":{"ref":"a"}}}}]}`, { status: 422, errors: [['invalid', '/operations/1/task/project_id']] }],
      [`{"operations":[{"op":"projects.create","ref":"p","input":{"project":{"name":${name()}}}},{"op":"tasks.create","input":{"task":{"label":"x","project_id":{"ref":"p","ref":"nope"}}}}]}`, { status: 422, errors: [['invalid', '/operations/1/task/project_id']] }],
      [`{"operations":[{"op":"projects.create","ref":"p","input":{"project":{"name":${name()}}}},{"op":"tasks.create","input":{"task":{"label":"x","project_id":{"ref":"p"},"project_id":${foreign}}}}]}`, { status: 422, errors: [['record_not_found', '/operations/1/task/project_id']] }],
      [`{"operations":[{"op":"projects.update","input":{"id":${own},"project":{"description":"dup"}},"if_match":"*","if_match":"\\"stale\\""}]}`, { status: 412, errors: [['precondition_failed', '/operations/0/if_match']] }],
    ];
    for (const [text, expected] of refusals) {
      const answer = await refused(door, victim, text, expected);
      // The same request written without duplicates gets the same answer.
      const again = await refused(door, victim, JSON.stringify(JSON.parse(text)), expected);
      expect(pairs(again.errors)).toEqual(pairs(answer.errors));
    }
    const before = await rowsOf(other().id);
    const lands: Array<[string, (data: Answer['data']) => void]> = [
      [`{"operations":[],"operations":[${good('second list')}]}`, (d) => expect(d[0]!.body.data.attributes.label).toBe('second list')],
      [`{"operations":[{"op":"tasks.list","op":"tasks.create","input":{"task":{"label":"second op"}}}]}`, (d) => expect(d[0]!.body.data.attributes.label).toBe('second op')],
      [`{"operations":[{"op":"tasks.create","input":{"task":{"label":"first"}},"input":{"task":{"label":"second"}}}]}`, (d) => expect(d.map((x) => x.body.data.attributes.label)).toEqual(['second'])],
      [`{"operations":[{"op":"tasks.create","input":{"task":{"label":"first","label":"second"}}}]}`, (d) => expect(d[0]!.body.data.attributes.label).toBe('second')],
      [`{"operations":[{"op":"projects.update","input":{"id":${foreign},"id":${own},"project":{"description":"dup"}}}]}`, (d) => expect(d[0]!.body.data.id).toBe(own)],
      [`{"operations":[{"op":"projects.create","ref":"p","input":{"project":{"name":${name()}}}},{"op":"tasks.create","input":{"task":{"label":"x","project_id":{"ref":"nope","ref":"p"}}}}]}`, (d) => expect(d[1]!.body.data.relationships.project.data.id).toBe(d[0]!.body.data.id)],
      [`{"operations":[{"op":"projects.create","ref":"p","input":{"project":{"name":${name()}}}},{"op":"tasks.create","input":{"task":{"label":"x","project_id":${foreign},"project_id":{"ref":"p"}}}}]}`, (d) => expect(d[1]!.body.data.relationships.project.data.id).toBe(d[0]!.body.data.id)],
      [`{"operations":[{"op":"projects.update","input":{"id":${own},"project":{"description":"dup"}},"if_match":"\\"stale\\"","if_match":"*"}]}`, (d) => expect(d[0]!.body.data.attributes.description).toBe('dup')],
    ];
    for (const [text, check] of lands) check(await landed(door, victim, text));
    expect(await rowsOf(other().id)).toEqual(before);
  });

  it('answers odd numbers as ids 404 at /operations/<i>/<resource>, and as project_id 422, as the procedure does alone', async () => {
    const ownProject = victim.projectIds[0]!;
    const ownTask = victim.taskIds[0]!;
    const odd = ['2147483648', '2147483647', '4294967297', '9007199254740992', '9007199254740993', '123456789012345678901234567890', '1e308', '1e400', '-1e400', '-0', '0', '-0.0', '-1', '1.5', '1e-7', 'true', 'null', '[]', '"1"'];
    for (const { op, resource, rest } of OPS_WITH_IDS) {
      const own = resource === 'project' ? ownProject : ownTask;
      const restText = toJsonText(rest(victim)).slice(1, -1);
      for (const id of [...odd, `"${own}"`, `[${own}]`, `" ${own}"`]) {
        const input = `{"id":${id}${restText ? `,${restText}` : ''}}`;
        const answer = await refused(door, victim, `{"operations":[${toJsonText(create('before'))},{"op":"${op}","input":${input}}]}`, {
          status: 404,
          errors: [['record_not_found', `/operations/1/${resource}`]],
        });
        const byItself = await single(victim.token, op, input);
        expect([byItself.status, pairs(byItself.errors)], `${op} ${input}`).toEqual([answer.status, [['record_not_found', `/${resource}`]]]);
      }
    }
    for (const [op, wrap] of [['tasks.create', (pid: string) => `{"task":{"label":"x","project_id":${pid}}}`], ['tasks.update', (pid: string) => `{"id":${ownTask},"task":{"project_id":${pid}}}`]] as const) {
      for (const pid of [...odd.filter((n) => n !== 'null'), `"${ownProject}"`, `[${ownProject}]`, '{"id":1}']) {
        const byItself = await single(victim.token, op, wrap(pid));
        expect(byItself.status, `${op} project_id ${pid} alone: ${byItself.text}`).toBe(422);
        const expected = pairs(byItself.errors).map(([code, pointer]) => [code, `/operations/0${pointer}`] as [string, string]);
        await refused(door, victim, `{"operations":[{"op":"${op}","input":${wrap(pid)}}]}`, { status: 422, errors: expected });
      }
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Another user's ids
// ---------------------------------------------------------------------------------------------

describe.each(DOORS)("another user's ids, through %s", (door) => {
  let victim: Victim;
  beforeAll(async () => {
    victim = await newVictim();
  });

  it('answers 404 record_not_found at /operations/<i>/<resource> for every op, whatever if_match, and changes nothing of either user', async () => {
    for (const { op, resource, rest } of OPS_WITH_IDS) {
      for (const id of resource === 'project' ? other().projectIds : other().taskIds) {
        const theirs = await app.request('GET', `/api/${resource}s/${id}`, { token: other().token });
        for (const if_match of [undefined, '*', theirs.headers.get('etag')!, '"stale"']) {
          const operation = { op, input: { id, ...rest(victim) }, ...(if_match === undefined ? {} : { if_match }) };
          await refused(door, victim, { operations: [create('mine'), { op: 'projects.create', ref: 'p', input: { project: { name: fresh() } } }, operation] }, {
            status: 404,
            errors: [['record_not_found', `/operations/2/${resource}`]],
          });
        }
      }
    }
  });

  it("refuses another user's project as project_id (422 record_not_found), also after a create in the batch", async () => {
    for (const foreign of other().projectIds) {
      await refused(door, victim, { operations: [create('mine'), { op: 'tasks.create', input: { task: { label: 'x', project_id: foreign } } }] }, {
        status: 422,
        errors: [['record_not_found', '/operations/1/task/project_id']],
      });
      await refused(door, victim, { operations: [{ op: 'tasks.create', ref: 't', input: { task: { label: 'x' } } }, { op: 'tasks.update', input: { id: { ref: 't' }, task: { project_id: foreign } } }] }, {
        status: 422,
        errors: [['record_not_found', '/operations/1/task/project_id']],
      });
      await refused(door, victim, { operations: [{ op: 'tasks.update', input: { id: victim.taskIds[0], task: { project_id: foreign } } }] }, {
        status: 422,
        errors: [['record_not_found', '/operations/0/task/project_id']],
      });
    }
  });
});

describeAfterTheRun();
