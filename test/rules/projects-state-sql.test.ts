/**
 * The project rules of project.lifecycle.ts are applied two ways: by the entity's method
 * (`Project.changeState`, with `applyProjectTransition` and the task actions it names) and by
 * the write function made from the same table (src/projects/change-project-state.ts). This
 * test runs every current state against every requested one, with every kind of date given
 * (none, before today or before the start, within, after today), a member that cannot be set,
 * and the started limit reached or not, on the real database, and requires the same answer:
 * the same project and tasks after the change, or the same refusal (code, pointer, detail)
 * with nothing changed.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { writeFunctionSet, writeOperations } from '../../src/app/write-functions.js';
import { endOfDay, userDay } from '../../src/core/user-day.js';
import type { DomainError } from '../../src/core/errors.js';
import { PROJECT_STATES, type ProjectState } from '../../src/projects/project.lifecycle.js';
import { Project, type ProjectStateRequest } from '../../src/projects/project.entity.js';
import { TASK_STATES, applyTaskAction, taskAction, type TaskDates, type TaskState } from '../../src/tasks/task.lifecycle.js';
import { refusalOf, useProcedures } from '../helpers/procedures.js';

// The database only (no HTTP): users to own the rows, and the ORM to send the SQL.
const app = useProcedures();
/** A user with no other started project, and one with three. */
const users = { free: 0, full: 0 };

const DAY = 86_400_000;
const STARTED = new Date(Date.UTC(2026, 5, 1, 8, 0, 0));
const NOW = new Date(Date.UTC(2026, 5, 15, 12, 0, 0));
const seconds = (date: Date) => Math.floor(date.getTime() / 1000);

const DATES = ['startedAt', 'dueAt', 'pausedAt', 'finishedAt'] as const;
const COLUMNS = { startedAt: 'started_at', dueAt: 'due_at', pausedAt: 'paused_at', finishedAt: 'finished_at' } as const;
type Dates = Record<(typeof DATES)[number], Date | null>;

/** A project in `state` with the dates that state has. */
function datesIn(state: ProjectState): Dates {
  const started = state !== 'newed';
  return {
    startedAt: started ? STARTED : null,
    dueAt: started ? new Date(NOW.getTime() + 30 * DAY) : null,
    pausedAt: state === 'paused' ? new Date(NOW.getTime() - 2 * DAY) : null,
    finishedAt: state === 'finished' ? new Date(NOW.getTime() - DAY) : null,
  };
}

/** A task of the project in each state but abandoned (those a project's move may touch, and one it never does), with the dates that state has. */
const TASKS_IN_PROJECT: readonly TaskDates[] = TASK_STATES.filter((s) => s !== 'abandoned').map((state) => ({
  state,
  plannedCount: state === 'newed' || state === 'started' ? 0 : 1,
  startedAt: state === 'newed' ? null : STARTED,
  plannedAt: state === 'planned' || state === 'finished' ? STARTED : null,
  finishedAt: state === 'finished' ? STARTED : null,
  abandonedAt: null,
}));

let named = 0;

/** Inserts a project in `state` with one task in each of TASKS_IN_PROJECT, in one statement. */
async function insert(userId: number, state: ProjectState): Promise<number> {
  const dates = datesIn(state);
  const name = `p${++named}`;
  const [row] = await app.orm.em.fork().execute<Array<{ id: number }>>(
    `with p as (
       insert into projects (user_id, name, slug, state, started_at, due_at, paused_at, finished_at, created_at)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?) returning id
     ), t as (
       insert into tasks (user_id, project_id, label, "order", planned_count, state, started_at, planned_at, finished_at, created_at)
       select ?, p.id, 'rule', (select coalesce(max("order"), 0) from tasks where user_id = ?) + x.n, x."plannedCount", x.state, x."startedAt", x."plannedAt", x."finishedAt", ?
         from p, rows from (json_to_recordset(?::json) as ("plannedCount" int, state text, "startedAt" timestamptz, "plannedAt" timestamptz, "finishedAt" timestamptz)) with ordinality as x("plannedCount", state, "startedAt", "plannedAt", "finishedAt", n)
     )
     select id from p`,
    [userId, name, name, state, dates.startedAt, dates.dueAt, dates.pausedAt, dates.finishedAt, STARTED, userId, userId, STARTED, JSON.stringify(TASKS_IN_PROJECT)],
  );
  return row!.id;
}

interface Outcome {
  state: string;
  dates: Dates;
  tasks: TaskDates[];
}

const dateOf = (value: unknown) => (value ? new Date(value as string) : null);

/** The project and its tasks by order, and how many projects of its user are started, in one statement. */
async function read(id: number): Promise<Outcome & { started: number }> {
  const [row] = await app.orm.em.fork().execute<Array<{ project: Record<string, unknown>; tasks: Array<Record<string, unknown>>; started: string }>>(
    `select row_to_json(p) as project,
            (select coalesce(json_agg(t order by t."order"), '[]') from tasks t where t.project_id = p.id) as tasks,
            (select count(*) from projects s where s.user_id = p.user_id and s.state = 'started') as started
       from projects p where p.id = ?`,
    [id],
  );
  const { project, tasks } = row!;
  return {
    state: project.state as string,
    dates: Object.fromEntries(DATES.map((d) => [d, dateOf(project[COLUMNS[d]])])) as Dates,
    tasks: tasks.map((t) => ({
      state: t.state as TaskState,
      plannedCount: t.planned_count as number,
      startedAt: dateOf(t.started_at),
      plannedAt: dateOf(t.planned_at),
      finishedAt: dateOf(t.finished_at),
      abandonedAt: dateOf(t.abandoned_at),
    })),
    started: Number(row!.started),
  };
}

/** The project's rows without the count of started ones. */
async function rows(id: number): Promise<Outcome> {
  const { started: _, ...outcome } = await read(id);
  return outcome;
}

type Answer = Outcome | { code: string; pointer?: string; detail?: string };

/** The entity's answer: the project and its tasks after the change, or the refusal. */
async function entityAnswer(from: ProjectState, request: ProjectStateRequest, started: number): Promise<Answer> {
  const project = Object.assign(new Project(), { state: from, ...datesIn(from) });
  try {
    const transition = await project.changeState(request, { now: NOW, timeZone: 'UTC', startedProjects: async () => started });
    const tasks = TASKS_IN_PROJECT.map((before) => {
      const task = { ...before };
      if (transition.tasks?.states.includes(task.state)) applyTaskAction(task, taskAction(transition.tasks.action), NOW);
      return task;
    });
    return { state: project.state, dates: Object.fromEntries(DATES.map((d) => [d, project[d] ?? null])) as Dates, tasks };
  } catch (error) {
    const [first] = (error as DomainError).errors;
    return { code: first!.code, pointer: first!.source?.pointer, detail: first!.detail };
  }
}

const today = userDay(NOW, 'UTC');
const DAY_JSON = JSON.stringify({ next: today.next.toISOString(), end: endOfDay(today).toISOString() });

/** The state change's own function, as installed. */
const CHANGE_STATE = `${writeFunctionSet.schema}.${writeOperations.find((o) => o.op === 'projects.changeState')!.fn}`;

async function functionAnswer(userId: number, id: number, request: ProjectStateRequest): Promise<Answer> {
  const input = JSON.stringify({ id, project: request });
  const refusal = await app.orm.em
    .fork()
    .execute(`select ${CHANGE_STATE}(?, ?, ?::json, ?::json, null, null, null)`, [userId, NOW, DAY_JSON, input])
    .then(() => undefined, (error: unknown) => refusalOf(error) ?? Promise.reject(error));
  return refusal ? { code: refusal.code!, pointer: refusal.pointer, detail: refusal.detail } : rows(id);
}

/** Each rule's bound and a second either side of it. */
const DUE_AT = { none: undefined, 'the last second of today': seconds(today.next) - 1, 'the next midnight': seconds(today.next), 'after today': seconds(today.next) + 3_600 };
const FINISHED_AT = {
  none: undefined,
  'a second before the start': seconds(STARTED) - 1,
  'the start': seconds(STARTED),
  within: seconds(NOW) - 3_600,
  'the last second of today': seconds(endOfDay(today)),
  'the first second of tomorrow': seconds(endOfDay(today)) + 1,
};

/** Every combination of dates given and the limit; a member that cannot be set beside each due_at. */
const variants = (['free', 'full'] as const).flatMap((user) => [
  ...Object.entries(DUE_AT).flatMap(([due, dueAt]) =>
    Object.entries(FINISHED_AT).map(([finished, finishedAt]) => ({ due, dueAt, finished, finishedAt, extra: false, user })),
  ),
  ...Object.entries(DUE_AT).map(([due, dueAt]) => ({ due, dueAt, finished: 'none', finishedAt: undefined, extra: true, user })),
]);

beforeAll(async () => {
  users.free = (await app.register()).id;
  users.full = (await app.register()).id;
  for (let i = 0; i < 3; i++) await insert(users.full, 'started');
});

describe('a requested project state change gives the same answer from the entity and from its write function', () => {
  const pairs = PROJECT_STATES.flatMap((from) => [...PROJECT_STATES, 'unknown'].map((to) => [from, to] as const));

  it.each(pairs)('%s → %s, every date given or not, a member that cannot be set, the limit reached or not', async (from, to) => {
    for (const variant of variants) {
      const request: ProjectStateRequest = { state: to };
      if (variant.dueAt !== undefined) request.due_at = variant.dueAt;
      if (variant.finishedAt !== undefined) request.finished_at = variant.finishedAt;
      if (variant.extra) request.name = 'renamed';
      const userId = users[variant.user];
      const id = await insert(userId, from);
      const { started, ...before } = await read(id);
      const expected = await entityAnswer(from, request, started);
      const answered = await functionAnswer(userId, id, request);
      const what = `${from} → ${to}, due_at ${variant.due}, finished_at ${variant.finished}, extra member ${variant.extra}, ${variant.user}`;
      expect(answered, what).toEqual(expected);
      if ('code' in expected) expect(await rows(id), `${what}: unchanged`).toEqual(before);
      // Each case leaves no started project behind: the limit stays what the user's name says.
      await app.orm.em.fork().execute('with t as (delete from tasks where project_id = ?) delete from projects where id = ?', [id, id]);
    }
  });

  it('reaches every refusal of the state change and every transition', async () => {
    // The cases above, counted by answer, so that a table or an input that stopped reaching a
    // rule would show here rather than pass quietly.
    const codes = new Set<string>();
    for (const from of PROJECT_STATES) {
      for (const to of PROJECT_STATES) {
        for (const variant of variants) {
          const request: ProjectStateRequest = { state: to };
          if (variant.dueAt !== undefined) request.due_at = variant.dueAt;
          if (variant.finishedAt !== undefined) request.finished_at = variant.finishedAt;
          if (variant.extra) request.name = 'renamed';
          const answer = await entityAnswer(from, request, variant.user === 'full' ? 3 : 0);
          codes.add('code' in answer ? answer.code : `${from} → ${answer.state}`);
        }
      }
    }
    expect([...codes].sort()).toEqual([
      'cannot_be_after_today',
      'cannot_be_before_started_at',
      'cannot_be_set',
      'invalid_transition',
      'must_be_set',
      'newed → started',
      'paused → started',
      'reached_max_started',
      'started → finished',
      'started → paused',
    ]);
  });
});
