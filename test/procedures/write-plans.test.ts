/**
 * What a write costs inside `apply`, seen from PostgreSQL itself.
 *
 * It plans nothing once its connection has run it a few times: every
 * statement and expression of the write functions keeps the plan PostgreSQL made for it on that
 * connection. A statement whose custom plan (made with the call's values, which fold a branch
 * or a null test away) beats its generic one is planned again at every call, under the user's
 * lock: the dispatch of `apply` was (about 20 µs a write), and so was a test of `projects.update`.
 *
 * With `debug_print_plan` on, the server sends a LOG notice for every plan it makes. Each write
 * here is sent as one statement without parameters, which is planned once; anything planned
 * inside `apply` is a notice more.
 *
 * It runs as many statements whatever the number of projects whose documents its events carry
 * (a reorder across dozens of projects ran a statement for each, about 0.1 ms apiece under the
 * lock): counted with auto_explain, which sends a notice for every statement run, nested ones too.
 * Loading auto_explain needs a superuser, as the tests' own PostgreSQL has.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeFunctionSet } from '../../src/app/write-functions.js';
import { parseNotification } from '../../src/changes/event.store.js';
import { useProcedures } from '../helpers/procedures.js';

const app = useProcedures();
let client: pg.Client;
let plans = 0;
let user: { id: number };
let taskIds: number[];
let projectId: number;

beforeAll(async () => {
  const registered = await app.register();
  user = registered;
  const project = await registered.api.projects.create({ project: { name: 'planned-once' } });
  projectId = project.data.id as number;
  taskIds = [];
  for (const label of ['a', 'b', 'c']) taskIds.push((await registered.api.tasks.create({ task: { label } })).data.id as number);
  client = new pg.Client({ connectionString: app.orm.config.get('clientUrl') });
  await client.connect();
  // An automatic analyze of a table the writes fill would make its statements planned anew
  // within the counted calls: none on this file's own database.
  for (const table of ['users', 'projects', 'tasks', 'events', 'idempotency_keys']) await client.query(`alter table ${table} set (autovacuum_enabled = off)`);
  client.on('notice', (notice) => {
    if (notice.message === 'plan:') plans++;
  });
});
afterAll(() => client?.end());

const day = JSON.stringify({ next: '2026-12-01T00:00:00Z', end: '2026-11-30T23:59:59Z' });
const literal = (value: unknown) => `'${JSON.stringify(value).replace(/'/g, "''")}'`;

/**
 * One call of apply, its values written into the statement: one operation (`op`, `input`), or
 * a batch of two operations of that kind (`batch`); under an Idempotency-Key of its own (`keyed`).
 */
async function apply(op: string, input: unknown, how: { batch?: unknown; keyed?: boolean } = {}): Promise<void> {
  const one = (i: unknown) => ({ op, input: i, if_match: null, if_none_match: null, status: 200 });
  const ops = how.batch ? [one(input), one(how.batch)] : [one(input)];
  const key = how.keyed ? `'key-${++keys}', ${keys}, 'fingerprint', now() - interval '1 day'` : 'null, null, null, null';
  const { rows } = await client.query<{ r: { refusal?: unknown } }>(
    `select ${writeFunctionSet.apply}(${user.id}, now(), ${literal(JSON.parse(day))}::json, ${literal(ops)}::json, ${key}, ${how.batch ? 'true' : 'false'}) as r`,
  );
  expect(rows[0]!.r.refusal, `${op} ${JSON.stringify(input)}`).toBeUndefined();
}
let keys = 0;

let turn = 0;
const due = () => Math.floor(Date.now() / 1000) + 86_400;
/** Each write of a kind, different at each turn so that each is made (none refused). */
const writes: Record<string, () => unknown[]> = {
  'tasks.create': () => ['tasks.create', { task: { label: `created ${turn}` } }],
  'tasks.update': () => ['tasks.update', { id: taskIds[0], task: { label: `label ${turn}` } }],
  'tasks.changeState': () => ['tasks.changeState', { id: taskIds[1], task: { state: turn % 2 === 0 ? 'planned' : 'finished' } }],
  'tasks.reorder': () => ['tasks.reorder', { id: taskIds[2], task: { order: 1 + (turn % 2) } }],
  'projects.create': () => ['projects.create', { project: { name: `project-${turn}` } }],
  'projects.update': () => ['projects.update', { id: projectId, project: { description: `described ${turn}` } }],
  'projects.changeState': () =>
    turn === 0 ? ['projects.changeState', { id: projectId, project: { state: 'started', due_at: due() } }]
    : ['projects.changeState', { id: projectId, project: { state: turn % 2 === 1 ? 'paused' : 'started' } }],
};

/** The same writes in a batch of two, and under a key. */
const variants: Record<string, () => Promise<void>> = {
  ...Object.fromEntries(Object.entries(writes).map(([kind, make]) => [kind, () => apply(...(make() as [string, unknown]))])),
  'tasks.create, a batch of two': () => apply('tasks.create', { task: { label: `first ${turn}` } }, { batch: { task: { label: `second ${turn}` } } }),
  'tasks.update, under a key': () => apply(...(writes['tasks.update']!() as [string, unknown]), { keyed: true }),
};

describe('the write functions on a connection that has run them', () => {
  it('plan nothing inside apply, for every kind of write', async () => {
    // More than the five custom plans PostgreSQL makes of a statement before it weighs the generic one.
    for (; turn < 8; turn++) for (const write of Object.values(variants)) await write();
    await client.query('set debug_print_plan = on');
    await client.query('set client_min_messages = log');
    const planned: Record<string, number> = {};
    for (const [kind, write] of Object.entries(variants)) {
      plans = 0;
      for (let i = 0; i < 2; i++, turn++) await write();
      planned[kind] = plans;
    }
    await client.query('reset client_min_messages');
    await client.query('reset debug_print_plan');
    // Two calls, each its one statement's plan.
    expect(planned).toEqual(Object.fromEntries(Object.keys(variants).map((kind) => [kind, 2])));
  });
});

describe('a write whose events name several projects', () => {
  it('runs as many statements for two projects as for one, and none of projects for a write that names none', async () => {
    const owner = await app.register();
    // Two projects of two tasks each (orders 1 to 4), then two of one task each (5, 6): a reorder names its task's
    // project when the task passes another of that project, and none when it passes only other projects' tasks.
    const tasks: number[] = [];
    for (const [i, count] of [[1, 2], [2, 2], [3, 1], [4, 1]] as const) {
      const project = await owner.api.projects.create({ project: { name: `listed-${i}` } });
      for (let k = 0; k < count; k++) tasks.push((await owner.api.tasks.create({ task: { label: `in ${i}`, project_id: project.data.id as number } })).data.id as number);
    }
    let statements = 0;
    let ofProjects = 0;
    // Not PostgreSQL's foreign-key check of each event inserted (`SELECT 1 FROM ONLY "public"."users" x …
    // FOR KEY SHARE OF x`, run within the insert): it is one a row, not one a statement of ours.
    const count = (notice: { message?: string }) => {
      if (!notice.message?.startsWith('duration:') || notice.message.includes('FOR KEY SHARE OF x')) return;
      statements++;
      if (/\bjoin projects p\b/.test(notice.message)) ofProjects++;
    };
    /** One write of several reorders (a batch's), as [task, order]; answers how many projects its events name. */
    const reorder = async (...moves: Array<[number, number]>) => {
      const ops = moves.map(([id, order]) => ({ op: 'tasks.reorder', input: { id, task: { order } }, if_match: null, if_none_match: null, status: 200 }));
      const { rows } = await client.query<{ r: { refusal?: unknown; notify?: string } }>(
        `select ${writeFunctionSet.apply}(${owner.id}, now(), ${literal(JSON.parse(day))}::json, ${literal(ops)}::json, null, null, null, null, false) as r`,
      );
      expect(rows[0]!.r.refusal).toBeUndefined();
      // The events, as the NOTIFY the write returns carries them (a few: they fit).
      const { events } = parseNotification(rows[0]!.r.notify)!;
      expect(events, 'the NOTIFY carries the events').toBeDefined();
      return events!.filter((e) => e.type === 'project.updated').length;
    };
    // The first task passes the other of its project and the fifth passes the sixth (another project's): one
    // project named; then back, the third passing the other of its project instead: two projects named.
    const one: Array<[number, number]> = [[tasks[0]!, 2], [tasks[4]!, 6]];
    const two: Array<[number, number]> = [[tasks[0]!, 1], [tasks[2]!, 4]];
    const back: Array<[number, number]> = [[tasks[4]!, 5], [tasks[2]!, 3]];
    // Warm: every statement planned (and its generic plan chosen) before the count.
    for (let i = 0; i < 8; i++) {
      await reorder(...one);
      await reorder(...two);
      await reorder(...back);
    }
    await client.query("load 'auto_explain'");
    await client.query('set auto_explain.log_min_duration = 0');
    await client.query('set auto_explain.log_nested_statements = on');
    await client.query('set auto_explain.log_level = notice');
    client.on('notice', count);
    const counted = async (moves: Array<[number, number]>) => {
      statements = 0;
      const projects = await reorder(...moves);
      return { projects, statements };
    };
    // A write that names no project (a task of none, renamed) reads no project's document.
    const loose = (await owner.api.tasks.create({ task: { label: 'loose' } })).data.id as number;
    const rename = async (label: string) => {
      const ops = [{ op: 'tasks.update', input: { id: loose, task: { label } }, if_match: null, if_none_match: null, status: 200 }];
      await client.query(`select ${writeFunctionSet.apply}(${owner.id}, now(), ${literal(JSON.parse(day))}::json, ${literal(ops)}::json, null, null, null, null, false)`);
    };
    for (let i = 0; i < 8; i++) await rename(`warm ${i}`);
    const ofOne = await counted(one);
    await client.query('set debug_print_plan = on');
    await client.query('set client_min_messages = log');
    plans = 0;
    const ofTwo = await counted(two);
    const twoPlans = plans;
    await client.query('reset client_min_messages');
    await client.query('reset debug_print_plan');
    await counted(back);
    ofProjects = 0;
    await rename('renamed');
    const renamed = ofProjects;
    client.off('notice', count);
    await client.query('reset auto_explain.log_min_duration');
    expect([ofOne.projects, ofTwo.projects]).toEqual([1, 2]);
    expect(ofTwo.statements).toBe(ofOne.statements);
    // Its own statement's plan only: the documents' statement is not planned again either.
    expect(twoPlans).toBe(1);
    expect(renamed).toBe(0);
  });
});
