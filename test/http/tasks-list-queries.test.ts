/**
 * The task list's query parameters (API-CONTRACT.md §12, §7; SPEC.md 4.6), as a property
 * over both doors: for a user with random tasks (random states, some in projects, planned at
 * various times, finished inside and outside the 14-day window, labels of ASCII, accented
 * Latin, Greek, Cyrillic, full-width letters and emoji) and random combinations of `page`,
 * `page_size`, `state`, `project_id` (with `none`), `q`, `planned_after`, `planned_before`,
 * `planned_on` and `sort`, every page on /api and on /trpc is the page of a reference computed
 * here from the user's unfiltered list: the same items in the same order (ties by id, unset
 * timestamps as 0, labels by code point) and the same links (every parameter kept, only
 * `page` changing, `last` from the filtered count). Then the list ETag and the parameters,
 * page sizes 1 and 200, and pages beyond the last.
 *
 * The clock is the test app's; the user's time zone stays UTC (zones are tested elsewhere).
 * The labels' alphabet holds only characters on which JavaScript's toLowerCase and
 * PostgreSQL's ICU lower agree (checked first), so the reference folds case as the service.
 */
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_ID, MAX_TIMESTAMP } from '../../src/core/fields.js';
import { TASK_SORTS } from '../../src/tasks/task.schema.js';
import { DEFAULT_PAGE_SIZE, bothDoors, checkEveryPage, containsFolded, expectPage, icuLowerDisagreements, readWholeList, restList, sortItems, trpcList, type ListQuery } from '../helpers/list-queries.js';
import { createInBatches } from '../helpers/api-steps.js';
import { useTestApp } from '../helpers/test-app.js';
import { DAY, T0S } from '../helpers/times.js';

const app = useTestApp();
const KIND = 'tasks' as const;
const TASKS = '/api/users/me/tasks';
const PAGE_SIZE = DEFAULT_PAGE_SIZE.tasks;
/** Datasets (users) of the property, and queries asked of each. */
const DATASETS = Number(process.env.LIST_QUERY_DATASETS ?? 6);
const QUERIES_PER_DATASET = Number(process.env.LIST_QUERY_QUERIES ?? 30);

/** The first instant of T0's UTC day (2026-06-15T00:00:00Z). */
const T0_DAY = T0S - 12 * 3600;
const dayStart = (s: number) => Math.floor(s / DAY) * DAY;
const dateText = (s: number) => new Date(s * 1000).toISOString().slice(0, 10);

/** Label characters: ASCII (URL-special ones too), accented Latin, Greek (no sigma), Cyrillic, full-width, a ligature, emoji. */
const ALPHABET = [
  'a', 'b', 'c', 'x', 'A', 'B', 'C', 'X', '0', '7', ' ', '-', '_', '%', '+', '&', ',', '#', '=', '\\', "'",
  'é', 'É', 'à', 'À', 'ü', 'Ü', 'ñ', 'Ñ', 'ç', 'Ç', 'ø', 'Ø',
  'α', 'Α', 'β', 'Β', 'ω', 'Ω', 'λ', 'Λ',
  'д', 'Д', 'ж', 'Ж', 'я', 'Я', 'ё', 'Ё',
  'Ａ', 'ａ', 'ﬀ', '😀', '🎉', '🦄',
];

const LISTED_STATES = ['newed', 'started', 'planned', 'finished'] as const;
type TaskState = (typeof LISTED_STATES)[number] | 'abandoned';
type ProjectState = 'newed' | 'started' | 'paused' | 'finished';

// ---------------------------------------------------------------------------------------------
// The data of a user
// ---------------------------------------------------------------------------------------------

/** A time before now: `ago` seconds before it, or the start of the 14-day window plus `edge` seconds. */
type TimeChoice = { ago: number } | { edge: number };
/** A plannedAt: now plus `rel` seconds, or the start of a day around today plus `edge` seconds. */
type PlanChoice = { rel: number } | { day: number; edge: number };

interface TaskPlan {
  label: string;
  /** Index into the user's projects (modulo their number), or none. */
  project: number | null;
  created: TimeChoice;
  plannedAt: PlanChoice | null;
  steps: Array<{ to: TaskState; at: TimeChoice }>;
}

interface Dataset {
  now: number;
  projects: ProjectState[];
  tasks: TaskPlan[];
  moves: Array<[number, number]>;
}

const timeChoice: fc.Arbitrary<TimeChoice> = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 25 * DAY }).map((ago) => ({ ago })) },
  { weight: 1, arbitrary: fc.constantFrom(-1, 0, 1).map((edge) => ({ edge })) },
  { weight: 1, arbitrary: fc.constantFrom(0, DAY, 3 * DAY, 15 * DAY).map((ago) => ({ ago })) },
);
const planChoice: fc.Arbitrary<PlanChoice> = fc.oneof(
  { weight: 2, arbitrary: fc.integer({ min: -10 * DAY, max: 10 * DAY }).map((rel) => ({ rel })) },
  { weight: 2, arbitrary: fc.record({ day: fc.integer({ min: -1, max: 2 }), edge: fc.constantFrom(-1, 0, 1) }) },
);
const label = fc.oneof(
  { weight: 5, arbitrary: fc.array(fc.constantFrom(...ALPHABET), { minLength: 1, maxLength: 10 }).map((cs) => cs.join('')) },
  { weight: 1, arbitrary: fc.constantFrom('same', 'Same', 'SAME', 'ab', 'ab ', 'Ab') },
);
const step = fc.record({ to: fc.constantFrom<TaskState>('started', 'planned', 'finished', 'newed', 'abandoned'), at: timeChoice });
const steps = fc.oneof(
  { weight: 2, arbitrary: fc.constant([] as Array<{ to: TaskState; at: TimeChoice }>) },
  { weight: 2, arbitrary: fc.tuple(timeChoice, timeChoice).map(([a, b]) => [{ to: 'planned' as TaskState, at: a }, { to: 'finished' as TaskState, at: b }]) },
  { weight: 3, arbitrary: fc.array(step, { maxLength: 3 }) },
);
const taskPlan: fc.Arbitrary<TaskPlan> = fc.record({
  label,
  project: fc.oneof({ weight: 1, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.nat(20) }),
  created: timeChoice,
  plannedAt: fc.oneof({ weight: 2, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: planChoice }),
  steps,
});
const dataset: fc.Arbitrary<Dataset> = fc.record({
  now: fc
    .tuple(fc.integer({ min: 0, max: 2 }), fc.oneof(fc.constantFrom(0, 1, 43_200, 86_399), fc.integer({ min: 0, max: 86_399 })))
    .map(([days, second]) => T0_DAY + days * DAY + second),
  projects: fc.array(fc.constantFrom<ProjectState>('newed', 'started', 'paused', 'finished'), { maxLength: 5 }),
  tasks: fc.array(taskPlan, { minLength: 3, maxLength: 70, size: 'max' }),
  moves: fc.array(fc.tuple(fc.nat(200), fc.integer({ min: 1, max: 80 })), { maxLength: 3 }),
});

/** Which requested state the current one can reach (SPEC.md 3.2). */
const reaches = (from: TaskState, to: TaskState): boolean =>
  ({
    started: from === 'newed',
    planned: from !== 'abandoned',
    finished: from === 'planned',
    newed: from === 'started' || from === 'planned',
    abandoned: from === 'newed' || from === 'started' || from === 'planned',
  })[to];

interface Built {
  token: string;
  userId: number;
  now: number;
  windowStart: number;
  projectIds: number[];
  /** Every listed task, as the unfiltered list gives it (by order). */
  listed: any[];
}

let foreignProjectId = 0;

async function ok(method: string, path: string, token: string, body?: unknown): Promise<any> {
  const res = await app.request(method, path, { token, body });
  if (res.status >= 300) throw new Error(`fixture ${method} ${path} ${JSON.stringify(body)}: ${res.status} ${res.text}`);
  return res.body;
}

/** Makes the user of a dataset: its projects, then its tasks (each step at its own time), then some moves. */
async function build(d: Dataset): Promise<Built> {
  const { now } = d;
  const windowStart = dayStart(now) - 14 * DAY;
  const at = (t: TimeChoice) => ('ago' in t ? now - t.ago : windowStart + t.edge);
  app.clock.set(now * 1000);
  const user = await app.register();
  const { token } = user;

  // At most 3 started projects: the others of the kind are paused.
  let started = 0;
  const states = d.projects.map((s) => (s === 'started' && ++started > 3 ? 'paused' : s));
  const projectIds: number[] = [];
  const projectState = new Map<number, ProjectState>();
  for (const [i, state] of states.entries()) {
    const id = (await ok('POST', '/api/users/me/projects', token, { project: { name: `p${i}` } })).data.id as number;
    projectIds.push(id);
    projectState.set(id, state);
  }
  // Those that end paused or finished go through started first, while the (at most 3) that end started are not yet.
  for (const id of [...projectIds].sort((a, b) => Number(projectState.get(a) === 'started') - Number(projectState.get(b) === 'started'))) {
    const state = projectState.get(id)!;
    if (state !== 'newed') await ok('PUT', `/api/projects/${id}/state`, token, { project: { state: 'started', due_at: dayStart(now) + 8 * DAY } });
    if (state === 'paused' || state === 'finished') await ok('PUT', `/api/projects/${id}/state`, token, { project: { state } });
  }

  /** The last document each write answered for a task: what the list must show, order aside. */
  const model = new Map<number, any>();
  const taskIds: number[] = [];
  for (const plan of d.tasks) {
    const times = [plan.created, ...plan.steps.map((s) => s.at)].map(at).sort((a, b) => a - b);
    const projectId = plan.project === null || projectIds.length === 0 ? null : projectIds[plan.project % projectIds.length]!;
    const task: Record<string, unknown> = { label: plan.label };
    if (projectId !== null) task.project_id = projectId;
    if (plan.plannedAt) {
      const p = plan.plannedAt;
      task.planned_at = Math.max(1, 'rel' in p ? now + p.rel : dayStart(now) + p.day * DAY + p.edge);
    }
    app.clock.set(times[0]! * 1000);
    let doc = (await ok('POST', TASKS, token, { task })).data;
    let state: TaskState = doc.attributes.state;
    const expectedState = task.planned_at !== undefined ? 'planned' : projectId !== null && projectState.get(projectId) !== 'started' ? 'newed' : 'started';
    expect(state).toBe(expectedState);
    for (const [i, s] of plan.steps.entries()) {
      if (!reaches(state, s.to)) continue;
      app.clock.set(times[i + 1]! * 1000);
      doc = (await ok('PUT', `/api/tasks/${doc.id}/state`, token, { task: { state: s.to } })).data;
      state = s.to;
      expect(doc.attributes.state).toBe(state);
    }
    model.set(doc.id, doc);
    taskIds.push(doc.id);
  }
  app.clock.set(now * 1000);
  for (const [index, order] of d.moves) {
    if (taskIds.length === 0) break;
    await ok('PUT', `/api/tasks/${taskIds[index % taskIds.length]}/order`, token, { task: { order } });
  }

  // The unfiltered list: SPEC.md 4.6's rules, by order, each task as its last write left it.
  const listed = await readWholeList(app, KIND, token);
  const expectedIds = [...model.values()]
    .filter((t) => t.attributes.state !== 'abandoned' && !(t.attributes.state === 'finished' && t.attributes.finishedAt < windowStart))
    .map((t) => t.id)
    .sort((a, b) => a - b);
  expect(listed.map((t) => t.id).sort((a, b) => a - b), 'the unfiltered list: abandoned tasks and those finished before the window left out').toEqual(expectedIds);
  for (const t of listed) {
    const { order: _order, ...attributes } = t.attributes;
    const { order: _modelOrder, ...modelAttributes } = model.get(t.id).attributes;
    expect({ ...t, attributes }).toEqual({ ...model.get(t.id), attributes: modelAttributes });
  }
  expect(listed.map((t) => t.attributes.order)).toEqual(listed.map((t) => t.attributes.order).sort((a, b) => a - b));
  return { token, userId: user.id, now, windowStart, projectIds, listed };
}

// ---------------------------------------------------------------------------------------------
// Queries, and the reference
// ---------------------------------------------------------------------------------------------

type ProjectRef = { own: number } | 'none' | 'foreign' | 'unknown';
type QChoice = { from: number; start: number; len: number; flip: boolean } | { text: string };
type TimeParam = { task: number; delta: number } | { rel: number } | { day: number; edge: number } | { abs: number };
type DayParam = 'today' | 'tomorrow' | { day: number };

interface QueryPlan {
  page?: number;
  page_size?: number;
  state?: string[];
  project_id?: ProjectRef[];
  q?: QChoice;
  planned_after?: TimeParam;
  planned_before?: TimeParam;
  planned_on?: DayParam;
  sort?: string;
  /** How REST writes it: parameter order, encoded commas, unknown parameters. */
  order: string[];
  encodeCommas: boolean;
  unknown: boolean;
}

/** An arbitrary present with weight `present` out of 10. */
const sometimes = <T>(present: number, arb: fc.Arbitrary<T>) =>
  fc.oneof({ weight: 10 - present, arbitrary: fc.constant(undefined) }, { weight: present, arbitrary: arb });

const PARAMETERS = ['page', 'page_size', 'state', 'project_id', 'q', 'planned_after', 'planned_before', 'planned_on', 'sort'];
const timeParam: fc.Arbitrary<TimeParam> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ task: fc.nat(), delta: fc.constantFrom(-1, 0, 1) }) },
  { weight: 2, arbitrary: fc.integer({ min: -10 * DAY, max: 10 * DAY }).map((rel) => ({ rel })) },
  { weight: 1, arbitrary: fc.record({ day: fc.integer({ min: -1, max: 2 }), edge: fc.constantFrom(-1, 0, 1) }) },
  { weight: 1, arbitrary: fc.constantFrom(0, 1, MAX_TIMESTAMP).map((abs) => ({ abs })) },
);
const queryPlan: fc.Arbitrary<QueryPlan> = fc.record({
  page: sometimes(4, fc.oneof(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 100 }))),
  page_size: sometimes(6, fc.oneof(fc.constantFrom(1, 2, 3, 5, 10, 50, 200), fc.integer({ min: 1, max: 200 }))),
  state: sometimes(4, fc.array(fc.constantFrom<string>(...LISTED_STATES), { minLength: 1, maxLength: 4 })),
  project_id: sometimes(
    3,
    fc.array(
      fc.oneof<fc.Arbitrary<ProjectRef>[]>(
        fc.nat().map((own) => ({ own })),
        fc.constant('none'),
        fc.constantFrom('foreign', 'unknown'),
      ),
      { minLength: 1, maxLength: 3 },
    ),
  ),
  q: sometimes(
    3,
    (fc.oneof(
      { weight: 5, arbitrary: fc.record({ from: fc.nat(), start: fc.nat(), len: fc.integer({ min: 1, max: 4 }), flip: fc.boolean() }) },
      { weight: 1, arbitrary: fc.array(fc.constantFrom(...ALPHABET), { minLength: 1, maxLength: 3 }).map((cs) => ({ text: cs.join('') })) },
      { weight: 1, arbitrary: fc.constantFrom('😀'.repeat(100), 'a'.repeat(100), 'SAME', '%', '_', '\\', ' ').map((text) => ({ text })) },
    ) as fc.Arbitrary<QChoice>),
  ),
  planned_after: sometimes(2, timeParam),
  planned_before: sometimes(2, timeParam),
  planned_on: sometimes(2, fc.oneof<fc.Arbitrary<DayParam>[]>(fc.constantFrom('today', 'tomorrow'), fc.integer({ min: -2, max: 3 }).map((day) => ({ day })))),
  sort: sometimes(6, fc.constantFrom(...TASK_SORTS.flatMap((s) => [s, `-${s}`]))),
  order: fc.shuffledSubarray(PARAMETERS, { minLength: PARAMETERS.length, maxLength: PARAMETERS.length }),
  encodeCommas: fc.boolean(),
  unknown: fc.boolean(),
});

const flipCase = (text: string) => [...text].map((c) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase())).join('');

/** The query as the tRPC input (and, written out, the REST query) for this user. */
function resolve(plan: QueryPlan, b: Built): ListQuery {
  const query: ListQuery = {};
  if (plan.page !== undefined) query.page = plan.page;
  if (plan.page_size !== undefined) query.page_size = plan.page_size;
  if (plan.state) query.state = plan.state;
  if (plan.project_id) {
    query.project_id = plan.project_id.map((ref) => {
      if (ref === 'none') return null;
      if (ref === 'foreign') return foreignProjectId;
      if (ref === 'unknown' || b.projectIds.length === 0) return MAX_ID;
      return b.projectIds[ref.own % b.projectIds.length];
    });
  }
  if (plan.q) {
    const q = plan.q;
    if ('text' in q || b.listed.length === 0) query.q = 'text' in q ? q.text : 'a';
    else {
      const chars = [...b.listed[q.from % b.listed.length].attributes.label];
      const start = q.start % chars.length;
      const sub = chars.slice(start, start + q.len).join('');
      query.q = q.flip ? flipCase(sub) : sub;
    }
  }
  const planned = b.listed.map((t) => t.attributes.plannedAt as number).filter((p) => p !== 0);
  const time = (t: TimeParam) => {
    if ('abs' in t) return t.abs;
    if ('rel' in t) return Math.max(0, b.now + t.rel);
    if ('day' in t) return dayStart(b.now) + t.day * DAY + t.edge;
    return Math.max(0, (planned.length ? planned[t.task % planned.length]! : b.now) + t.delta);
  };
  if (plan.planned_after) query.planned_after = time(plan.planned_after);
  if (plan.planned_before) query.planned_before = time(plan.planned_before);
  if (plan.planned_on) {
    const on = plan.planned_on;
    query.planned_on = typeof on === 'string' ? on : dateText(dayStart(b.now) + on.day * DAY);
  }
  if (plan.sort) query.sort = plan.sort;
  return query;
}

/** §12 over the user's unfiltered list: what the query keeps, in its sort. */
function reference(listed: readonly any[], query: ListQuery, now: number): any[] {
  const states = query.state as string[] | undefined;
  const projects = query.project_id as Array<number | null> | undefined;
  const q = query.q as string | undefined;
  const after = query.planned_after as number | undefined;
  const before = query.planned_before as number | undefined;
  const on = query.planned_on as string | undefined;
  const onStart = on === undefined ? 0 : on === 'today' ? dayStart(now) : on === 'tomorrow' ? dayStart(now) + DAY : Date.parse(`${on}T00:00:00Z`) / 1000;
  const kept = listed.filter((t) => {
    const a = t.attributes;
    const planned = a.plannedAt as number;
    if (states && !states.includes(a.state)) return false;
    if (projects && !projects.includes(t.relationships.project.data?.id ?? null)) return false;
    if (q !== undefined && !containsFolded(a.label, q)) return false;
    if (after !== undefined && !(planned !== 0 && planned >= after)) return false;
    if (before !== undefined && !(planned !== 0 && planned < before)) return false;
    if (on !== undefined && !(planned !== 0 && planned >= onStart && planned < onStart + DAY)) return false;
    return true;
  });
  return sortItems(kept, (query.sort as string | undefined) ?? 'order');
}

/** Every page worth checking of one query, on both doors. */
async function checkQuery(b: Built, plan: QueryPlan, label: string): Promise<number> {
  const query = resolve(plan, b);
  const expected = reference(b.listed, query, b.now);
  const context = `${label}: ${expected.length} of ${b.listed.length} listed tasks kept (now ${new Date(b.now * 1000).toISOString()})`;
  const extra = plan.unknown ? ([['include', 'project'], ['filter%5Bstate%5D', 'abandoned'], ['STATE', 'x']] as const) : [];
  return checkEveryPage(app, KIND, b.token, query, expected, { order: plan.order, encodeCommas: plan.encodeCommas, extra }, context);
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

beforeAll(async () => {
  const stranger = await app.register();
  foreignProjectId = (await ok('POST', '/api/users/me/projects', stranger.token, { project: { name: 'theirs' } })).data.id;
  // The stranger's tasks are never anyone else's: one in that project, one loose.
  await ok('POST', TASKS, stranger.token, { task: { label: 'a stranger’s task', project_id: foreignProjectId } });
  await ok('POST', TASKS, stranger.token, { task: { label: 'same' } });
});

describe('GET /api/users/me/tasks and tasks.list with the query parameters of §12', () => {
  it('the alphabet of the labels folds alike in JavaScript and in ICU (what the reference relies on)', async () => {
    const texts = [...ALPHABET, ...ALPHABET.map((c) => c.toUpperCase()), ALPHABET.join(''), flipCase(ALPHABET.join(''))];
    expect(await icuLowerDisagreements(app, texts)).toEqual([]);
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
    const waiting = (await ok('POST', '/api/users/me/projects', token, { project: { name: 'Waiting' } })).data.id as number;
    const going = (await ok('POST', '/api/users/me/projects', token, { project: { name: 'Going' } })).data.id as number;
    await ok('PUT', `/api/projects/${going}/state`, token, { project: { state: 'started', due_at: now + 30 * DAY } });
    const create = async (task: Record<string, unknown>) => (await ok('POST', TASKS, token, { task })).data.id as number;
    const loose = await create({ label: 'Écrire à Ωmega' });
    const waitingTask = await create({ label: 'ÉCRIRE', project_id: waiting });
    const today = await create({ label: 'today 😀', planned_at: dayStart(now) });
    const tomorrow = await create({ label: 'tomorrow', planned_at: dayStart(now) + DAY, project_id: going });
    const lastSecond = await create({ label: 'last second of today', planned_at: dayStart(now) + DAY - 1, project_id: going });
    // Finished 14 days ago at the window's very start (listed) and one second before (not listed).
    app.clock.set((dayStart(now) - 14 * DAY) * 1000);
    const inWindow = await create({ label: 'done in window', planned_at: now });
    await ok('PUT', `/api/tasks/${inWindow}/state`, token, { task: { state: 'finished' } });
    app.clock.set((dayStart(now) - 14 * DAY - 1) * 1000);
    const outOfWindow = await create({ label: 'done long ago', planned_at: now });
    await ok('PUT', `/api/tasks/${outOfWindow}/state`, token, { task: { state: 'finished' } });
    app.clock.set(now * 1000);
    const abandoned = await create({ label: 'écrire, abandoned', planned_at: now });
    await ok('PUT', `/api/tasks/${abandoned}/state`, token, { task: { state: 'abandoned' } });

    const cases: Array<[ListQuery, number[]]> = [
      [{}, [loose, waitingTask, today, tomorrow, lastSecond, inWindow]],
      [{ q: 'écrire' }, [loose, waitingTask]],
      [{ q: 'ωMEGA' }, [loose]],
      [{ q: '😀' }, [today]],
      [{ state: ['newed'] }, [waitingTask]],
      [{ state: ['finished'] }, [inWindow]],
      [{ state: ['planned', 'finished'], sort: '-plannedAt' }, [tomorrow, lastSecond, inWindow, today]],
      [{ project_id: [null] }, [loose, today, inWindow]],
      [{ project_id: [going, waiting] }, [waitingTask, tomorrow, lastSecond]],
      [{ project_id: [going, null], state: ['planned'] }, [today, tomorrow, lastSecond]],
      [{ project_id: [foreignProjectId] }, []],
      [{ planned_on: 'today' }, [today, lastSecond, inWindow]],
      [{ planned_on: 'tomorrow' }, [tomorrow]],
      [{ planned_on: dateText(now) }, [today, lastSecond, inWindow]],
      [{ planned_after: dayStart(now) + 1 }, [tomorrow, lastSecond, inWindow]],
      [{ planned_before: dayStart(now) + 1 }, [today]],
      [{ planned_after: 0 }, [today, tomorrow, lastSecond, inWindow]],
      [{ planned_after: now, planned_before: now }, []],
      [{ planned_on: 'today', planned_after: now }, [lastSecond, inWindow]],
      [{ planned_on: 'today', planned_before: now + 1, sort: '-id' }, [inWindow, today]],
      [{ sort: 'label' }, [inWindow, lastSecond, today, tomorrow, waitingTask, loose]],
      [{ sort: '-label', page_size: 4, page: 2 }, [lastSecond, inWindow]],
      [{ sort: '-finishedAt' }, [inWindow, loose, waitingTask, today, tomorrow, lastSecond]],
      [{ sort: 'startedAt' }, [waitingTask, inWindow, loose, today, tomorrow, lastSecond]],
    ];
    for (const [query, ids] of cases) {
      for (const answer of await bothDoors(app, KIND, token, query)) {
        expect(answer.status, `${answer.request}: ${JSON.stringify(answer.body)}`).toBe(200);
        expect(answer.body.data.map((t: any) => t.id), answer.request).toEqual(ids);
        if (query.page_size === undefined) expect(answer.body.links.last, answer.request).toMatch(/[?&]page=1$/);
      }
    }
  });
});

describe('the list ETag and the parameters', () => {
  it('changes whenever a parameter changes; the same parameters answer 304 to If-None-Match, on both doors', async () => {
    app.clock.set(T0S * 1000);
    const user = await app.register();
    const project = (await ok('POST', '/api/users/me/projects', user.token, { project: { name: 'Tagged' } })).data.id as number;
    for (let i = 1; i <= 7; i++) {
      await ok('POST', TASKS, user.token, { task: { label: `task ${i}`, ...(i % 2 ? { project_id: project } : {}), ...(i % 3 === 0 ? { planned_at: T0S + i * DAY } : {}) } });
    }
    const queries: ListQuery[] = [
      {},
      { page: 2 },
      { page_size: 50 },
      { page_size: 3 },
      { state: ['newed'] },
      { state: ['newed', 'started'] },
      { state: ['started', 'newed'] },
      { project_id: [project] },
      { project_id: [null] },
      { project_id: [project, null] },
      { q: 'task' },
      { q: 'TASK' },
      { planned_after: 0 },
      { planned_after: 1 },
      { planned_before: T0S + 4 * DAY },
      { planned_on: 'today' },
      { planned_on: 'tomorrow' },
      { planned_on: dateText(T0S) },
      { sort: 'order' },
      { sort: '-order' },
      { sort: 'label' },
      { page_size: 3, state: ['newed'], q: 'task', sort: '-id' },
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
        // Another query's tag does not match this one.
        const stale = await list(query, '"not-this-one"');
        expect(stale.status).toBe(200);
      }
    }
  });
});

describe('page sizes and far pages', () => {
  it('page_size 1 and 200 work on 201 listed tasks (and an abandoned one), on both doors', async () => {
    app.clock.set(T0S * 1000);
    const user = await app.register();
    await createInBatches(app, user.token, 'tasks.create', Array.from({ length: 201 }, (_, i) => ({ task: { label: `t${String(i).padStart(3, '0')}` } })));
    const gone = (await ok('POST', TASKS, user.token, { task: { label: 'gone' } })).data.id as number;
    await ok('PUT', `/api/tasks/${gone}/state`, user.token, { task: { state: 'abandoned' } });
    const listed = await readWholeList(app, KIND, user.token);
    expect(listed).toHaveLength(201);
    const byLabel = sortItems(listed, 'label');
    for (const [query, pages] of [
      [{ page_size: 200 }, [1, 2, 3]],
      [{ page_size: 200, sort: '-label' }, [1, 2]],
      [{ page_size: 1 }, [1, 2, 100, 200, 201, 202, 5000]],
      [{ page_size: 1, sort: 'label', q: 'T19' }, [1, 2, 10, 11]],
    ] as Array<[ListQuery, number[]]>) {
      const expected = query.q ? byLabel.filter((t) => containsFolded(t.attributes.label, query.q as string)) : sortItems(listed, (query.sort as string) ?? 'order');
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
    for (let i = 1; i <= 5; i++) await ok('POST', TASKS, user.token, { task: { label: `far ${i}`, planned_at: T0S + i } });
    const query = { page_size: 2, state: ['planned'], project_id: [null], q: 'FAR', planned_after: T0S, planned_before: T0S + DAY, planned_on: 'today', sort: '-plannedAt' };
    const expected = sortItems(await readWholeList(app, KIND, user.token), '-plannedAt');
    expect(expected).toHaveLength(5);
    for (const page of [3, 4, 9_999, 2_147_483_648]) {
      for (const answer of await bothDoors(app, KIND, user.token, { ...query, page })) {
        expectPage(answer, expected, page, 2, app.baseUrl, KIND, { ...query, page });
        if (page > 3) expect(answer.body.data).toEqual([]);
      }
    }
    // A filter that keeps nothing: one empty page, last = 1.
    for (const answer of await bothDoors(app, KIND, user.token, { q: 'nothing like this', page: 2 })) {
      expectPage(answer, [], 2, PAGE_SIZE, app.baseUrl, KIND, { q: 'nothing like this', page: 2 });
    }
  });
});

describe('found by a review (pinned)', () => {
  it('q finds a capital sigma wherever it stands: Σ in ΟΔΟΣ (a final ς once lowered), on both doors', async () => {
    const { token } = await app.register();
    const created = await app.request('POST', TASKS, { token, body: { task: { label: 'ΟΔΟΣ' } } });
    for (const q of ['Σ', 'σ', 'ς', 'οσ', 'ΟΔΟΣ']) {
      const rest = await app.request('GET', `${TASKS}?q=${encodeURIComponent(q)}`, { token });
      expect(rest.body.data.map((t: { id: number }) => t.id), `REST q=${q}`).toEqual([created.body.data.id]);
      const trpc = await app.trpc(token).tasks.list.query({ q });
      expect(trpc.data.map((t) => t.id), `tRPC q=${q}`).toEqual([created.body.data.id]);
    }
  });

  it('a task planned at 0 reads as unset: no plannedAt filter keeps it', async () => {
    const { token } = await app.register();
    await app.request('POST', TASKS, { token, body: { task: { label: 'at zero', planned_at: 0 } } });
    for (const query of ['planned_after=0', 'planned_before=1', 'planned_on=1970-01-01']) {
      const res = await app.request('GET', `${TASKS}?${query}`, { token });
      expect(res.status).toBe(200);
      expect(res.body.data, query).toEqual([]);
    }
  });
});

describe('project_id names no project of the user', () => {
  it('an id beyond every id matches nothing (200, empty), as an unknown one does; with none it keeps the loose tasks', async () => {
    const { token } = await app.register();
    const loose = (await app.request('POST', TASKS, { token, body: { task: { label: 'loose' } } })).body.data.id;
    for (const ids of ['999', '2147483648', '99999999999', `${Number.MAX_SAFE_INTEGER}`]) {
      const rest = await app.request('GET', `${TASKS}?project_id=${ids}`, { token });
      expect(rest.status, rest.text).toBe(200);
      expect(rest.body.data, ids).toEqual([]);
      expect((await app.trpc(token).tasks.list.query({ project_id: [Number(ids)] })).data).toEqual([]);
      const withNone = await app.request('GET', `${TASKS}?project_id=${ids},none`, { token });
      expect(withNone.body.data.map((t: { id: number }) => t.id)).toEqual([loose]);
    }
  });
});
