/**
 * Hostile batches (API-CONTRACT.md §1, §2, §15) as two properties (fast-check) on both
 * doors: a value of the wrong type, then any hostile value, put at one place of a batch that
 * is otherwise good (the body, the list, an operation, op, ref, if_match, input, its wrapper,
 * an id, a project_id, a ref's name). Each answer must be a 2xx or a 4xx envelope with its
 * pointers under /operations, and a refusal must keep nothing of the user or of the other
 * user (the harness: test/helpers/hostile.ts and test/helpers/hostile-batch.ts).
 * HOSTILE_RUNS=<n> runs each property n times (default 60).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_ID } from '../../src/core/fields.js';
import { MAX_JSON_DEPTH } from '../../src/core/limits.js';
import { describeAfterTheRun, expectContract, hostileValue, isRecord, newVictim, PROPERTY_TIMEOUT, short, superjsonOnly, toJsonText, trpc, type Victim } from '../helpers/hostile.js';
import { type ApiError, depthOf, DOORS, fresh, landed, post, refused, state, useHostileBatchApp } from '../helpers/hostile-batch.js';

useHostileBatchApp();

/** Runs per property. */
const RUNS = Number(process.env.HOSTILE_RUNS ?? 60);

// ---------------------------------------------------------------------------------------------
// Properties: wrong types at every level, then hostile values anywhere
// ---------------------------------------------------------------------------------------------

/** A batch that lands as it is: refs, an if_match, own ids. Each property breaks one place of it. */
function goodBatch(victim: Victim, name: string) {
  return {
    operations: [
      { op: 'projects.create', ref: 'p', input: { project: { name } } },
      { op: 'tasks.create', ref: 't', input: { task: { label: 'one', project_id: { ref: 'p' } } } },
      { op: 'tasks.update', input: { id: { ref: 't' }, task: { label: 'two' } } },
      { op: 'projects.update', input: { id: victim.projectIds[0], project: { description: 'good' } }, if_match: '*' },
      { op: 'tasks.reorder', input: { id: victim.taskIds[0], task: { order: 1 } } },
    ] as Array<Record<string, any>>,
  };
}
const WRAPPERS = ['project', 'task', 'task', 'project', 'task'];
const RESOURCES = [undefined, undefined, 'task', 'project', 'task'];

type Site = 'body' | 'operations' | 'operation' | 'op' | 'ref' | 'if_match' | 'input' | 'wrapper' | 'id' | 'project_id' | 'ref_name';
/** Which operations of the good batch have the place. */
const SITES: Record<Site, number[]> = {
  body: [0], operations: [0], operation: [0, 1, 2, 3, 4], op: [0, 1, 2, 3, 4], ref: [0, 1], if_match: [0, 1, 2, 3, 4],
  input: [0, 1, 2, 3, 4], wrapper: [0, 1, 2, 3, 4], id: [2, 3, 4], project_id: [1], ref_name: [1, 2],
};
const MISSING = Symbol('missing');

/** The good batch with the value at one place (MISSING: the member left out). */
function broken(victim: Victim, name: string, site: Site, index: number, value: unknown): unknown {
  const body = goodBatch(victim, name);
  const operation = body.operations[index]!;
  const put = (target: Record<string, any>, key: string) => {
    if (value === MISSING) delete target[key];
    else target[key] = value;
  };
  switch (site) {
    case 'body': return value === MISSING ? {} : value;
    case 'operations': put(body, 'operations'); break;
    case 'operation':
      if (value === MISSING) body.operations.splice(index, 1);
      else body.operations[index] = value as Record<string, any>;
      break;
    case 'op': case 'ref': case 'if_match': case 'input': put(operation, site); break;
    case 'wrapper': put(operation.input, WRAPPERS[index]!); break;
    case 'id': put(operation.input, 'id'); break;
    case 'project_id': put(operation.input.task, 'project_id'); break;
    case 'ref_name': put(index === 1 ? operation.input.task.project_id : operation.input.id, 'ref'); break;
  }
  return body;
}

/** What a wrong value (or none) at a place gets: the status and one error that must be among the errors. */
function expectedFor(site: Site, index: number, value: unknown): { status: number; error: [string, string] } {
  const at = `/operations/${index}`;
  const missing = value === MISSING;
  switch (site) {
    case 'body': return { status: 422, error: ['parameter_missing', '/operations'] };
    case 'operations': return { status: 422, error: [missing ? 'parameter_missing' : 'invalid', '/operations'] };
    case 'operation': return { status: 422, error: ['invalid', at] };
    case 'op': return { status: 422, error: [missing ? 'parameter_missing' : 'invalid', `${at}/op`] };
    // A create without its ref: the later use of the ref names nothing.
    case 'ref': return missing ? { status: 422, error: ['invalid', index === 0 ? '/operations/1/task/project_id' : '/operations/2/id'] } : { status: 422, error: ['invalid', `${at}/ref`] };
    case 'if_match': return { status: 422, error: ['invalid', `${at}/if_match`] };
    // None is an empty input, as of the wrong type: the id (404) or the wrapper is missing.
    case 'input':
      return RESOURCES[index] ? { status: 404, error: ['record_not_found', `${at}/${RESOURCES[index]}`] } : { status: 422, error: ['parameter_missing', `${at}/${WRAPPERS[index]}`] };
    case 'wrapper': return { status: 422, error: ['parameter_missing', `${at}/${WRAPPERS[index]}`] };
    case 'id': return isRecord(value) ? { status: 422, error: ['invalid', `${at}/id`] } : { status: 404, error: ['record_not_found', `${at}/${RESOURCES[index]}`] };
    case 'project_id': return { status: 422, error: ['invalid', `${at}/task/project_id`] };
    case 'ref_name': return { status: 422, error: ['invalid', index === 1 ? `${at}/task/project_id` : `${at}/id`] };
  }
}

const json = fc.jsonValue({ maxDepth: 2 });
const noRef = (v: unknown) => !(isRecord(v) && typeof v.ref === 'string');
const KINDS = {
  number: fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constantFrom(0, -1, 1.5, 2 ** 31, 2 ** 53, 1e308, -1e308)),
  string: fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom('', 'p', 't', '1', 'tasks.create', '__proto__')),
  boolean: fc.boolean(),
  null: fc.constant(null),
  array: fc.array(json, { maxLength: 3 }),
  object: fc.dictionary(fc.string({ maxLength: 6 }), json, { maxKeys: 3 }).filter(noRef),
};
type Kind = keyof typeof KINDS;
const allBut = (...right: Kind[]) => fc.oneof(...(Object.keys(KINDS) as Kind[]).filter((k) => !right.includes(k)).map((k) => KINDS[k] as fc.Arbitrary<unknown>));
/** A number that no id can be: not a positive integer of the id range. */
const notAnId = (v: unknown) => !(typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= MAX_ID);

/** A value of a wrong JSON type for each place (or, where the contract says what that gets, none). */
const WRONG: Record<Site, fc.Arbitrary<unknown>> = {
  body: allBut('object'),
  operations: fc.oneof(allBut('array'), fc.constant(MISSING)),
  operation: allBut('object'),
  op: fc.oneof(allBut('string'), fc.constant(MISSING)),
  ref: fc.oneof(allBut('string'), fc.constant(MISSING)),
  if_match: allBut('string'),
  input: fc.oneof(allBut('object'), fc.constant(MISSING)),
  wrapper: fc.oneof(allBut('object'), fc.constant(MISSING)),
  id: fc.oneof(allBut(), fc.constant(MISSING)).filter(notAnId),
  project_id: allBut('null').filter(notAnId),
  ref_name: fc.oneof(allBut('string'), fc.constant(MISSING)),
};

const breakage = fc.constantFrom(...(Object.keys(SITES) as Site[])).chain((site) =>
  fc.record({ site: fc.constant(site), index: fc.constantFrom(...SITES[site]), value: WRONG[site] }),
);

describe.each(DOORS)('a value of the wrong type at any place of a good batch, through %s', (door) => {
  it('is refused with the status and pointer of that place, and keeps nothing', async () => {
    const victim = await newVictim();
    // The batch the property breaks lands as it is.
    await landed(door, victim, goodBatch(victim, fresh('Good')));
    await fc.assert(
      fc.asyncProperty(breakage, async ({ site, index, value }) => {
        const body = broken(victim, fresh('Good'), site, index, value);
        const { status, error } = expectedFor(site, index, value);
        await refused(door, victim, toJsonText(body), { status, some: [error] });
      }),
      { numRuns: RUNS },
    );
  }, PROPERTY_TIMEOUT);
});

/** Hostile values of the harness (raw big numbers, lone surrogates, prototype keys, 1,000-level nesting, superjson-only values…). */
const anywhere = fc.constantFrom(...(Object.keys(SITES) as Site[])).chain((site) =>
  fc.record({
    site: fc.constant(site),
    index: fc.constantFrom(...SITES[site]),
    value: fc.oneof({ weight: 8, arbitrary: hostileValue }, { weight: 1, arbitrary: superjsonOnly }, { weight: 1, arbitrary: fc.constant<unknown>(MISSING) }),
    viaRaw: fc.boolean(),
  }),
);

describe.each(['rest', 'trpc'] as const)('a hostile value at any place of a good batch, through %s', (door) => {
  it('gets a 2xx or a 4xx envelope with pointers under /operations; a body nested too deep is invalid_json; a refusal keeps nothing', async () => {
    const victim = await newVictim();
    await fc.assert(
      fc.asyncProperty(anywhere, async ({ site, index, value, viaRaw }) => {
        const body = broken(victim, fresh('Hostile'), site, index, value);
        const before = await state(victim);
        let status: number;
        let errors: ApiError[] | undefined;
        let text: string | undefined;
        if (door === 'rest' || viaRaw) {
          text = toJsonText(body);
          const answer = await post(door, victim.token, text);
          ({ status, errors } = answer);
        } else {
          const outcome = await trpc('batch.apply', 'mutation', victim.token, body, false);
          expectContract(outcome);
          status = outcome.status;
          errors = (outcome.body as any)?.error?.json?.data?.errors;
        }
        const what = `${door} ${site}@${index} = ${short(String(toJsonText(value)))}`;
        for (const e of errors ?? []) if (e.source?.pointer !== undefined) expect(e.source.pointer, what).toMatch(/^\/operations(\/|$)/);
        if (text !== undefined && status !== 413) {
          // The input's own levels on either door (superjson's {"json": …} on /trpc is not counted).
          const depth = depthOf(JSON.parse(text));
          expect(errors?.[0]?.code === 'invalid_json', `${what}: depth ${depth}`).toBe(depth > MAX_JSON_DEPTH);
        }
        if (status >= 300) expect(await state(victim), `rows kept after ${what}`).toEqual(before);
        else expect(status, what).toBe(200);
      }),
      { numRuns: RUNS },
    );
  }, PROPERTY_TIMEOUT);
});

describeAfterTheRun();
