/**
 * What the hostile batch tests share (test/hostile/batch.test.ts, batch-trpc.test.ts and
 * batch-values.test.ts): a batch posted through either door as JSON text written by hand, or
 * through the typed client, each answer held to the contract (the harness: hostile.ts); the
 * rows a batch could write, of the user and of the other user, to show that a refusal keeps
 * nothing; and the small builders of operations.
 */
import { TRPCClientError } from '@trpc/client';
import { expect } from 'vitest';
import { callOptions } from '../../src/client.js';
import { errorProblems, expectContract, isRecord, judgeRest, judgeTrpcHttp, other, short, toJsonText, useHostileApp, type Victim, withDeadline } from './hostile.js';
import type { TestApp } from './test-app.js';

/** The app of the hostile batch file that called useHostileBatchApp (one per file). */
let app: TestApp;

/** The file's app and the other user (useHostileApp), for the helpers below as well. */
export function useHostileBatchApp(): TestApp {
  app = useHostileApp();
  return app;
}

const BATCH = '/api/batch';

export type Door = 'rest' | 'trpc';
export const DOORS: Door[] = ['rest', 'trpc'];

export interface ApiError {
  status: string;
  code: string;
  detail: string;
  source?: { pointer?: string; parameter?: string; header?: string };
}

/** What a door answered to a batch: the envelope's errors, or the batch's answers. */
export interface Answer {
  status: number;
  errors: ApiError[];
  data: Array<{ status: number; body: any }>;
  headers: Headers;
  text: string;
}

export const parse = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};

/** `[code, pointer]` of each error, to compare whole lists. */
export const pairs = (errors: ApiError[]) => errors.map((e) => [e.code, e.source?.pointer]);

/** The batch's JSON text as a door sends it: as is on REST, under superjson's `json` on /trpc. */
export const framed = (door: Door, text: string) => (door === 'rest' ? text : `{"json":${text}}`);

/**
 * POSTs a batch written as JSON text through a door, within the hang deadline; the answer
 * must keep the contract (a 2xx, or the error envelope with a 4xx and nothing else).
 */
export async function post(door: Door, token: string, text: string, headers: Record<string, string> = {}): Promise<Answer> {
  const body = framed(door, text);
  const url = door === 'rest' ? `${app.baseUrl}${BATCH}` : `${app.baseUrl}/trpc/batch.apply`;
  const request = `${door} batch ${short(body)}`;
  const res = await withDeadline(request, fetch(url, { method: 'POST', headers: { Authorization: token, 'Content-Type': 'application/json', ...headers }, body }));
  const answer = await res.text();
  const parsed = parse(answer) as any;
  const outcome = door === 'rest' ? judgeRest(request, { status: res.status, headers: res.headers, body: parsed, text: answer }) : judgeTrpcHttp(request, res.status, answer);
  expectContract(outcome);
  if (door === 'rest') return { status: res.status, errors: parsed?.errors ?? [], data: parsed?.data ?? [], headers: res.headers, text: answer };
  return { status: res.status, errors: parsed?.error?.json?.data?.errors ?? [], data: parsed?.result?.data?.json?.data ?? [], headers: res.headers, text: answer };
}

/** batch.apply through the typed client (superjson: Date, BigInt, Map, Set, undefined…). */
export async function viaClient(token: string, input: unknown, options?: ReturnType<typeof callOptions>): Promise<Answer> {
  const client = app.trpc(token) as any;
  const call = withDeadline('typed batch.apply', client.batch.apply.mutate(input, options) as Promise<{ data: Answer['data'] }>);
  try {
    const result = await call;
    return { status: 200, errors: [], data: result.data, headers: new Headers(), text: JSON.stringify(result) };
  } catch (error) {
    if (!(error instanceof TRPCClientError) || !isRecord(error.data)) throw error;
    const data = error.data as { httpStatus: number; code: string; errors: ApiError[] };
    const problems = errorProblems(data.errors, data.httpStatus);
    if (data.code !== data.errors?.[0]?.code) problems.push('data.code is not the first error code');
    expect(problems, JSON.stringify(data).slice(0, 600)).toEqual([]);
    return { status: data.httpStatus, errors: data.errors, data: [], headers: new Headers(), text: JSON.stringify(data) };
  }
}

// ---------------------------------------------------------------------------------------------
// What "nothing kept" means: every row a batch could write, of the user and of the other user
// ---------------------------------------------------------------------------------------------

const idLiteral = (id: number) => {
  if (!Number.isSafeInteger(id)) throw new Error(`not a user id: ${id}`);
  return String(id);
};

/**
 * Each user's rows as JSON, in one statement: the users row, projects and tasks by id, events
 * by seq, idempotency keys (key, fingerprint, status, body) by key.
 */
const ROWS_SQL = (userIds: number[]) => `select u.id,
  (select coalesce(json_agg(r), '[]') from users r where r.id = u.id)::text as "user",
  (select coalesce(json_agg(r order by r.id), '[]') from projects r where r.user_id = u.id)::text as projects,
  (select coalesce(json_agg(r order by r.id), '[]') from tasks r where r.user_id = u.id)::text as tasks,
  (select coalesce(json_agg(r order by r.seq), '[]') from events r where r.user_id = u.id)::text as events,
  (select coalesce(json_agg(r order by r.key), '[]') from (select key, fingerprint, status, body from idempotency_keys k where k.user_id = u.id) r)::text as keys
from unnest(array[${userIds.map(idLiteral).join(',')}]::int8[]) with ordinality as u(id, n)
order by u.n`;

/** JSON text read back; an integer beyond 2^53 fails, as the pool's reading of an int8 does (src/db/orm-config.ts). */
const readRows = (text: string): any[] =>
  JSON.parse(text, (_key, value, context?: { source?: string }) => {
    if (typeof value === 'number' && !Number.isSafeInteger(value) && /^-?\d+$/.test(context?.source ?? '')) {
      throw new RangeError(`${context!.source} is beyond the integers a JS number holds exactly`);
    }
    return value;
  });

async function rowsOfUsers(userIds: number[]) {
  const found = await app.orm.em.fork().execute<Array<Record<'user' | 'projects' | 'tasks' | 'events' | 'keys', string>>>(ROWS_SQL(userIds));
  return found.map((r) => ({ user: readRows(r.user), projects: readRows(r.projects), tasks: readRows(r.tasks), events: readRows(r.events), keys: readRows(r.keys) }));
}

export async function rowsOf(userId: number) {
  return (await rowsOfUsers([userId]))[0]!;
}
export type Rows = Awaited<ReturnType<typeof rowsOf>>;

export async function state(victim: Victim): Promise<{ mine: Rows; theirs: Rows }> {
  const [mine, theirs] = await rowsOfUsers([victim.id, other().id]);
  return { mine: mine!, theirs: theirs! };
}

export interface Expected {
  status: number;
  /** The whole list of [code, pointer], in order. */
  errors?: Array<[string, string | undefined]>;
  /** Pairs that must be among the errors. */
  some?: Array<[string, string | undefined]>;
}

export function expectAnswer(answer: Answer, expected: Expected, what: string) {
  expect(answer.status, `${what}\n  -> ${short(answer.text)}`).toBe(expected.status);
  if (expected.errors) expect(pairs(answer.errors), what).toEqual(expected.errors);
  if (expected.some) expect(pairs(answer.errors), what).toEqual(expect.arrayContaining(expected.some));
}

/**
 * Sends a batch (a string is the JSON text itself, anything else is written as JSON) that must be
 * refused as expected, and keep nothing of the user or of the other user.
 */
export async function refused(door: Door, victim: Victim, body: unknown, expected: Expected, headers: Record<string, string> = {}): Promise<Answer> {
  const text = typeof body === 'string' ? body : toJsonText(body);
  const before = await state(victim);
  const answer = await post(door, victim.token, text, headers);
  expectAnswer(answer, expected, `${door} ${short(text)}`);
  expect(await state(victim), `rows kept after ${door} ${short(text)}`).toEqual(before);
  return answer;
}

/** The same through the typed client. */
export async function refusedViaClient(victim: Victim, input: unknown, expected: Expected): Promise<Answer> {
  const before = await state(victim);
  const answer = await viaClient(victim.token, input);
  expectAnswer(answer, expected, `typed client ${short(String(toJsonText(input)))}`);
  expect(await state(victim), 'rows kept after a refused typed call').toEqual(before);
  return answer;
}

/** Sends a batch that must land; returns its answers. */
export async function landed(door: Door, victim: Victim, body: unknown): Promise<Answer['data']> {
  const text = typeof body === 'string' ? body : toJsonText(body);
  const answer = await post(door, victim.token, text);
  expect(answer.status, `${door} ${short(text)}\n  -> ${short(answer.text)}`).toBe(200);
  return answer.data;
}

let names = 0;
/** A project name no other of the run has. */
export const fresh = (prefix = 'B') => `${prefix}${++names}`;

export const create = (label: string, extra: Record<string, unknown> = {}) => ({ op: 'tasks.create', ...extra, input: { task: { label } } });
export const many = (n: number, label = 'x') => Array.from({ length: n }, (_, i) => create(`${label}${i}`));

/** `n` arrays or objects inside one another around `inner`. */
export const arrays = (n: number, inner = '') => '['.repeat(n) + inner + ']'.repeat(n);
export const objects = (n: number, inner = '1') => '{"a":'.repeat(n) + inner + '}'.repeat(n);

/** How deep a parsed JSON value nests (a scalar is 0, `[]` is 1). */
export function depthOf(value: unknown): number {
  let depth = 0;
  for (let level = [value]; level.some((v) => typeof v === 'object' && v !== null); depth++) {
    level = level.flatMap((v) => (typeof v === 'object' && v !== null ? Object.values(v) : []));
  }
  return depth;
}
