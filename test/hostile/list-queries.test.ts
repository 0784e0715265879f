/**
 * Hostile values for every query parameter of both lists (API-CONTRACT.md §12, §2), through
 * both doors (the harness: test/helpers/hostile.ts): wrong types (on /trpc strings for
 * numbers, objects, nested arrays, booleans, null, NaN / Infinity / BigInt / Date / Set
 * through superjson, raw JSON numbers beyond 2^53 and 1e400), odd numbers written as text on
 * /api (1e400, -1, 2^53+1, 01, 1e3, 0x10, " 1"), empty values, repeated parameters, `,,` and
 * trailing commas, `abandoned` as a state, unknown sort attributes and `--order`, searches of 0
 * and 101 code points or with NUL, dates that do not exist.
 *
 * Every bad request is 400 with code `invalid` and one error per bad parameter, naming it in
 * `source.parameter`, all the bad parameters of the request reported; it changes nothing (the
 * victim's list pages and a digest of every row are the same after); never a 5xx. Unknown
 * parameters are ignored, and searches are literal: `%`, `_`, `\` and quotes are text, not
 * patterns or SQL.
 *
 * What this file found in the service is pinned as plain tests ("pinned (was …)"):
 * `planned_on` of 9999-12-31, 0000-… and 0001-… was a 500 on both doors, and a REST `q` whose
 * percent-decoded bytes are not UTF-8 was searched as U+FFFD instead of refused.
 */
import fc from 'fast-check';
import { TRPCClientError } from '@trpc/client';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_TIMESTAMP } from '../../src/core/fields.js';
import {
  assertHostile,
  describeAfterTheRun,
  expectUnchanged,
  isRecord,
  judgeRest,
  judgeTrpcClient,
  newVictim,
  other,
  PROPERTY_TIMEOUT,
  RUNS,
  snapshot,
  trpcRaw,
  useHostileApp,
  type Outcome,
  type Victim,
} from '../helpers/hostile.js';
import { T0, seconds } from '../helpers/test-app.js';

const app = useHostileApp();
const NOW = seconds(T0);

type Kind = 'tasks' | 'projects';
const PATH: Record<Kind, string> = { tasks: '/api/users/me/tasks', projects: '/api/users/me/projects' };
const PROCEDURE: Record<Kind, string> = { tasks: 'tasks.list', projects: 'projects.list' };
const PARAMETERS: Record<Kind, string[]> = {
  tasks: ['page', 'page_size', 'state', 'project_id', 'q', 'planned_after', 'planned_before', 'planned_on', 'sort'],
  projects: ['page', 'page_size', 'state', 'q', 'due_after', 'due_before', 'sort'],
};

const enc = encodeURIComponent;
const repeat = (text: string, n: number, sep = '') => Array.from({ length: n }, () => text).join(sep);

// ---------------------------------------------------------------------------------------------
// Values, as /api writes them (already percent-encoded) and as /trpc sends them
// ---------------------------------------------------------------------------------------------

/** Text that is no integer as the REST door reads one (decimal digits, no sign, no leading zero). */
const NOT_INTEGER_TEXT = [
  '-1', '1e400', '9007199254740993', '01', '1e3', '0x10', '%201', '1%20', '+1', '1.5', '1.0', '', 'abc', 'NaN', 'Infinity',
  '%D9%A1', '%EF%BC%91', '1,2', '-0', '1%00', '9'.repeat(400),
];
const TIMESTAMP_TEXT_BAD = [...NOT_INTEGER_TEXT, '253402300800', '2026-06-15', 'yesterday', 'now'];

/** Bad values of each parameter as REST query text (percent-encoded where needed). */
function badRestValues(kind: Kind, foreignOrOwnId: number): Record<string, string[]> {
  const common = {
    page: [...NOT_INTEGER_TEXT, '0'],
    page_size: [...NOT_INTEGER_TEXT, '0', '201', '1000', '2147483648'],
    q: ['', repeat('a', 101), enc(repeat('😀', 101)), enc(repeat('é', 101)), 'a%00b', '%00'],
  };
  if (kind === 'projects') {
    return {
      ...common,
      state: ['', 'abandoned', 'planned', 'started,,paused', 'started,', ',started', ',', 'STARTED', 'none', 'started%00', repeat('started', 101, ','), 'started,abandoned'],
      due_after: TIMESTAMP_TEXT_BAD,
      due_before: TIMESTAMP_TEXT_BAD,
      sort: ['', 'foo', '--id', '-', '+id', 'ID', 'id,name', 'order', 'label', 'pausedAt', 'finishedAt', 'due_at', 'dueat', 'slug', 'plannedAt', '-%20id', 'id%00'],
    };
  }
  return {
    ...common,
    state: [
      '', 'abandoned', 'newed,abandoned', 'newed,,started', 'newed,', ',newed', ',', ',,', 'NEWED', 'Started', 'paused', 'none',
      'newed%00', '%20newed', 'newed%20', 'newed;started', 'newed|started', 'newed%2C%2Cstarted', repeat('newed', 101, ','), "newed'--",
    ],
    project_id: [
      '', '0', '-1', '01', '1e3', '0x10', '%201', '+1', 'None', 'NONE', 'null', '1,,2', '1,', ',none', 'none,', ',', '9007199254740993', '1.5',
      'abc', '1;2', 'none%00', `${foreignOrOwnId},abandoned`, repeat(String(foreignOrOwnId), 101, ','), repeat('none', 101, ','),
    ],
    planned_after: TIMESTAMP_TEXT_BAD,
    planned_before: TIMESTAMP_TEXT_BAD,
    planned_on: [
      '2026-02-30', '2026-13-01', 'yesterday', '', 'TODAY', 'Tomorrow', 'today%20', '2026-6-1', '20260601', '2026-06-01T00%3A00%3A00Z', '2026-02-29',
      '2026-00-10', '2026-06-00', '2026-06-32', '%202026-06-15', '2026-06-15%20', '1781524800', 'now', '2026-06-15,2026-06-16', '+2026-06-15',
      '02026-06-15', '2026-06-15%00', '2026%2F06%2F15',
    ],
    sort: [
      '', 'foo', '--order', '-', '+order', 'ORDER', 'order,id', 'order,-id', 'abandonedAt', 'plannedCount', 'state', 'dueAt', 'name', 'label%20',
      'order%00', '-%20order', 'planned_at', 'started_at', 'id%2Corder', '-order-', '-%2Dorder',
    ],
  };
}

/** Good values of each parameter as REST query text. */
function goodRestValues(kind: Kind, v: Victim): Record<string, string[]> {
  const common = {
    page: ['1', '2', '999999', '2147483648'],
    page_size: ['1', '200', '7', '50'],
    q: ['a', '%25', enc(repeat('😀', 100)), 'Lo', '_', '%5C', enc("'; drop table tasks; --"), '%20'],
  };
  const seconds_ = ['0', '1781524800', String(MAX_TIMESTAMP)];
  if (kind === 'projects') {
    return {
      ...common,
      state: ['newed', 'started,paused', 'finished,newed,started,paused', 'newed,newed'],
      due_after: seconds_,
      due_before: seconds_,
      sort: ['id', '-dueAt', 'name', 'startedAt', '-id'],
    };
  }
  return {
    ...common,
    state: ['newed', 'newed,started', 'finished,finished', 'planned,newed,started,finished'],
    project_id: ['none', String(v.projectIds[0]), `${v.projectIds[0]},none`, String(other().projectIds[0]), '2147483647', repeat(String(v.projectIds[1]), 100, ',')],
    planned_after: seconds_,
    planned_before: seconds_,
    planned_on: ['today', 'tomorrow', '2028-02-29', '2026-06-15'],
    sort: ['order', '-label', 'plannedAt', '-finishedAt', 'id'],
  };
}

/** Wrong values for a number on /trpc. */
const NOT_A_NUMBER: unknown[] = ['1', ' 1', '01', '1e3', '0x10', -1, 1.5, NaN, Infinity, -Infinity, 2 ** 53, 2 ** 53 + 2, null, true, false, {}, [1], [[1]], 1n, new Date(0), new Set([1])];

function badTrpcValues(kind: Kind, v: Victim): Record<string, unknown[]> {
  const common = {
    page: [...NOT_A_NUMBER, 0],
    page_size: [...NOT_A_NUMBER, 0, 201],
    q: ['', repeat('a', 101), repeat('😀', 101), 'a\u0000b', '\u0000', '\ud800', 'x\udfffy', 5, ['a'], {}, null, true, new Date(0)],
  };
  if (kind === 'projects') {
    return {
      ...common,
      state: ['started', [], [['started']], ['abandoned'], ['started', 'abandoned'], ['planned'], [null], [''], ['STARTED'], [1], { 0: 'started' }, null, true, Array(101).fill('started'), new Set(['started']), 'started,paused'],
      due_after: [...NOT_A_NUMBER, MAX_TIMESTAMP + 1],
      due_before: [...NOT_A_NUMBER, MAX_TIMESTAMP + 1],
      sort: ['', '--id', 'foo', ['id'], 'id,name', 5, null, 'ID', 'order', ' id', 'id '],
    };
  }
  return {
    ...common,
    state: ['newed', [], [['newed']], ['abandoned'], ['newed', 'abandoned'], ['paused'], [null], [''], ['NEWED'], [1], { 0: 'newed' }, null, true, Array(101).fill('newed'), new Set(['newed']), 'newed,started'],
    project_id: [
      'none', v.projectIds[0], String(v.projectIds[0]), [], [0], [-1], [String(v.projectIds[0])], ['none'], [1.5], [NaN], [Infinity], [[v.projectIds[0]]],
      [2 ** 53], [true], [undefined], [1n], {}, null, Array(101).fill(null), new Set([null]), [{ id: v.projectIds[0] }],
    ],
    planned_after: [...NOT_A_NUMBER, MAX_TIMESTAMP + 1],
    planned_before: [...NOT_A_NUMBER, MAX_TIMESTAMP + 1],
    planned_on: ['2026-02-30', '2026-13-01', 'yesterday', '', 'TODAY', 'today ', '2026-06-15T00:00:00Z', 20260615, new Date(0), ['today'], null, true, {}],
    sort: ['', '--order', 'foo', ['order'], 'order,id', 5, null, 'ORDER', 'abandonedAt', ' order', 'order '],
  };
}

function goodTrpcValues(kind: Kind, v: Victim): Record<string, unknown[]> {
  const common = {
    page: [1, 2, 999_999, undefined],
    page_size: [1, 200, 7],
    q: ['a', '%', repeat('😀', 100), "'; drop table tasks; --", '_', '\\'],
  };
  if (kind === 'projects') {
    return { ...common, state: [['newed'], ['started', 'paused']], due_after: [0, NOW, MAX_TIMESTAMP], due_before: [0, NOW, MAX_TIMESTAMP], sort: ['id', '-name', 'dueAt'] };
  }
  return {
    ...common,
    state: [['newed'], ['newed', 'started'], ['finished', 'finished']],
    project_id: [[null], [v.projectIds[0]], [v.projectIds[0], null], [other().projectIds[0]], [2_147_483_647]],
    planned_after: [0, NOW, MAX_TIMESTAMP],
    planned_before: [0, NOW, MAX_TIMESTAMP],
    planned_on: ['today', 'tomorrow', '2028-02-29'],
    sort: ['order', '-label', 'startedAt'],
  };
}

const show = (value: unknown): string => {
  if (typeof value === 'bigint') return `${value}n`;
  if (value instanceof Date) return `Date(${value.getTime()})`;
  if (value instanceof Set) return `Set(${JSON.stringify([...value])})`;
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  const text =
    JSON.stringify(value, (_key, v) =>
      typeof v === 'bigint' ? `${v}n` : typeof v === 'number' && !Number.isFinite(v) ? String(v) : v === undefined ? 'undefined' : v instanceof Set ? `Set(${[...v].join(',')})` : v,
    ) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 80)}…(${text.length})` : text;
};

// ---------------------------------------------------------------------------------------------
// Judging a refusal
// ---------------------------------------------------------------------------------------------

/** What is wrong with `errors` for a request whose bad parameters are `bad`: one `invalid` per bad parameter, each named once. */
function parameterProblems(errors: unknown, status: number, bad: readonly string[]): string[] {
  const problems: string[] = [];
  if (status !== 400) problems.push(`status ${status}, expected 400`);
  if (!Array.isArray(errors)) return [...problems, `errors is not an array: ${JSON.stringify(errors)}`];
  const named: string[] = [];
  for (const error of errors) {
    if (!isRecord(error)) {
      problems.push('an error is not an object');
      continue;
    }
    if (error.status !== '400' || error.code !== 'invalid') problems.push(`an error is ${error.status} ${error.code}, expected 400 invalid`);
    if (typeof error.title !== 'string' || !error.title || typeof error.detail !== 'string' || !error.detail) problems.push('an error without title or detail');
    if (!isRecord(error.source) || Object.keys(error.source).join() !== 'parameter' || typeof error.source.parameter !== 'string') {
      problems.push(`an error whose source is not {parameter}: ${JSON.stringify(error.source)}`);
      continue;
    }
    named.push(error.source.parameter);
  }
  const want = [...bad].sort();
  const got = [...named].sort();
  if (JSON.stringify(got) !== JSON.stringify(want)) problems.push(`parameters named ${JSON.stringify(got)}, expected each of ${JSON.stringify(want)} once`);
  return problems;
}

async function restGet(kind: Kind, token: string, query: string): Promise<Outcome> {
  const path = query ? `${PATH[kind]}?${query}` : PATH[kind];
  const res = await app.request('GET', path, { token });
  return judgeRest(`GET ${path.length > 400 ? `${path.slice(0, 400)}…` : path}`, res);
}

/** A REST list request that must be refused on exactly these parameters. */
async function expectRestRefused(kind: Kind, token: string, query: string, bad: readonly string[]): Promise<string[]> {
  const outcome = await restGet(kind, token, query);
  const problems = [...outcome.problems, ...parameterProblems((outcome.body as any)?.errors, outcome.status, bad)];
  if (outcome.status === 400 && (outcome.body as any)?.data !== undefined) problems.push('a 400 with data');
  return problems.length ? [`${outcome.request}\n    → ${outcome.response.slice(0, 300)}\n    ${problems.join('; ')}`] : [];
}

/** The tRPC error of a list call through the typed client, or its success. */
async function trpcCall(kind: Kind, token: string, input: unknown): Promise<{ ok: true; value: any } | { ok: false; data: any; error: unknown }> {
  const api = app.trpc(token) as any;
  try {
    return { ok: true, value: await api[kind].list.query(input) };
  } catch (error) {
    return { ok: false, data: error instanceof TRPCClientError ? error.data : undefined, error };
  }
}

async function expectTrpcRefused(kind: Kind, token: string, input: Record<string, unknown>, bad: readonly string[]): Promise<string[]> {
  const answer = await trpcCall(kind, token, input);
  const request = `${PROCEDURE[kind]}(${Object.entries(input).map(([k, v]) => `${k}: ${show(v)}`).join(', ')})`;
  if (answer.ok) return [`${request}\n    → accepted: ${JSON.stringify(answer.value).slice(0, 200)}`];
  const data = answer.data;
  if (!isRecord(data)) return [`${request}\n    → no tRPC error data: ${String(answer.error)}`];
  const problems = parameterProblems(data.errors, data.httpStatus as number, bad);
  if (data.code !== 'invalid') problems.push(`data.code ${JSON.stringify(data.code)}`);
  return problems.length ? [`${request}\n    → ${JSON.stringify(data).slice(0, 300)}\n    ${problems.join('; ')}`] : [];
}

function expectNoProblems(problems: string[]) {
  if (problems.length > 0) expect.fail(`${problems.length} answers broke the contract:\n  ${problems.join('\n  ')}`);
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

let victim: Victim;
beforeAll(async () => {
  victim = await newVictim();
});

describe.each(['tasks', 'projects'] as const)('GET /api/users/me/%s: each bad parameter alone', (kind) => {
  it.each(PARAMETERS[kind])('%s: every bad value is 400 invalid on it alone, and nothing changes', async (name) => {
    const before = await snapshot(victim);
    const problems: string[] = [];
    const values = badRestValues(kind, victim.projectIds[0]!)[name]!;
    for (const value of values) problems.push(...(await expectRestRefused(kind, victim.token, `${name}=${value}`, [name])));
    // Next to good values of the other parameters, it is still the only one named.
    const good = goodRestValues(kind, victim);
    const others = PARAMETERS[kind].filter((p) => p !== name).map((p) => `${p}=${good[p]![0]}`);
    for (const value of values.slice(0, 6)) problems.push(...(await expectRestRefused(kind, victim.token, [...others, `${name}=${value}`].join('&'), [name])));
    // Given twice, even with good values: one error on it.
    problems.push(...(await expectRestRefused(kind, victim.token, `${name}=${good[name]![0]}&${name}=${good[name]![1]}`, [name])));
    problems.push(...(await expectRestRefused(kind, victim.token, `${name}=${good[name]![0]}&${name}=${good[name]![0]}`, [name])));
    problems.push(...(await expectRestRefused(kind, victim.token, `${name}=${values[0]}&${name}=${values[1]}&${name}=`, [name])));
    expectNoProblems(problems);
    await expectUnchanged(victim, before);
  });

  it.each(PARAMETERS[kind])('%s: every good value is served', async (name) => {
    const problems: string[] = [];
    for (const value of goodRestValues(kind, victim)[name]!) {
      const outcome = await restGet(kind, victim.token, `${name}=${value}`);
      if (outcome.status !== 200 || outcome.problems.length) problems.push(`${outcome.request} → ${outcome.response.slice(0, 300)}`);
    }
    expectNoProblems(problems);
  });
});

describe.each(['tasks', 'projects'] as const)('tRPC %s.list: each bad member alone', (kind) => {
  it.each(PARAMETERS[kind])('%s: every wrong type or bad value is 400 invalid on it alone, and nothing changes', async (name) => {
    const before = await snapshot(victim);
    const problems: string[] = [];
    const values = badTrpcValues(kind, victim)[name]!;
    for (const value of values) problems.push(...(await expectTrpcRefused(kind, victim.token, { [name]: value }, [name])));
    const good = goodTrpcValues(kind, victim);
    const others = Object.fromEntries(PARAMETERS[kind].filter((p) => p !== name).map((p) => [p, good[p]![0]]));
    for (const value of values.slice(0, 8)) problems.push(...(await expectTrpcRefused(kind, victim.token, { ...others, [name]: value }, [name])));
    expectNoProblems(problems);
    await expectUnchanged(victim, before);
  });

  it.each(PARAMETERS[kind])('%s: every good value is served', async (name) => {
    const problems: string[] = [];
    for (const value of goodTrpcValues(kind, victim)[name]!) {
      const answer = await trpcCall(kind, victim.token, { [name]: value });
      if (!answer.ok) problems.push(`${PROCEDURE[kind]}({${name}: ${show(value)}}) → ${JSON.stringify(answer.data ?? String(answer.error)).slice(0, 300)}`);
    }
    expectNoProblems(problems);
  });

  it('raw JSON numbers the typed client cannot write (1e400, 2^53+1, -1e400, 1e-400) are 400 invalid on their member', async () => {
    const before = await snapshot(victim);
    const problems: string[] = [];
    const numeric = PARAMETERS[kind].filter((p) => p.startsWith('page') || p.endsWith('_after') || p.endsWith('_before'));
    for (const name of numeric) {
      for (const text of ['1e400', '-1e400', '9007199254740993', '-9007199254740993', '123456789012345678901234567890', '1.5', '1e-400'].filter((t) => !(t === '1e-400' && !name.startsWith('page')))) {
        const outcome = await trpcRaw(PROCEDURE[kind], 'query', victim.token, `{"json":{"${name}":${text}}}`);
        const data = (outcome.body as any)?.error?.json?.data;
        const found = [...outcome.problems, ...parameterProblems(data?.errors, outcome.status, [name])];
        if (found.length) problems.push(`${outcome.request} → ${outcome.response.slice(0, 300)}\n    ${found.join('; ')}`);
      }
    }
    // And one of every bad member at once, as raw JSON.
    const all = await trpcRaw(PROCEDURE[kind], 'query', victim.token, `{"json":{${PARAMETERS[kind].map((p) => `"${p}":${p === 'state' || p === 'project_id' ? '[[1e400]]' : '1e400'}`).join(',')}}}`);
    const found = [...all.problems, ...parameterProblems((all.body as any)?.error?.json?.data?.errors, all.status, PARAMETERS[kind])];
    if (found.length) problems.push(`${all.request} → ${all.response.slice(0, 300)}\n    ${found.join('; ')}`);
    expectNoProblems(problems);
    await expectUnchanged(victim, before);
  });
});

describe.each(['tasks', 'projects'] as const)('%s: every bad parameter of one request is reported, once', (kind) => {
  it('REST: one bad value of each parameter at once', async () => {
    const before = await snapshot(victim);
    const bad = badRestValues(kind, victim.projectIds[0]!);
    const problems: string[] = [];
    for (let i = 0; i < 5; i++) {
      const query = PARAMETERS[kind].map((p) => `${p}=${bad[p]![(i * 3) % bad[p]!.length]}`).join('&');
      problems.push(...(await expectRestRefused(kind, victim.token, query, PARAMETERS[kind])));
    }
    // A parameter bad in two ways (and given twice) is named once.
    const twice = PARAMETERS[kind].map((p) => `${p}=${bad[p]![0]}&${p}=${bad[p]![1]}`).join('&');
    problems.push(...(await expectRestRefused(kind, victim.token, twice, PARAMETERS[kind])));
    const state = kind === 'tasks' ? 'abandoned,,NEWED,' : 'abandoned,,STARTED,';
    problems.push(...(await expectRestRefused(kind, victim.token, `state=${state}&q=&sort=--id`, ['state', 'q', 'sort'])));
    // Past a thousand empty members (where Express's parser stopped reading), still read and refused.
    problems.push(...(await expectRestRefused(kind, victim.token, `${'&'.repeat(1_000)}page=2&page=3&state=zzz`, ['page', 'state'])));
    expectNoProblems(problems);
    await expectUnchanged(victim, before);
  });

  it('tRPC: one bad value of each member at once', async () => {
    const before = await snapshot(victim);
    const bad = badTrpcValues(kind, victim);
    const problems: string[] = [];
    for (let i = 0; i < 5; i++) {
      const input = Object.fromEntries(PARAMETERS[kind].map((p) => [p, bad[p]![(i * 5) % bad[p]!.length]]));
      problems.push(...(await expectTrpcRefused(kind, victim.token, input, PARAMETERS[kind])));
    }
    const state = kind === 'tasks' ? ['abandoned', '', 'NEWED'] : ['abandoned', '', 'STARTED'];
    problems.push(...(await expectTrpcRefused(kind, victim.token, { state, q: '', sort: '--id' }, ['state', 'q', 'sort'])));
    expectNoProblems(problems);
    await expectUnchanged(victim, before);
  });

  it('a property: random parameters, each absent, good or bad, in any order, with unknown ones; exactly the bad ones are named (both doors)', async () => {
    const names = PARAMETERS[kind];
    const restGood = goodRestValues(kind, victim);
    const restBad = badRestValues(kind, victim.projectIds[0]!);
    const trpcGood = goodTrpcValues(kind, victim);
    const trpcBad = badTrpcValues(kind, victim);
    const choice = fc.constantFrom<'absent' | 'good' | 'bad' | 'twice'>('absent', 'absent', 'absent', 'good', 'good', 'bad', 'twice');
    const arb = fc.record({
      door: fc.constantFrom<'rest' | 'trpc'>('rest', 'trpc'),
      choices: fc.tuple(...names.map(() => fc.tuple(choice, fc.nat()))),
      order: fc.shuffledSubarray(names, { minLength: names.length, maxLength: names.length }),
      unknown: fc.subarray([['Page', '0'], ['STATE', 'abandoned'], ['sort_by', '--x'], ['q%5B%5D', ''], ['filter%5Bstate%5D', 'x'], ['page_size%00', '0'], ['input', '%7B%7D']] as const),
    });
    await assertHostile(victim, arb, async ({ door, choices, order, unknown }) => {
      const picked = new Map(names.map((name, i) => [name, choices[i]!]));
      const bad = names.filter((n) => ['bad', 'twice'].includes(picked.get(n)![0]));
      let outcome: Outcome;
      let errors: unknown;
      if (door === 'rest') {
        const parts: string[] = [];
        for (const name of order) {
          const [c, k] = picked.get(name)!;
          if (c === 'good') parts.push(`${name}=${restGood[name]![k % restGood[name]!.length]}`);
          if (c === 'bad') parts.push(`${name}=${restBad[name]![k % restBad[name]!.length]}`);
          if (c === 'twice') parts.push(`${name}=${restGood[name]![k % restGood[name]!.length]}`, `${name}=${restGood[name]![(k + 1) % restGood[name]!.length]}`);
        }
        for (const [n, v] of unknown) parts.push(`${n}=${v}`);
        outcome = await restGet(kind, victim.token, parts.join('&'));
        errors = (outcome.body as any)?.errors;
      } else {
        const input: Record<string, unknown> = {};
        for (const name of order) {
          const [c, k] = picked.get(name)!;
          if (c === 'good') input[name] = trpcGood[name]![k % trpcGood[name]!.length];
          if (c === 'bad' || c === 'twice') input[name] = trpcBad[name]![k % trpcBad[name]!.length];
        }
        for (const [n, v] of unknown) input[decodeURIComponent(n)] = v;
        const answer = await trpcCall(kind, victim.token, input);
        outcome = await judgeTrpcClient(`${PROCEDURE[kind]}(${show(input)})`, async () => {
          if (answer.ok) return answer.value;
          throw answer.error;
        });
        errors = answer.ok ? undefined : answer.data?.errors;
      }
      if (bad.length === 0) {
        if (outcome.status !== 200) outcome.problems.push(`expected 200 (no bad parameter), got ${outcome.status}`);
      } else {
        outcome.problems.push(...parameterProblems(errors, outcome.status, bad));
      }
      return outcome;
    }, { numRuns: RUNS });
  }, PROPERTY_TIMEOUT + 10_000);
});

describe('unknown parameters are ignored', () => {
  // Nothing but the links, which keep every parameter of the request (API-CONTRACT.md §12).
  const withoutLinks = (body: { links?: unknown }) => ({ ...body, links: undefined });
  it.each(['tasks', 'projects'] as const)('%s: on REST and tRPC, unknown parameters (however close to known ones) change nothing in the answer but its links', async (kind) => {
    const plain = await app.request('GET', PATH[kind], { token: victim.token });
    expect(plain.status).toBe(200);
    const withGood = await app.request('GET', `${PATH[kind]}?page_size=2&sort=-id`, { token: victim.token });
    expect(withGood.status).toBe(200);
    for (const extra of [
      'foo=bar', 'Page=0', 'PAGE=abc', 'page_Size=0', 'State=abandoned', 'STATE=x', 'Q=', 'q%5B%5D=a', 'sort_by=--id', 'sort%20=x', 'page%00=1',
      'filter%5Bstate%5D=abandoned', 'include=tasks', 'fields%5Btask%5D=label', 'due_on=yesterday', 'planned_at=-1', '=1', '&&', 'page[]=0',
    ]) {
      const res = await app.request('GET', `${PATH[kind]}?${extra}`, { token: victim.token });
      expect(res.status, `${extra}: ${res.text}`).toBe(200);
      expect(withoutLinks(res.body), extra).toEqual(withoutLinks(plain.body));
      // The links repeat the members as sent (empty ones aside), in the request's order, `page` after them (it was not sent).
      const kept = extra.split('&').filter((m) => m !== '').map((m) => `${m}&`).join('');
      expect(res.body.links.first, extra).toBe(`${app.baseUrl}${PATH[kind]}?${kept}page=1`);
      const mixed = await app.request('GET', `${PATH[kind]}?${extra}&page_size=2&sort=-id`, { token: victim.token });
      expect(withoutLinks(mixed.body), extra).toEqual(withoutLinks(withGood.body));
      expect(mixed.body.links.first, extra).toBe(`${app.baseUrl}${PATH[kind]}?${kept}page_size=2&sort=-id&page=1`);
    }
    // Kept as sent, but a character a URL's query cannot hold is percent-encoded in the link.
    const odd = await app.request('GET', `${PATH[kind]}?x=a|b"{}`, { token: victim.token });
    expect(odd.body.links.first).toBe(`${app.baseUrl}${PATH[kind]}?x=a%7Cb%22%7B%7D&page=1`);
    // The links are part of the answer, so its ETag moves with them: no 304 across other unknown parameters.
    const one = await app.request('GET', `${PATH[kind]}?foo=1`, { token: victim.token });
    const two = await app.request('GET', `${PATH[kind]}?foo=2`, { token: victim.token, headers: { 'If-None-Match': one.headers.get('etag')! } });
    expect(two.status).toBe(200);
    expect(two.headers.get('etag')).not.toBe(one.headers.get('etag'));
    const api = app.trpc(victim.token) as any;
    expect(await api[kind].list.query({ foo: 'bar', Page: 0, STATE: ['abandoned'], sort_by: '--id', pageSize: 'x' })).toEqual(plain.body);
    expect(await api[kind].list.query({ page_size: 2, sort: '-id', Q: '', filter: { state: 'abandoned' } })).toEqual(withGood.body);
  });
});

describe('odd but valid values are served, never a 5xx', () => {
  it('REST and tRPC: boundaries of every parameter', async () => {
    const before = await snapshot(victim);
    const problems: string[] = [];
    const restOk = [
      ['tasks', 'page=9007199254740991'],
      ['tasks', 'page=9007199254740991&page_size=200'],
      ['projects', 'page=9007199254740991&page_size=200'],
      ['tasks', `q=${enc(repeat('😀', 100))}`],
      ['tasks', `q=${enc(repeat('👨‍👩‍👧', 20))}`],
      ['tasks', `q=${enc('\u212a')}`],
      ['projects', `q=${enc(repeat('é', 100))}`],
      ['tasks', `state=${repeat('newed', 100, ',')}`],
      ['tasks', `project_id=${repeat('none', 100, ',')}`],
      ['tasks', `planned_after=${MAX_TIMESTAMP}&planned_before=0`],
      ['tasks', `planned_after=0&planned_before=${MAX_TIMESTAMP}&planned_on=9999-12-30`],
      ['tasks', 'planned_on=9999-12-30'],
      ['tasks', 'planned_on=1970-01-01'],
      ['tasks', 'planned_on=1969-12-31'],
      ['tasks', 'planned_on=1000-01-01'],
      ['tasks', 'planned_on=2000-02-29'],
      ['projects', `due_after=${MAX_TIMESTAMP}&due_before=${MAX_TIMESTAMP}`],
    ] as const;
    for (const [kind, query] of restOk) {
      const outcome = await restGet(kind, victim.token, query);
      if (outcome.status !== 200 || outcome.problems.length) problems.push(`${outcome.request} → ${outcome.response.slice(0, 300)}`);
    }
    const trpcOk: Array<[Kind, Record<string, unknown>]> = [
      ['tasks', { page: Number.MAX_SAFE_INTEGER, page_size: 200 }],
      ['projects', { page: Number.MAX_SAFE_INTEGER, page_size: 1 }],
      ['tasks', { q: repeat('😀', 100), state: Array(100).fill('newed'), project_id: Array(100).fill(null) }],
      ['tasks', { planned_after: -0, planned_before: MAX_TIMESTAMP, planned_on: '9999-12-30' }],
      ['projects', { due_after: 0, due_before: 0, state: Array(100).fill('paused') }],
      ['tasks', { page: undefined, q: undefined, state: undefined }],
    ];
    for (const [kind, input] of trpcOk) {
      const answer = await trpcCall(kind, victim.token, input);
      if (!answer.ok) problems.push(`${PROCEDURE[kind]}(${show(input)}) → ${JSON.stringify(answer.data ?? String(answer.error)).slice(0, 300)}`);
    }
    expectNoProblems(problems);
    await expectUnchanged(victim, before);
  });

  // Found by this file (it was a 500): the last day before
  // year 10000 is a date that exists, but the day after it, the end of the range `planned_on`
  // names, was sent to PostgreSQL as "+010000-01-01T00:00:00.000Z", which it refuses ("time
  // zone displacement out of range"): 500 internal_error on both doors. Expected: 200.
  it('pinned (was a 500): planned_on=9999-12-31 is served (200), on both doors', async () => {
    const problems: string[] = [];
    const outcome = await restGet('tasks', victim.token, 'planned_on=9999-12-31');
    if (outcome.status !== 200 || outcome.problems.length) problems.push(`${outcome.request} → ${outcome.response.slice(0, 300)}`);
    const answer = await trpcCall('tasks', victim.token, { planned_on: '9999-12-31' });
    if (!answer.ok) problems.push(`tasks.list({planned_on: "9999-12-31"}) → ${JSON.stringify(answer.data ?? String(answer.error)).slice(0, 300)}`);
    expectNoProblems(problems);
  });

  // Found by this file (it was a 500): dates of the years 0000
  // and 0001 pass `parseLocalDate`, then the day's first instant was looked for near year 0,
  // where the formatter's year (without an era) no longer orders the dates, and PostgreSQL
  // refused the instants sent ("date/time field value out of range: 0000-12-31T09:00:01.000Z",
  // "invalid input syntax … -000001-12-31…"). Expected: 400 invalid on planned_on, or a page.
  it.each(['0000-01-01', '0001-01-01', '0000-02-29'])('pinned (was a 500): planned_on=%s is refused on planned_on or served, never a 5xx, on both doors', async (day) => {
    const problems: string[] = [];
    const outcome = await restGet('tasks', victim.token, `planned_on=${day}`);
    const restFine = outcome.status === 200 || parameterProblems((outcome.body as any)?.errors, outcome.status, ['planned_on']).length === 0;
    if (!restFine || outcome.problems.length) problems.push(`${outcome.request} → ${outcome.response.slice(0, 300)}`);
    const answer = await trpcCall('tasks', victim.token, { planned_on: day });
    const trpcFine = answer.ok || (answer.data?.httpStatus === 400 && parameterProblems(answer.data?.errors, 400, ['planned_on']).length === 0);
    if (!trpcFine) problems.push(`tasks.list({planned_on: "${day}"}) → ${JSON.stringify(answer.data ?? String(answer.error)).slice(0, 300)}`);
    expectNoProblems(problems);
  });
});

describe('searches are literal text', () => {
  const LABELS = ['100% sure', '100 percent', 'a_b', 'ab', 'aXb', 'back\\slash', 'backslash', "it's", 'say "hi"', "'; drop table tasks; --", 'x%_\\y', 'plain', 'semi;colon'];
  let user: { token: string };
  const ids = new Map<string, number>();
  beforeAll(async () => {
    user = await app.register();
    for (const label of LABELS) {
      const res = await app.request('POST', PATH.tasks, { token: user.token, body: { task: { label } } });
      expect(res.status, res.text).toBe(201);
      ids.set(label, res.body.data.id);
    }
    for (const name of ['a_b', 'aXb', 'a-b', 'ab', 'A_B_C']) {
      const res = await app.request('POST', PATH.projects, { token: user.token, body: { project: { name } } });
      expect(res.status, res.text).toBe(201);
      ids.set(`project ${name}`, res.body.data.id);
    }
  });

  const TASK_CASES: Array<[string, string[]]> = [
    ['%', ['100% sure', 'x%_\\y']],
    ['_', ['a_b', 'x%_\\y']],
    ['\\', ['back\\slash', 'x%_\\y']],
    ["'", ["it's", "'; drop table tasks; --"]],
    ['"', ['say "hi"']],
    ["'; drop table", ["'; drop table tasks; --"]],
    ["'; DROP TABLE tasks; --", ["'; drop table tasks; --"]],
    ['%_', ['x%_\\y']],
    ['_\\', ['x%_\\y']],
    ['a_b', ['a_b']],
    ['\\%', []],
    ['%%', []],
    ['_%', []],
    ['\\\\', []],
    ["' OR '1'='1", []],
    ['--', ["'; drop table tasks; --"]],
    [';', ["'; drop table tasks; --", 'semi;colon']],
    ['100%', ['100% sure']],
    ['%sure', []],
    ['*', []],
    ['.', []],
    ['[a-z]', []],
    ['$1', []],
  ];

  it.each(TASK_CASES)('q=%j keeps only the labels holding it, on both doors; nothing changes', async (q, labels) => {
    const before = await snapshot(victim);
    const tasksBefore = await app.orm.em.fork().execute('select count(*)::int as n from tasks');
    const want = labels.map((l) => ids.get(l)).sort((a, b) => a! - b!);
    const rest = await app.request('GET', `${PATH.tasks}?q=${enc(q)}&sort=id`, { token: user.token });
    expect(rest.status, rest.text).toBe(200);
    expect(rest.body.data.map((t: any) => t.id), `REST q=${q}`).toEqual(want);
    expect(new URL(rest.body.links.first).searchParams.get('q')).toBe(q);
    const viaTrpc = await (app.trpc(user.token) as any).tasks.list.query({ q, sort: 'id' });
    expect(viaTrpc).toEqual(rest.body);
    expect(await app.orm.em.fork().execute('select count(*)::int as n from tasks')).toEqual(tasksBefore);
    await expectUnchanged(victim, before);
  });

  it.each([
    ['_', ['a_b', 'A_B_C']],
    ['%', []],
    ['-', ['a-b']],
    ['a_b', ['a_b', 'A_B_C']],
    ['A_b', ['a_b', 'A_B_C']],
    ['b_c', ['A_B_C']],
    ['\\', []],
    ["'", []],
  ] as Array<[string, string[]]>)('projects: q=%j keeps only the names holding it, on both doors', async (q, names) => {
    const want = names.map((n) => ids.get(`project ${n}`)).sort((a, b) => a! - b!);
    const rest = await app.request('GET', `${PATH.projects}?q=${enc(q)}`, { token: user.token });
    expect(rest.status, rest.text).toBe(200);
    expect(rest.body.data.map((p: any) => p.id), `REST q=${q}`).toEqual(want);
    expect(await (app.trpc(user.token) as any).projects.list.query({ q })).toEqual(rest.body);
  });

  // Found by this file (it was a 200): Express reads a query
  // string's bytes that are no UTF-8 as U+FFFD, and the REST door searched for that (its links
  // then carrying q=%EF%BF%BD…), where API-CONTRACT.md §1 refuses text with an unpaired
  // surrogate as invalid and the /trpc door refuses the same bytes in its query input (400
  // invalid_json, test/hostile/seams.test.ts). Expected: 400 invalid on `q`.
  it.each([
    ['a surrogate encoded in UTF-8', '%ED%A0%80'],
    ['a lone 0xFF', '%FF'],
    ['a truncated sequence', 'a%E2%82'],
  ])('pinned (was searched as U+FFFD): REST q with %s (%s) is 400 invalid on q, not searched as U+FFFD', async (_what, text) => {
    for (const kind of ['tasks', 'projects'] as const) {
      const problems = await expectRestRefused(kind, user.token, `q=${text}`, ['q']);
      expectNoProblems(problems);
    }
  });
});

describe('after the bad requests', () => {
  it('the victim and its lists are as they were made', async () => {
    const tasks = await app.request('GET', PATH.tasks, { token: victim.token });
    expect(tasks.body.data.map((t: any) => [t.id, t.attributes.label, t.attributes.order])).toEqual([
      [victim.taskIds[0], 'Loose', 1],
      [victim.taskIds[1], 'Linked', 2],
      [victim.taskIds[2], 'Planned', 3],
    ]);
    const projects = await app.request('GET', PATH.projects, { token: victim.token });
    expect(projects.body.data.map((p: any) => [p.id, p.attributes.name, p.attributes.state])).toEqual([
      [victim.projectIds[0], 'Alpha', 'newed'],
      [victim.projectIds[1], 'Beta', 'started'],
    ]);
  });
});

describeAfterTheRun();
