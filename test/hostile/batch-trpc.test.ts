/**
 * Hostile batches (API-CONTRACT.md §1, §2, §11, §15) on the tRPC door and with an
 * Idempotency-Key: the typed client with values only superjson carries (Date, BigInt, Map,
 * Set, RegExp, undefined, NaN, Infinity), tRPC HTTP batches of batch.apply calls (each call
 * on its own, conditional headers, more calls than allowed, over 100 KiB, nested too deep),
 * and Idempotency-Key with refused batches on both doors and through the typed client. Every
 * refusal must be a 4xx in the contract's envelope with the pointer the contract gives, and
 * must keep nothing of the user or of the other user (the harness: test/helpers/hostile.ts
 * and test/helpers/hostile-batch.ts; the shape of a batch: batch.test.ts).
 */
import { randomUUID } from 'node:crypto';
import { TRPCClientError } from '@trpc/client';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_OPERATIONS } from '../../src/batch/batch.schema.js';
import { callOptions } from '../../src/client.js';
import { BODY_LIMIT_BYTES, MAX_BATCH_CALLS, MAX_JSON_DEPTH } from '../../src/core/limits.js';
import { describeAfterTheRun, errorProblems, expectContract, judgeRest, newVictim, NOW, other, type Outcome, short, toJsonText, type Victim, withDeadline } from '../helpers/hostile.js';
import { type ApiError, arrays, create, DOORS, type Expected, fresh, many, pairs, parse, post, refused, refusedViaClient, rowsOf, state, useHostileBatchApp } from '../helpers/hostile-batch.js';
import { DAY } from '../helpers/test-app.js';

const app = useHostileBatchApp();

// ---------------------------------------------------------------------------------------------
// The tRPC door: superjson values, tRPC HTTP batches, conditional headers
// ---------------------------------------------------------------------------------------------

describe('the tRPC door', () => {
  let victim: Victim;
  beforeAll(async () => {
    victim = await newVictim();
  });

  it('refuses superjson values (Date, BigInt, Map, Set, RegExp, undefined, NaN, Infinity) inside operations, at their place', async () => {
    const task = victim.taskIds[0]!;
    const project = victim.projectIds[0]!;
    const cases: Array<[unknown, Expected]> = [
      [{ operations: new Set([create('x')]) }, { status: 422, errors: [['invalid', '/operations']] }],
      [{ operations: new Map([[0, create('x')]]) }, { status: 422, errors: [['invalid', '/operations']] }],
      [{ operations: new Date(0) }, { status: 422, errors: [['invalid', '/operations']] }],
      [{ operations: 1n }, { status: 422, errors: [['invalid', '/operations']] }],
      [{ operations: undefined }, { status: 422, errors: [['parameter_missing', '/operations']] }],
      [{ operations: [undefined] }, { status: 422, errors: [['parameter_missing', '/operations/0']] }],
      [{ operations: [new Date(0)] }, { status: 422, some: [['parameter_missing', '/operations/0/op']] }],
      [{ operations: [new Map<string, unknown>([['op', 'tasks.create'], ['input', { task: { label: 'x' } }]])] }, { status: 422, some: [['parameter_missing', '/operations/0/op']] }],
      [{ operations: [{ op: new Set(['tasks.create']), input: { task: { label: 'x' } } }] }, { status: 422, errors: [['invalid', '/operations/0/op']] }],
      [{ operations: [{ op: 1n, input: {} }] }, { status: 422, errors: [['invalid', '/operations/0/op']] }],
      [{ operations: [{ op: undefined, input: {} }] }, { status: 422, errors: [['parameter_missing', '/operations/0/op']] }],
      [{ operations: [{ ...create('x'), ref: new Date(0) }] }, { status: 422, errors: [['invalid', '/operations/0/ref']] }],
      [{ operations: [{ ...create('x'), ref: /p/ }] }, { status: 422, errors: [['invalid', '/operations/0/ref']] }],
      [{ operations: [{ ...create('x'), ref: 1n }] }, { status: 422, errors: [['invalid', '/operations/0/ref']] }],
      [{ operations: [{ ...create('x'), if_match: 1n }] }, { status: 422, errors: [['invalid', '/operations/0/if_match']] }],
      [{ operations: [{ ...create('x'), if_match: new Date(0) }] }, { status: 422, errors: [['invalid', '/operations/0/if_match']] }],
      // An undefined ref is no ref: the later use of it names nothing.
      [{ operations: [{ op: 'projects.create', ref: undefined, input: { project: { name: fresh() } } }, { op: 'tasks.create', input: { task: { label: 'x', project_id: { ref: undefined } } } }] }, { status: 422, errors: [['invalid', '/operations/1/task/project_id']] }],
      [{ operations: [{ op: 'tasks.create', input: undefined }] }, { status: 422, some: [['parameter_missing', '/operations/0/task']] }],
      [{ operations: [{ op: 'tasks.create', input: new Map([['task', { label: 'x' }]]) }] }, { status: 422, errors: [['parameter_missing', '/operations/0/task']] }],
      // A Map is no object: the wrapper is refused as missing (API-CONTRACT.md §2), as a string would be.
      [{ operations: [{ op: 'tasks.create', input: { task: new Map([['label', 'x']]) } }] }, { status: 422, errors: [['parameter_missing', '/operations/0/task']] }],
      [{ operations: [{ op: 'tasks.create', input: { task: { label: new Date(0) } } }] }, { status: 422, errors: [['invalid', '/operations/0/task/label']] }],
      [{ operations: [{ op: 'tasks.create', input: { task: { label: 'x', planned_at: new Date(NOW * 1000 + DAY * 1000) } } }] }, { status: 422, errors: [['invalid', '/operations/0/task/planned_at']] }],
      [{ operations: [{ op: 'tasks.create', input: { task: { label: 'x', project_id: BigInt(project) } } }] }, { status: 422, errors: [['invalid', '/operations/0/task/project_id']] }],
      [{ operations: [{ op: 'tasks.create', input: { task: { label: 'x', project_id: new Date(project) } } }] }, { status: 422, errors: [['invalid', '/operations/0/task/project_id']] }],
      [{ operations: [{ op: 'tasks.create', input: { task: { label: 'x', project_id: NaN } } }] }, { status: 422, errors: [['invalid', '/operations/0/task/project_id']] }],
      [{ operations: [{ op: 'tasks.create', input: { task: { label: 'x', project_id: new Map([['ref', 'p']]) } } }] }, { status: 422, errors: [['invalid', '/operations/0/task/project_id']] }],
      [{ operations: [{ op: 'projects.create', ref: 'p', input: { project: { name: fresh() } } }, { op: 'tasks.create', input: { task: { label: 'x', project_id: { ref: new Set(['p']) } } } }] }, { status: 422, errors: [['invalid', '/operations/1/task/project_id']] }],
      [{ operations: [{ op: 'tasks.reorder', input: { id: BigInt(task), task: { order: 1 } } }] }, { status: 404, errors: [['record_not_found', '/operations/0/task']] }],
      [{ operations: [{ op: 'tasks.reorder', input: { id: new Date(task), task: { order: 1 } } }] }, { status: 422, errors: [['invalid', '/operations/0/id']] }],
      [{ operations: [{ op: 'tasks.reorder', input: { id: -0, task: { order: 1 } } }] }, { status: 404, errors: [['record_not_found', '/operations/0/task']] }],
      [{ operations: [{ op: 'tasks.reorder', input: { id: NaN, task: { order: 1 } } }] }, { status: 404, errors: [['record_not_found', '/operations/0/task']] }],
      [{ operations: [{ op: 'tasks.reorder', input: { id: Infinity, task: { order: 1 } } }] }, { status: 404, errors: [['record_not_found', '/operations/0/task']] }],
      [{ operations: [{ op: 'tasks.reorder', input: { id: task, task: { order: Infinity } } }] }, { status: 422, errors: [['invalid', '/operations/0/task/order']] }],
      [{ operations: [{ op: 'tasks.reorder', input: { id: task, task: { order: 1n } } }] }, { status: 422, errors: [['invalid', '/operations/0/task/order']] }],
      [{ operations: many(MAX_OPERATIONS + 1) }, { status: 422, errors: [['too_long', '/operations']] }],
    ];
    for (const [input, expected] of cases) await refusedViaClient(victim, input, expected);
  });

  /** What one call of a tRPC HTTP batch got: its result's data, or the errors of its envelope. */
  type CallAnswer = { data?: any; error?: { errors: ApiError[] } };

  /** A tRPC HTTP batch (`?batch=1`) of calls, each input written as JSON text. */
  async function trpcBatch(token: string, calls: ReadonlyArray<readonly [string, string]>, headers: Record<string, string> = {}): Promise<{ status: number; results: CallAnswer[]; headers: Headers }> {
    const body = `{${calls.map(([, input], i) => `"${i}":{"json":${input}}`).join(',')}}`;
    const url = `${app.baseUrl}/trpc/${calls.map(([procedure]) => procedure).join(',')}?batch=1`;
    const request = `tRPC batch ${short(url)} ${short(body)}`;
    const res = await withDeadline(request, fetch(url, { method: 'POST', headers: { Authorization: token, 'Content-Type': 'application/json', ...headers }, body }));
    const text = await res.text();
    expect(res.status, `${request}\n  -> ${short(text)}`).toBeLessThan(500);
    const answers = parse(text) as any;
    // One answer per call, or one envelope for the whole request (413 and the like).
    if (!Array.isArray(answers)) {
      const outcome: Outcome = judgeRest(request, { status: res.status, headers: res.headers, body: answers, text });
      expectContract(outcome);
      return { status: res.status, results: calls.map(() => ({ error: answers as { errors: ApiError[] } })), headers: res.headers };
    }
    expect(answers).toHaveLength(calls.length);
    const results = answers.map((answer: any): CallAnswer => {
      if (answer.result) return { data: answer.result.data.json };
      const data = answer.error?.json?.data;
      expect(errorProblems(data?.errors, data?.httpStatus), short(JSON.stringify(answer))).toEqual([]);
      return { error: { errors: data.errors as ApiError[] } };
    });
    return { status: res.status, results, headers: res.headers };
  }

  it('runs each batch.apply call of a tRPC HTTP batch on its own: the good one lands, the hostile one keeps nothing', async () => {
    const hostile: Array<[string, Array<[string, string | undefined]>]> = [
      ['{"operations":[]}', [['invalid', '/operations']]],
      [toJsonText({ operations: many(MAX_OPERATIONS + 1) }), [['too_long', '/operations']]],
      [toJsonText({ operations: [{ op: 'users.register', input: {} }] }), [['invalid', '/operations/0/op']]],
      [toJsonText({ operations: [create('undone'), { op: 'projects.delete', input: { id: other().projectIds[0] } }] }), [['record_not_found', '/operations/1/project']]],
      ['null', [['parameter_missing', '/operations']]],
    ];
    for (const [input, errors] of hostile) {
      const before = await rowsOf(victim.id);
      const label = fresh('kept');
      const { results } = await trpcBatch(victim.token, [['batch.apply', toJsonText({ operations: [create(label)] })], ['batch.apply', input]]);
      expect(results[0]!.data?.data[0].body.data.attributes.label, JSON.stringify(results[0])).toBe(label);
      expect(pairs(results[1]!.error!.errors), input.slice(0, 200)).toEqual(errors);
      const after = await rowsOf(victim.id);
      expect(after.tasks.slice(before.tasks.length).map((t: any) => t.label)).toEqual([label]);
      expect(after.events.length - before.events.length).toBe(1);
    }
  });

  it(`refuses conditional headers on a tRPC batch of several calls (400 on the header, none runs); one call in ?batch=1 takes them`, async () => {
    const calls: Array<[string, string]> = [
      ['batch.apply', toJsonText({ operations: [create('a'), { op: 'projects.update', input: { id: victim.projectIds[0], project: { description: 'cond' } }, if_match: '*' }] })],
      ['batch.apply', toJsonText({ operations: [create('b')] })],
      ['projects.create', toJsonText({ project: { name: fresh() } })],
    ];
    for (const [header, value] of [['If-Match', '*'], ['If-Match', '"stale"'], ['If-None-Match', '*'], ['Idempotency-Key', randomUUID()]] as const) {
      for (const group of [calls.slice(0, 2), calls]) {
        const before = await state(victim);
        const { status, results } = await trpcBatch(victim.token, group, { [header]: value });
        expect(status).toBe(400);
        for (const result of results) {
          expect(result.error?.errors.map((e: ApiError) => [e.code, e.source])).toEqual([['invalid', { parameter: header }]]);
        }
        expect(await state(victim)).toEqual(before);
      }
    }
    // One call in a batch request is one call: its key is kept and replayed.
    const key = randomUUID();
    const first = await trpcBatch(victim.token, [['batch.apply', toJsonText({ operations: [create('keyed')] })]], { 'Idempotency-Key': key });
    const second = await trpcBatch(victim.token, [['batch.apply', toJsonText({ operations: [create('keyed')] })]], { 'Idempotency-Key': key });
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.results).toEqual(first.results);
    // If-Match on the request of one batch.apply is refused on the header (API-CONTRACT.md §15): the operations carry their own.
    const stale = await trpcBatch(victim.token, [['batch.apply', toJsonText({ operations: [{ op: 'projects.update', input: { id: victim.projectIds[0], project: { description: 'x' } }, if_match: '"stale"' }] })]], { 'If-Match': '*' });
    expect(stale.results[0]!.error!.errors.map((e: ApiError) => [e.code, e.source])).toEqual([['invalid', { header: 'If-Match' }]]);
  });

  it(`refuses ${MAX_BATCH_CALLS + 1} batch.apply calls in one request, and serves ${MAX_BATCH_CALLS} of 25 operations each`, async () => {
    const before = await state(victim);
    const over = await trpcBatch(victim.token, Array.from({ length: MAX_BATCH_CALLS + 1 }, (): [string, string] => ['batch.apply', toJsonText({ operations: [create('over')] })]));
    expect(over.status).toBe(400);
    for (const result of over.results) expect(result.error?.errors.map((e: ApiError) => e.code)).toEqual(['batch_too_large']);
    expect(await state(victim)).toEqual(before);

    const full = await trpcBatch(victim.token, Array.from({ length: MAX_BATCH_CALLS }, (_, c): [string, string] => ['batch.apply', toJsonText({ operations: many(25, `c${c}-`) })]));
    expect(full.status).toBe(200);
    const after = await rowsOf(victim.id);
    const added = after.tasks.slice(before.mine.tasks.length);
    expect(added).toHaveLength(MAX_BATCH_CALLS * 25);
    // Each call's operations are consecutive: no other write came between them.
    const orders = (after.tasks as Array<{ order: number }>).map((t) => t.order).sort((a, b) => a - b);
    expect(orders).toEqual(orders.map((_, i) => i + 1));
    for (const result of full.results) {
      const mine = result.data.data.map((d: any) => d.body.data.attributes.order);
      expect(mine).toEqual(mine.map((_: number, i: number) => mine[0] + i));
    }
  }, 60_000);

  it('refuses a tRPC batch over 100 KiB, or with one call nested too deep, for every call, and runs none', async () => {
    const good: [string, string] = ['batch.apply', toJsonText({ operations: [create('never')] })];
    const big: [string, string] = ['batch.apply', toJsonText({ operations: [create('y'.repeat(900))] }).padEnd(BODY_LIMIT_BYTES, ' ')];
    const deep: [string, string] = ['batch.apply', `{"operations":[{"op":"tasks.create","input":{"task":{"label":"x","y":${arrays(MAX_JSON_DEPTH)}}}}]}`];
    for (const [calls, code] of [[[good, big], 'payload_too_large'], [[good, deep], 'invalid_json'], [[good, ['batch.apply', '{"operations":[']], 'invalid_json']] as const) {
      const before = await state(victim);
      const { status, results } = await trpcBatch(victim.token, calls);
      expect(status).toBeGreaterThanOrEqual(400);
      for (const result of results) expect(result.error?.errors.map((e) => e.code)).toEqual([code]);
      expect(await state(victim)).toEqual(before);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Idempotency-Key with refused batches
// ---------------------------------------------------------------------------------------------

describe.each(DOORS)('Idempotency-Key with a refused batch, through %s', (door) => {
  let victim: Victim;
  beforeAll(async () => {
    victim = await newVictim();
  });

  const REFUSED: Array<[string, (v: Victim) => { text: string; headers?: Record<string, string> }, number]> = [
    ['an empty list', () => ({ text: '{"operations":[]}' }), 422],
    ['101 operations', () => ({ text: toJsonText({ operations: many(MAX_OPERATIONS + 1) }) }), 422],
    ['an unknown op', () => ({ text: toJsonText({ operations: [create('x'), { op: 'tasks.list', input: {} }] }) }), 422],
    ['a duplicate ref', () => ({ text: toJsonText({ operations: [create('x', { ref: 'r' }), create('y', { ref: 'r' })] }) }), 422],
    ['a ref to nothing', () => ({ text: toJsonText({ operations: [{ op: 'tasks.reorder', input: { id: { ref: 'r' }, task: { order: 1 } } }] }) }), 422],
    ['an if_match that is not a string', () => ({ text: toJsonText({ operations: [{ ...create('x'), if_match: 1 }] }) }), 422],
    ['a body that is not an object', () => ({ text: '[]' }), 422],
    ['a body that is not JSON', () => ({ text: '{"operations":[' }), 400],
    ['a body nested too deep', () => ({ text: `{"operations":[${arrays(MAX_JSON_DEPTH)}]}` }), 400],
    ['a body over 100 KiB', () => ({ text: toJsonText({ operations: [create('x'.repeat(1_000))] }).padEnd(BODY_LIMIT_BYTES + 1, ' ') }), 413],
    ['a body that is not application/json', () => ({ text: toJsonText({ operations: [create('x')] }), headers: { 'Content-Type': 'text/plain' } }), 415],
  ];

  it.each(REFUSED)('%s stores nothing under the key: a retry with the key and a good batch runs, then replays', async (_what, make, status) => {
    const key = randomUUID();
    const { text, headers } = make(victim);
    const before = await state(victim);
    const answer = await post(door, victim.token, text, { 'Idempotency-Key': key, ...headers });
    expect(answer.status, answer.text.slice(0, 300)).toBe(status);
    expect(await state(victim)).toEqual(before);
    const good = toJsonText({ operations: [create(fresh('retried'))] });
    const first = await post(door, victim.token, good, { 'Idempotency-Key': key });
    expect(first.status, first.text.slice(0, 300)).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const replay = await post(door, victim.token, good, { 'Idempotency-Key': key });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.text).toBe(first.text);
    expect((await rowsOf(victim.id)).tasks.length).toBe(before.mine.tasks.length + 1);
  });

  it('refuses a hostile Idempotency-Key on the header, with a good or a hostile batch, and stores nothing', async () => {
    for (const key of ['k'.repeat(256), 'a b', 'é', '']) {
      const answer = await refused(door, victim, { operations: [create('x')] }, { status: 422, errors: [['invalid', undefined]] }, { 'Idempotency-Key': key });
      expect(answer.errors[0]!.source).toEqual({ parameter: 'Idempotency-Key' });
      await refused(door, victim, { operations: [] }, { status: 422, some: [] }, { 'Idempotency-Key': key });
    }
  });
});

describe('Idempotency-Key through the typed client', () => {
  it('a refused batch stores nothing under its key: the retry with a good batch runs', async () => {
    const victim = await newVictim();
    const key = randomUUID();
    const client = app.trpc(victim.token);
    await refusedViaClient(victim, { operations: [] }, { status: 422, errors: [['invalid', '/operations']] });
    const refusedWithKey = await client.batch.apply.mutate({ operations: [{ op: 'tasks.list', input: {} }] }, callOptions({ idempotencyKey: key })).catch((e: unknown) => e);
    expect((refusedWithKey as TRPCClientError<any>).data).toMatchObject({ code: 'invalid', httpStatus: 422 });
    const ran = await client.batch.apply.mutate({ operations: [create('typed retry')] }, callOptions({ idempotencyKey: key }));
    expect(ran.data.map((d) => d.status)).toEqual([201]);
  });
});

describeAfterTheRun();
