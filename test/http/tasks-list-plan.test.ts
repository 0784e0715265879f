/**
 * The task list's statement under a generic plan: the plan PostgreSQL settles on for the
 * prepared statement of the unfiltered list where the user is one of many, planned without the
 * user's id and so with the average user's size. Its page is read by id, one primary-key
 * lookup per task of the page, never by reading every task of the user (src/tasks/task.store.ts
 * `taskPageStatement`). The filtered lists build the same statement, unprepared; under a plan
 * that guessed their user small they must hold the same way.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepared } from '../../src/db/prepared.js';
import { taskPageStatement, type TaskSelection } from '../../src/tasks/task.store.js';
import { useTestApp } from '../helpers/test-app.js';

const app = useTestApp();
let db: pg.Client;
/** The user with many tasks, among many users with few. */
let heavy = 0;
const HEAVY_TASKS = 3_000;
const PAGE = 50;

const literal = (value: unknown) => (value === null ? 'null' : pg.escapeLiteral(value instanceof Date ? value.toISOString() : String(value)));

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  Plans?: PlanNode[];
}
const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];

/** The plan of the statement, generic, as it ran for `heavy`. */
async function genericPlan(selection: TaskSelection, offset = 0): Promise<PlanNode[]> {
  const { sql, params } = taskPageStatement(heavy, selection, PAGE, offset);
  await db.query('set plan_cache_mode = force_generic_plan');
  await db.query('deallocate all');
  await db.query(`prepare page_of_tasks as ${prepared(sql).text}`);
  const { rows } = await db.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
    `explain (analyze, format json) execute page_of_tasks(${params.map(literal).join(', ')})`,
  );
  return nodes(rows[0]!['QUERY PLAN'][0]!.Plan);
}

/** Rows the plan read through the primary key of tasks (the page's rows, read by id). */
const byPrimaryKey = (plan: PlanNode[]) =>
  plan.filter((n) => n['Index Name'] === 'tasks_pkey').reduce((sum, n) => sum + n['Actual Rows'] * n['Actual Loops'], 0);

beforeAll(async () => {
  db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  const user = await app.register();
  heavy = user.id;
  await db.query(
    `insert into tasks (user_id, label, "order", planned_count, state, created_at)
     select $1, 'heavy ' || g, g, 0, 'newed', now() from generate_series(1, $2::int) g`,
    [heavy, HEAVY_TASKS],
  );
  // 300 users of 5 tasks: the average user the generic plan is made for.
  await db.query(
    `with u as (insert into users (username, password_hash, created_at) select 'light_' || g, 'x', now() from generate_series(1, 300) g returning id)
     insert into tasks (user_id, label, "order", planned_count, state, created_at)
     select u.id, 'light ' || g, g, 0, 'newed', now() from u cross join generate_series(1, 5) g`,
  );
  await db.query('analyze tasks');
});

afterAll(async () => {
  await db?.end();
});

describe('the task list under a generic plan', () => {
  it('reads the page by id: as many rows by primary key as the page holds, not every task of the user', async () => {
    const since = new Date(app.clock.now().getTime() - 14 * 86_400_000);
    const plan = await genericPlan({ finishedSince: since });
    expect(plan.filter((n) => n['Node Type'] === 'Hash Join' || n['Node Type'] === 'Merge Join').map((n) => n['Node Type'])).toEqual([]);
    expect(byPrimaryKey(plan)).toBe(PAGE);
    // A deep page too.
    expect(byPrimaryKey(await genericPlan({ finishedSince: since }, 2_000))).toBe(PAGE);
  });

  it('and so does a filtered list', async () => {
    const since = new Date(app.clock.now().getTime() - 14 * 86_400_000);
    const plan = await genericPlan({ finishedSince: since, states: ['newed'] });
    expect(byPrimaryKey(plan)).toBe(PAGE);
  });
});
