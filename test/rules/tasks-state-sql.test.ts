/**
 * The task rules of task.lifecycle.ts are applied two ways: to an object (the entity's
 * methods) and as SQL (`taskEffectsSql`, in every write function that changes tasks). Both read the same table of effects; this test runs every action both
 * ways, from every state it may start in and with dates set and unset, on the real database,
 * and requires the same result. A requested change is held the same way: the entity's method
 * against the write function made from the same table.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import {
  TASK_ACTIONS,
  TASK_DATE_COLUMNS,
  TASK_STATES,
  applyTaskAction,
  taskEffectsSql,
  type TaskDate,
  type TaskDates,
  type TaskState,
} from '../../src/tasks/task.lifecycle.js';
import { writeFunctionSet, writeOperations } from '../../src/app/write-functions.js';
import type { DomainError } from '../../src/core/errors.js';
import { Task } from '../../src/tasks/task.entity.js';
import { refusalOf, useProcedures } from '../helpers/procedures.js';

// The database only (no HTTP): a user to own the rows, and the ORM to send the SQL.
const app = useProcedures();
let userId: number;
beforeAll(async () => {
  userId = (await app.register()).id;
});

const EARLIER = new Date(Date.UTC(2026, 5, 1, 8, 0, 0));
const NOW = new Date(Date.UTC(2026, 5, 15, 12, 0, 0));
const DATES = Object.keys(TASK_DATE_COLUMNS) as TaskDate[];

/** A task in `state` with every date set, or none. */
function taskIn(state: TaskState, datesSet: boolean): TaskDates {
  const task: TaskDates = { state, plannedCount: 2 };
  for (const date of DATES) task[date] = datesSet ? EARLIER : null;
  return task;
}

async function insert(task: TaskDates): Promise<number> {
  const [row] = await app.orm.em.fork().execute<Array<{ id: number }>>(
    `insert into tasks (user_id, project_id, label, "order", planned_count, state, started_at, planned_at, finished_at, abandoned_at, created_at)
     values (?, null, 'rule', (select coalesce(max("order"), 0) + 1 from tasks where user_id = ?), ?, ?, ?, ?, ?, ?, ?) returning id`,
    [userId, userId, task.plannedCount, task.state, task.startedAt, task.plannedAt, task.finishedAt, task.abandonedAt, EARLIER],
  );
  return row!.id;
}

async function read(id: number): Promise<TaskDates> {
  const [row] = await app.orm.em.fork().execute<Array<Record<string, unknown>>>(
    'select state, planned_count, started_at, planned_at, finished_at, abandoned_at from tasks where id = ?',
    [id],
  );
  const task: TaskDates = { state: row!.state as TaskState, plannedCount: row!.planned_count as number };
  for (const date of DATES) {
    const value = row![TASK_DATE_COLUMNS[date]] as Date | null;
    task[date] = value ? new Date(value) : null;
  }
  return task;
}

/** The SET list of the write functions' UPDATEs (`taskEffectsSql`) for `action`, on rows in one of its states. */
function effectsOf(action: (typeof TASK_ACTIONS)[number]): string {
  const which = `case when state in (${action.from.map((s) => `'${s}'`).join(', ')}) then '${action.action}' end`;
  return Object.entries(taskEffectsSql(which, `timestamptz '${NOW.toISOString()}'`)).map(([column, value]) => `${column} = ${value}`).join(', ');
}

const cases = TASK_ACTIONS.flatMap((action) =>
  action.from.flatMap((from) => [true, false].map((datesSet) => [action.action, from, datesSet] as const)),
);

describe('every task action gives the same task in TypeScript and in SQL', () => {
  it('has the eleven (action, from) rows of SPEC.md 3.2', () => {
    expect(TASK_ACTIONS.flatMap((a) => a.from.map((from) => `${a.action} ${from}`)).sort()).toEqual([
      'abandon newed', 'abandon planned', 'abandon started', 'cancel planned', 'cancel started', 'finish planned',
      'plan newed', 'plan started', 'replan finished', 'replan planned', 'start newed',
    ]);
  });

  it.each(cases)('%s from %s (dates set: %s)', async (name, from, datesSet) => {
    const action = TASK_ACTIONS.find((a) => a.action === name)!;
    const expected = taskIn(from, datesSet);
    applyTaskAction(expected, action, NOW);

    const id = await insert(taskIn(from, datesSet));
    await app.orm.em.fork().execute(`update tasks set ${effectsOf(action)} where id = ?`, [id]);
    expect(await read(id)).toEqual(expected);
  });

  it.each(TASK_ACTIONS.map((a) => [a.action, a] as const))('%s in SQL leaves a task in any other state alone', async (_name, action) => {
    for (const state of (['newed', 'started', 'planned', 'finished', 'abandoned'] as const).filter((s) => !action.from.includes(s))) {
      const before = taskIn(state, true);
      const id = await insert(before);
      await app.orm.em.fork().execute(`update tasks set ${effectsOf(action)} where id = ?`, [id]);
      expect(await read(id)).toEqual(before);
    }
  });
});

describe('a requested state change gives the same answer from the entity and from its write function', () => {
  // Every current state against every requested one (abandoned and unknown targets included),
  // with dates set and unset: the function (src/tasks/change-task-state.ts, run as the write
  // path runs it) changes exactly the rows `Task.changeState` allows, and those exactly as it
  // does; where the entity refuses, the function refuses with the same code and pointer.
  const requests = TASK_STATES.flatMap((from) =>
    [...TASK_STATES, 'unknown'].flatMap((to) => [true, false].map((datesSet) => [from, to, datesSet] as const)),
  );

  /** The entity's answer: the task after the change, or the refusal's code, pointer and detail. */
  function entityAnswer(from: TaskState, to: string, datesSet: boolean): TaskDates | { refused: string; pointer?: string; detail?: string } {
    const task = Object.assign(new Task(), taskIn(from, datesSet));
    try {
      task.changeState({ state: to }, NOW);
    } catch (error) {
      const [first] = (error as DomainError).errors;
      return { refused: first!.code, pointer: first!.source?.pointer, detail: first!.detail };
    }
    return { state: task.state, plannedCount: task.plannedCount, ...Object.fromEntries(DATES.map((d) => [d, task[d] ?? null])) } as TaskDates;
  }

  /** The state change's own function, as installed. */
  const CHANGE_STATE = `${writeFunctionSet.schema}.${writeOperations.find((o) => o.op === 'tasks.changeState')!.fn}`;

  it('says what it refuses in English: an abandoned task, a started one', () => {
    expect(entityAnswer('abandoned', 'planned', false)).toMatchObject({ refused: 'invalid_transition', detail: 'An abandoned task cannot become planned.' });
    expect(entityAnswer('started', 'unknown', false)).toMatchObject({ refused: 'invalid_transition', detail: 'A started task cannot become unknown.' });
  });

  it.each(requests)('%s → %s (dates set: %s)', async (from, to, datesSet) => {
    const id = await insert(taskIn(from, datesSet));
    const input = JSON.stringify({ id, task: { state: to } });
    const called = await app.orm.em
      .fork()
      .execute(`select ${CHANGE_STATE}(?, ?, '{}'::json, ?::json, null, null, null)`, [userId, NOW, input])
      .then(() => null, (error: unknown) => refusalOf(error));
    const expected = entityAnswer(from, to, datesSet);
    if ('refused' in expected) {
      expect(called).toMatchObject({ code: expected.refused, pointer: expected.pointer, detail: expected.detail });
      expect(await read(id)).toEqual(taskIn(from, datesSet));
    } else {
      expect(called).toBeNull();
      expect(await read(id)).toEqual(expected);
    }
  });
});
