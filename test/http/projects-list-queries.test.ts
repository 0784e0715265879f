/**
 * The project list's query parameters (API-CONTRACT.md §12, §7; SPEC.md 4.2), as a property
 * over both doors: for a user with random projects (random names, states, start and due
 * dates, some due dates shared, some patched to the start instant) and random combinations of
 * `page`, `page_size`, `state`, `q`, `due_after`, `due_before` and `sort`, every page on /api
 * and on /trpc is the page of a reference computed here from the user's unfiltered list: the
 * same projects in the same order (ties by id, an unset dueAt as 0, names by code point) and
 * the same links (every parameter kept, only `page` changing, `last` from the filtered count).
 * Then the list ETag and the parameters, page sizes 1 and 200, and pages beyond the last.
 *
 * The clock is the test app's; the user's time zone stays UTC (zones are tested elsewhere).
 */
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_TIMESTAMP } from '../../src/core/fields.js';
import { PROJECT_SORTS } from '../../src/projects/project.schema.js';
import { DEFAULT_PAGE_SIZE, bothDoors, checkEveryPage, containsFolded, expectPage, icuLowerDisagreements, readWholeList, restList, sortItems, trpcList, type ListQuery } from '../helpers/list-queries.js';
import { createInBatches } from '../helpers/api-steps.js';
import { useTestApp } from '../helpers/test-app.js';
import { DAY, T0S } from '../helpers/times.js';

const app = useTestApp();
const KIND = 'projects' as const;
const PROJECTS = '/api/users/me/projects';
const PAGE_SIZE = DEFAULT_PAGE_SIZE.projects;
/** Datasets (users) of the property, and queries asked of each. */
const DATASETS = Number(process.env.LIST_QUERY_DATASETS ?? 6);
const QUERIES_PER_DATASET = Number(process.env.LIST_QUERY_QUERIES ?? 30);

const T0_DAY = T0S - 12 * 3600;
const dayStart = (s: number) => Math.floor(s / DAY) * DAY;
const nextMidnight = (s: number) => dayStart(s) + DAY;

const PROJECT_STATES = ['newed', 'started', 'paused', 'finished'] as const;
type ProjectState = (typeof PROJECT_STATES)[number];

/** Pieces of names (letters, digits, `_`, `-`), so that names share substrings in any case. */
const FRAGMENTS = ['alpha', 'Alpha', 'BETA', 'gam', 'x', 'X', '_', '-', '42', '0', 'Zed', 'kilo', 'K9', 'a_b', 'A-B', 'z'];
/** Characters of searches besides those of names: what no name holds, and the Kelvin sign, which folds to `k`. */
const Q_EXTRA = ['é', 'É', '%', ' ', '\u212a', 'ω', '😀', "'", '\\'];

// ---------------------------------------------------------------------------------------------
// The data of a user
// ---------------------------------------------------------------------------------------------

/** A due date: some seconds after the next midnight of the instant it is given at, or one of a few days shared by several projects. */
type DueChoice = { extra: number } | { pool: number };

interface ProjectPlan {
  name: string;
  state: ProjectState;
  startAgo: number;
  due: DueChoice;
  /** PATCH due_at while started: to the start instant itself, or some seconds after it. */
  patch: { after: number } | null;
  /** Seconds after the start for the pause, finish or restart (capped at now). */
  later: number;
  /** A started project that went through pause and restart, with or without a new due date. */
  restart: null | { due: DueChoice | null };
  tasks: number;
}

interface Dataset {
  now: number;
  projects: ProjectPlan[];
}

const dueChoice: fc.Arbitrary<DueChoice> = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 40 * DAY }).map((extra) => ({ extra })) },
  { weight: 1, arbitrary: fc.constantFrom(0, DAY - 1, 7 * DAY).map((extra) => ({ extra })) },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: 3 }).map((pool) => ({ pool })) },
);
const name = fc.oneof(
  { weight: 8, arbitrary: fc.array(fc.constantFrom(...FRAGMENTS), { minLength: 1, maxLength: 3 }).map((fs) => fs.join('')) },
  { weight: 1, arbitrary: fc.constantFrom('Z'.repeat(100), 'a'.repeat(99) + 'B') },
);
const projectPlan: fc.Arbitrary<ProjectPlan> = fc.record({
  name,
  state: fc.constantFrom(...PROJECT_STATES),
  startAgo: fc.oneof(fc.integer({ min: 0, max: 40 * DAY }), fc.constantFrom(0, DAY, 3 * DAY)),
  due: dueChoice,
  patch: fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 20 * DAY })).map((after) => ({ after })) }),
  later: fc.integer({ min: 0, max: 20 * DAY }),
  restart: fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.record({ due: fc.option(dueChoice, { nil: null }) }) }),
  tasks: fc.nat(2),
});
const dataset: fc.Arbitrary<Dataset> = fc.record({
  now: fc
    .tuple(fc.integer({ min: 0, max: 2 }), fc.oneof(fc.constantFrom(0, 1, 43_200, 86_399), fc.integer({ min: 0, max: 86_399 })))
    .map(([days, second]) => T0_DAY + days * DAY + second),
  projects: fc.uniqueArray(projectPlan, { minLength: 1, maxLength: 40, size: 'max', selector: (p) => p.name.toLowerCase() }),
});

interface Built {
  token: string;
  now: number;
  /** Every project, as the unfiltered list gives it (by id). */
  listed: any[];
}

async function ok(method: string, path: string, token: string, body?: unknown): Promise<any> {
  const res = await app.request(method, path, { token, body });
  if (res.status >= 300) throw new Error(`fixture ${method} ${path} ${JSON.stringify(body)}: ${res.status} ${res.text}`);
  return res.body;
}

/**
 * Makes the user of a dataset: every project (and its few tasks) first, in the dataset's
 * order; then the state changes, each at its own time, those ending `started` last (at most 3).
 */
async function build(d: Dataset): Promise<Built> {
  const { now } = d;
  app.clock.set(now * 1000);
  const user = await app.register();
  const { token } = user;
  const due = (choice: DueChoice, at: number) => ('pool' in choice ? nextMidnight(now) + choice.pool * DAY : nextMidnight(at) + choice.extra);

  let started = 0;
  const plans = d.projects.map((p) => ({ ...p, state: p.state === 'started' && ++started > 3 ? ('paused' as const) : p.state }));
  const model = new Map<number, any>();
  const ids: number[] = [];
  for (const plan of plans) {
    const doc = (await ok('POST', PROJECTS, token, { project: { name: plan.name } })).data;
    for (let i = 0; i < plan.tasks; i++) await ok('POST', '/api/users/me/tasks', token, { task: { label: `${plan.name} ${i}`, project_id: doc.id } });
    model.set(doc.id, doc);
    ids.push(doc.id);
  }
  const order = plans.map((p, i) => ({ p, id: ids[i]! })).sort((a, b) => Number(a.p.state === 'started') - Number(b.p.state === 'started'));
  for (const { p, id } of order) {
    if (p.state === 'newed') continue;
    const change = async (at: number, body: unknown) => {
      app.clock.set(Math.min(at, now) * 1000);
      model.set(id, (await ok('PUT', `/api/projects/${id}/state`, token, { project: body })).data);
    };
    const start = now - p.startAgo;
    await change(start, { state: 'started', due_at: due(p.due, start) });
    if (p.patch) model.set(id, (await ok('PATCH', `/api/projects/${id}`, token, { project: { due_at: start + p.patch.after } })).data);
    const later = Math.min(now, start + p.later);
    if (p.state === 'paused' || p.state === 'finished') await change(later, { state: p.state });
    else if (p.restart) {
      await change(later, { state: 'paused' });
      const restart = Math.min(now, later + 3600);
      await change(restart, p.restart.due ? { state: 'started', due_at: due(p.restart.due, restart) } : { state: 'started' });
    }
  }
  app.clock.set(now * 1000);

  const listed = await readWholeList(app, KIND, token);
  expect(listed.map((p) => p.id), 'the unfiltered list: every project, by id').toEqual([...ids].sort((a, b) => a - b));
  for (const p of listed) expect(p.attributes, `project ${p.id}`).toEqual(model.get(p.id).attributes);
  return { token, now, listed };
}

// ---------------------------------------------------------------------------------------------
// Queries, and the reference
// ---------------------------------------------------------------------------------------------

type QChoice = { from: number; start: number; len: number; flip: boolean } | { text: string };
type TimeParam = { project: number; delta: number } | { rel: number } | { day: number; edge: number } | { abs: number };

interface QueryPlan {
  page?: number;
  page_size?: number;
  state?: string[];
  q?: QChoice;
  due_after?: TimeParam;
  due_before?: TimeParam;
  sort?: string;
  order: string[];
  encodeCommas: boolean;
  unknown: boolean;
}

const sometimes = <T>(present: number, arb: fc.Arbitrary<T>) =>
  fc.oneof({ weight: 10 - present, arbitrary: fc.constant(undefined) }, { weight: present, arbitrary: arb });

const PARAMETERS = ['page', 'page_size', 'state', 'q', 'due_after', 'due_before', 'sort'];
const timeParam: fc.Arbitrary<TimeParam> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ project: fc.nat(), delta: fc.constantFrom(-1, 0, 1) }) },
  { weight: 2, arbitrary: fc.integer({ min: -10 * DAY, max: 40 * DAY }).map((rel) => ({ rel })) },
  { weight: 1, arbitrary: fc.record({ day: fc.integer({ min: 0, max: 4 }), edge: fc.constantFrom(-1, 0, 1) }) },
  { weight: 1, arbitrary: fc.constantFrom(0, 1, MAX_TIMESTAMP).map((abs) => ({ abs })) },
);
const queryPlan: fc.Arbitrary<QueryPlan> = fc.record({
  page: sometimes(4, fc.oneof(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 60 }))),
  page_size: sometimes(6, fc.oneof(fc.constantFrom(1, 2, 3, 5, 10, 25, 200), fc.integer({ min: 1, max: 200 }))),
  state: sometimes(4, fc.array(fc.constantFrom<string>(...PROJECT_STATES), { minLength: 1, maxLength: 4 })),
  q: sometimes(
    4,
    (fc.oneof(
      { weight: 5, arbitrary: fc.record({ from: fc.nat(), start: fc.nat(), len: fc.integer({ min: 1, max: 5 }), flip: fc.boolean() }) },
      { weight: 1, arbitrary: fc.array(fc.constantFrom(...FRAGMENTS, ...Q_EXTRA), { minLength: 1, maxLength: 2 }).map((cs) => ({ text: cs.join('') })) },
      { weight: 1, arbitrary: fc.constantFrom('\u212ailo', 'Z'.repeat(100), '_', '-', '%', 'é').map((text) => ({ text })) },
    ) as fc.Arbitrary<QChoice>),
  ),
  due_after: sometimes(3, timeParam),
  due_before: sometimes(3, timeParam),
  sort: sometimes(6, fc.constantFrom(...PROJECT_SORTS.flatMap((s) => [s, `-${s}`]))),
  order: fc.shuffledSubarray(PARAMETERS, { minLength: PARAMETERS.length, maxLength: PARAMETERS.length }),
  encodeCommas: fc.boolean(),
  unknown: fc.boolean(),
});

const flipCase = (text: string) => [...text].map((c) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase())).join('');

function resolve(plan: QueryPlan, b: Built): ListQuery {
  const query: ListQuery = {};
  if (plan.page !== undefined) query.page = plan.page;
  if (plan.page_size !== undefined) query.page_size = plan.page_size;
  if (plan.state) query.state = plan.state;
  if (plan.q) {
    const q = plan.q;
    if ('text' in q) query.q = q.text;
    else {
      const chars = [...b.listed[q.from % b.listed.length].attributes.name];
      const start = q.start % chars.length;
      const sub = chars.slice(start, start + q.len).join('');
      query.q = q.flip ? flipCase(sub) : sub;
    }
  }
  const dues = b.listed.map((p) => p.attributes.dueAt as number).filter((t) => t !== 0);
  const time = (t: TimeParam) => {
    if ('abs' in t) return t.abs;
    if ('rel' in t) return Math.max(0, b.now + t.rel);
    if ('day' in t) return dayStart(b.now) + t.day * DAY + t.edge;
    return Math.max(0, (dues.length ? dues[t.project % dues.length]! : b.now) + t.delta);
  };
  if (plan.due_after) query.due_after = time(plan.due_after);
  if (plan.due_before) query.due_before = time(plan.due_before);
  if (plan.sort) query.sort = plan.sort;
  return query;
}

/** §12 over the user's unfiltered list: what the query keeps, in its sort. */
function reference(listed: readonly any[], query: ListQuery): any[] {
  const states = query.state as string[] | undefined;
  const q = query.q as string | undefined;
  const after = query.due_after as number | undefined;
  const before = query.due_before as number | undefined;
  const kept = listed.filter((p) => {
    const a = p.attributes;
    const due = a.dueAt as number;
    if (states && !states.includes(a.state)) return false;
    if (q !== undefined && !containsFolded(a.name, q)) return false;
    if (after !== undefined && !(due !== 0 && due >= after)) return false;
    if (before !== undefined && !(due !== 0 && due < before)) return false;
    return true;
  });
  return sortItems(kept, (query.sort as string | undefined) ?? 'id');
}

async function checkQuery(b: Built, plan: QueryPlan, label: string): Promise<number> {
  const query = resolve(plan, b);
  const expected = reference(b.listed, query);
  const context = `${label}: ${expected.length} of ${b.listed.length} projects kept (now ${new Date(b.now * 1000).toISOString()})`;
  const extra = plan.unknown ? ([['include', 'tasks'], ['filter%5Bstate%5D', 'x'], ['Sort', '--'], ['due_on', 'today']] as const) : [];
  return checkEveryPage(app, KIND, b.token, query, expected, { order: plan.order, encodeCommas: plan.encodeCommas, extra }, context);
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

beforeAll(async () => {
  // Another user's projects, named like this file's: never in anyone else's list.
  const stranger = await app.register();
  for (const n of ['alpha', 'BETA', 'x']) await ok('POST', PROJECTS, stranger.token, { project: { name: n } });
});

describe('GET /api/users/me/projects and projects.list with the query parameters of §12', () => {
  it('the characters of names and searches fold alike in JavaScript and in ICU (what the reference relies on)', async () => {
    const chars = [...new Set([...FRAGMENTS, ...Q_EXTRA].join(''))];
    expect(await icuLowerDisagreements(app, [...chars, ...chars.map((c) => c.toUpperCase())])).toEqual([]);
  });

  it(
    'every page of random queries on random data equals the reference, on /api and on /trpc',
    async () => {
      let requests = 0;
      await fc.assert(
        fc.asyncProperty(dataset, fc.array(queryPlan, { minLength: QUERIES_PER_DATASET, maxLength: QUERIES_PER_DATASET }), async (d, plans) => {
          const b = await build(d);
          for (const [i, plan] of plans.entries()) requests += await checkQuery(b, plan, `query ${i + 1}`);
        }),
        { numRuns: DATASETS, endOnFailure: !process.env.FC_SHRINK },
      );
      expect(requests).toBeGreaterThan(DATASETS * QUERIES_PER_DATASET * 2);
    },
    90_000,
  );

  it('filters combine: a known user, each filter alone and together, on both doors', async () => {
    const now = T0S;
    app.clock.set(now * 1000);
    const user = await app.register();
    const { token } = user;
    const create = async (n: string) => (await ok('POST', PROJECTS, token, { project: { name: n } })).data.id as number;
    const newed = await create('kilo_Newed');
    const soon = await create('Soon-KILO');
    const later = await create('later');
    const paused = await create('Paused_x');
    const done = await create('done');
    const due = nextMidnight(now);
    app.clock.set((now - 5 * DAY) * 1000);
    await ok('PUT', `/api/projects/${paused}/state`, token, { project: { state: 'started', due_at: due } });
    await ok('PUT', `/api/projects/${done}/state`, token, { project: { state: 'started', due_at: due - 3 * DAY } });
    app.clock.set(now * 1000);
    await ok('PUT', `/api/projects/${paused}/state`, token, { project: { state: 'paused' } });
    await ok('PUT', `/api/projects/${done}/state`, token, { project: { state: 'finished' } });
    await ok('PUT', `/api/projects/${soon}/state`, token, { project: { state: 'started', due_at: due } });
    await ok('PUT', `/api/projects/${later}/state`, token, { project: { state: 'started', due_at: due + 10 * DAY } });

    const cases: Array<[ListQuery, number[]]> = [
      [{}, [newed, soon, later, paused, done]],
      [{ q: 'KILO' }, [newed, soon]],
      [{ q: '\u212a' }, [newed, soon]],
      [{ q: '_' }, [newed, paused]],
      [{ q: '-' }, [soon]],
      [{ q: '%' }, []],
      [{ state: ['started'] }, [soon, later]],
      [{ state: ['paused', 'finished', 'newed'] }, [newed, paused, done]],
      [{ due_after: 0 }, [soon, later, paused, done]],
      [{ due_after: due }, [soon, later, paused]],
      [{ due_before: due }, [done]],
      [{ due_after: due, due_before: due + 1 }, [soon, paused]],
      [{ due_after: due + 1, due_before: due }, []],
      [{ sort: 'dueAt' }, [newed, done, soon, paused, later]],
      [{ sort: '-dueAt' }, [later, soon, paused, done, newed]],
      [{ sort: 'startedAt' }, [newed, paused, done, soon, later]],
      [{ sort: '-startedAt', state: ['started', 'paused'] }, [soon, later, paused]],
      [{ sort: 'name' }, [paused, soon, done, newed, later]],
      [{ sort: '-name', page_size: 2, page: 2 }, [done, soon]],
      [{ sort: '-id', q: 'o' }, [done, soon, newed]],
    ];
    for (const [query, ids] of cases) {
      for (const answer of await bothDoors(app, KIND, token, query)) {
        expect(answer.status, `${answer.request}: ${JSON.stringify(answer.body)}`).toBe(200);
        expect(answer.body.data.map((p: any) => p.id), answer.request).toEqual(ids);
      }
    }
  });
});

describe('the list ETag and the parameters', () => {
  it('changes whenever a parameter changes; the same parameters answer 304 to If-None-Match, on both doors', async () => {
    app.clock.set(T0S * 1000);
    const user = await app.register();
    for (const n of ['one', 'Two', 'three', 'four']) await ok('POST', PROJECTS, user.token, { project: { name: n } });
    const started = (await ok('POST', PROJECTS, user.token, { project: { name: 'five' } })).data.id as number;
    await ok('PUT', `/api/projects/${started}/state`, user.token, { project: { state: 'started', due_at: nextMidnight(T0S) + DAY } });
    const queries: ListQuery[] = [
      {},
      { page: 2 },
      { page_size: 25 },
      { page_size: 2 },
      { state: ['newed'] },
      { state: ['newed', 'started'] },
      { state: ['started', 'newed'] },
      { q: 'o' },
      { q: 'O' },
      { due_after: 0 },
      { due_after: 1 },
      { due_before: MAX_TIMESTAMP },
      { sort: 'id' },
      { sort: '-id' },
      { sort: 'name' },
      { page_size: 2, state: ['newed'], q: 'o', sort: '-name' },
    ];
    for (const door of ['rest', 'trpc'] as const) {
      const list = (query: ListQuery, ifNoneMatch?: string) =>
        door === 'rest' ? restList(app, KIND, user.token, query, {}, ifNoneMatch ? { 'If-None-Match': ifNoneMatch } : {}) : trpcList(app, KIND, user.token, query, ifNoneMatch);
      const tags = new Map<string, string>();
      for (const query of queries) {
        const first = await list(query);
        expect(first.status, first.request).toBe(200);
        expect(first.etag, first.request).toMatch(/^"[^"]+"$/);
        const again = await list(query);
        expect(again.etag, `${again.request}: the same parameters, the same tag`).toBe(first.etag);
        const cached = await list(query, first.etag!);
        expect(cached.status, `${cached.request} with If-None-Match`).toBe(304);
        if (door === 'rest') expect(cached.body, cached.request).toBeUndefined();
        const seen = tags.get(first.etag!);
        expect(seen, `${first.request} has the ETag of ${seen}`).toBeUndefined();
        tags.set(first.etag!, first.request);
        expect((await list(query, '"not-this-one"')).status).toBe(200);
      }
    }
  });
});

describe('page sizes and far pages', () => {
  it('page_size 1 and 200 work on 201 projects, on both doors', async () => {
    app.clock.set(T0S * 1000);
    const user = await app.register();
    await createInBatches(app, user.token, 'projects.create', Array.from({ length: 201 }, (_, i) => ({ project: { name: `p${String(200 - i).padStart(3, '0')}` } })));
    const listed = await readWholeList(app, KIND, user.token);
    expect(listed).toHaveLength(201);
    for (const [query, pages] of [
      [{ page_size: 200 }, [1, 2, 3]],
      [{ page_size: 200, sort: 'name' }, [1, 2]],
      [{ page_size: 1 }, [1, 2, 100, 200, 201, 202, 5000]],
      [{ page_size: 1, sort: '-name', q: 'P19' }, [1, 2, 10, 11]],
    ] as Array<[ListQuery, number[]]>) {
      const kept = query.q ? listed.filter((p) => containsFolded(p.attributes.name, query.q as string)) : listed;
      const expected = sortItems(kept, (query.sort as string) ?? 'id');
      for (const page of pages) {
        for (const answer of await bothDoors(app, KIND, user.token, { ...query, page })) {
          expectPage(answer, expected, page, query.page_size as number, app.baseUrl, KIND, { ...query, page });
        }
      }
    }
  });

  it('a page beyond the last has no data and the links of §7, with every parameter kept', async () => {
    app.clock.set(T0S * 1000);
    const user = await app.register();
    for (let i = 1; i <= 5; i++) {
      const id = (await ok('POST', PROJECTS, user.token, { project: { name: `far${i}` } })).data.id as number;
      if (i <= 3) await ok('PUT', `/api/projects/${id}/state`, user.token, { project: { state: 'started', due_at: nextMidnight(T0S) + i } });
    }
    const query = { page_size: 2, state: ['started', 'newed'], q: 'FAR', due_after: T0S, due_before: MAX_TIMESTAMP, sort: '-dueAt' };
    const expected = sortItems((await readWholeList(app, KIND, user.token)).filter((p) => p.attributes.dueAt !== 0), '-dueAt');
    expect(expected).toHaveLength(3);
    for (const page of [2, 3, 4, 9_999, 2_147_483_648]) {
      for (const answer of await bothDoors(app, KIND, user.token, { ...query, page })) {
        expectPage(answer, expected, page, 2, app.baseUrl, KIND, { ...query, page });
        if (page > 2) expect(answer.body.data).toEqual([]);
      }
    }
    for (const answer of await bothDoors(app, KIND, user.token, { q: 'nothing', page: 2 })) {
      expectPage(answer, [], 2, PAGE_SIZE, app.baseUrl, KIND, { q: 'nothing', page: 2 });
    }
  });
});

describe('found by a review (pinned)', () => {
  it('a project due at 0 reads as undated: no due filter keeps it', async () => {
    const { token } = await app.register();
    const project = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Zero' } } });
    // A due_at of 0 cannot be set on a start (not after today); only an unset one reads as 0.
    for (const query of ['due_after=0', 'due_before=1']) {
      const res = await app.request('GET', `/api/users/me/projects?${query}`, { token });
      expect(res.body.data.map((p: { id: number }) => p.id), query).not.toContain(project.body.data.id);
    }
  });
});
