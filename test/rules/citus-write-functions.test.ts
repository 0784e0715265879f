/**
 * The SQL inside the write functions, held to Citus's rule on CASE and COALESCE, and to the
 * routing rules of the statements a request sends (see the end of this header). Citus refuses
 * a modification (INSERT, UPDATE, DELETE, alone or as a CTE) whose CASE or
 * COALESCE holds anything not IMMUTABLE: "non-IMMUTABLE functions are not allowed in CASE or
 * COALESCE statements" (an earlier `PATCH /api/projects/{id}` with `due_at` answered 500 on
 * it). citus-statements.test.ts reads the statements a request sends, which for a write are
 * now one `select w.apply(…)`: the SQL is inside the functions, and is read here. CI has no
 * Citus, so the text is read, not run.
 *
 * Each function of `writeFunctionSet.statements` (as installed, every operation's and `apply`)
 * is cut into its SQL statements (test/helpers/citus-write-functions.ts: the installed
 * libpg-query has no PL/pgSQL parser) and each is parsed by PostgreSQL's grammar. In a
 * modification (an INSERT, UPDATE, DELETE or MERGE, alone or as a CTE, with its own CTEs and
 * subqueries), anything under a CASE or COALESCE fails when it is:
 * - a call of a function that may not be IMMUTABLE: read from the migrated database's pg_proc
 *   by name (any schema), the overloads taking that many arguments (defaults, VARIADIC
 *   counted), any of them not immutable (when none takes that many: any of the name); a name
 *   the catalogue lacks counts as not immutable;
 * - a keyword that is a STABLE function (`current_timestamp`, `current_date`, `localtime`, …:
 *   `now()` by another name; `current_user` and the like too);
 * - a cast whose conversion is not immutable, where the type cast from is known (a variable or
 *   argument by its declaration, a row variable's field by its table's column, a cast, `->>`):
 *   PostgreSQL itself says, by being asked for an index on that cast (which it refuses, as
 *   Citus does, when `contain_mutable_functions` finds a call). A literal is cast at parse time.
 * The SELECT over a modifying CTE is not a modification: Citus checks each modifying CTE as a
 * modification of its own (its router planner's ModifyQuerySupported), so the
 * `select coalesce(array_agg(json_build_object(…)), …) from moved` of projects_change_state and
 * projects_delete is PostgreSQL's to evaluate, as a SELECT's expressions are.
 * A PL/pgSQL variable or argument is a parameter to the planner, which Citus accepts. Operators
 * are not checked (`timestamptz + interval` is STABLE: whether an operator is depends on
 * operand types a parse tree does not have).
 *
 * On Citus `apply` is distributed by its first argument, the user's id (colocated with
 * `users`), so a call is delegated to that user's worker and every statement of it, and of the
 * operations' functions it calls, is planned there by Citus again: each statement (and each
 * subquery of an expression) is held to citus-statements.ts's rules as in a delegated function
 * (`routeWriteFunction`): the user named at each reference to a user table by `p_user`, the
 * argument that holds it (a `$n` or another variable does not count), plain RETURNING, no
 * clock or volatile call in an UPDATE or DELETE of a user table, and no notification at all
 * (it would reach the worker's listeners). The user tables are the catalogue's, read as
 * citus-statements.test.ts reads them.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openOrm } from '../../src/app/orm.js';
import { writeFunctionSet, writeOperations } from '../../src/app/write-functions.js';
import { OPERATION_ARGUMENTS } from '../../src/writes/write-functions.js';
import { loadParser, readCatalogue, type Catalogue } from '../helpers/citus-statements.js';
import {
  castsIn,
  checkWriteFunction,
  readWriteFunction,
  routeWriteFunction,
  type Overload,
  type WriteFunction,
  type WriteFunctionCatalogue,
} from '../helpers/citus-write-functions.js';
import { createTestDatabase } from '../helpers/test-app.js';

const FUNCTIONS: WriteFunction[] = writeFunctionSet.statements.filter((s) => /^\s*create\s+function/i.test(s)).map(readWriteFunction);

let orm: MikroORM;
let functions: Map<string, Overload[]>;

/** Every function of the migrated database (the write functions' schema too), by name. */
async function readFunctions(): Promise<Map<string, Overload[]>> {
  const rows = await orm.em.fork().execute<Array<{ name: string; nargs: number; defaults: number; variadic: boolean; immutable: boolean }>>(
    `select p.proname::text as name, p.pronargs::int as nargs, p.pronargdefaults::int as defaults,
            p.provariadic <> 0 as variadic, p.provolatile = 'i' as immutable
       from pg_proc p`,
  );
  const byName = new Map<string, Overload[]>();
  for (const { name, ...overload } of rows) byName.set(name, [...(byName.get(name) ?? []), overload]);
  return byName;
}

/**
 * Whether each cast is immutable, asked of PostgreSQL: an index on `x::target` of a column of
 * the source type is refused (42P17) when the cast runs a function that is not immutable; no
 * such cast (42846 and the like) or an unknown type is undefined. `table%rowtype.column` and
 * `table.column%type` name a column's type.
 */
async function castsImmutable(pairs: ReadonlyArray<[string, string]>): Promise<Map<string, boolean | undefined>> {
  const answers = new Map<string, boolean | undefined>();
  await orm.em.fork().transactional(async (em) => {
    await em.execute(`create function pg_temp.cast_is_immutable(p_source text, p_target text) returns boolean language plpgsql as $f$
      begin
        begin
          execute format('create temp table cast_probe (x %s)', p_source);
          execute format('create index on cast_probe ((x::%s))', p_target);
          raise exception using errcode = 'PX001';
        exception
          when sqlstate 'PX001' then return true;
          when sqlstate '42P17' then return false;
          when others then return null;
        end;
      end
    $f$`);
    for (const [source, target] of pairs) {
      const key = `${source} -> ${target}`;
      if (answers.has(key)) continue;
      const column = /^(\w+)%rowtype\.(\w+)$/i.exec(source) ?? /^(\w+)\.(\w+)%type$/i.exec(source);
      let type: string | undefined = source;
      if (column) {
        const [row] = await em.execute<Array<{ type: string }>>(
          `select format_type(a.atttypid, a.atttypmod) as type from pg_attribute a
            where a.attrelid = to_regclass(?) and a.attname = ? and a.attnum > 0 and not a.attisdropped`,
          [column[1]!, column[2]!.toLowerCase()],
        );
        type = row?.type;
      }
      if (type === undefined || /%|^record$/i.test(type)) {
        answers.set(key, undefined);
        continue;
      }
      const [row] = await em.execute<Array<{ immutable: boolean | null }>>('select pg_temp.cast_is_immutable(?, ?) as immutable', [type, target]);
      answers.set(key, row?.immutable ?? undefined);
    }
    await em.execute('drop function pg_temp.cast_is_immutable(text, text)');
  });
  return answers;
}

/** The catalogue for these functions: the database's functions and the casts their statements hold. */
async function catalogueFor(fns: readonly WriteFunction[]): Promise<WriteFunctionCatalogue> {
  const casts = await castsImmutable(fns.flatMap(castsIn));
  return { functions, castImmutable: (source, target) => casts.get(`${source} -> ${target}`) };
}

let catalogue: WriteFunctionCatalogue;
/** The user tables, for the routing rules. */
let tables: Catalogue;

/** The argument that holds the user: the operations' first, and `apply`'s, which Citus distributes it by. */
const USER = OPERATION_ARGUMENTS.split(' ')[0]!;

beforeAll(async () => {
  await loadParser();
  orm = await openOrm(await createTestDatabase(), { migrate: true, poolSize: 2 });
  functions = await readFunctions();
  catalogue = await catalogueFor(FUNCTIONS);
  tables = await readCatalogue(orm);
});
afterAll(async () => {
  await orm?.close(true);
});

/** A function over the operations' arguments, `body` from `declare` (or `begin`) to `end`. */
const crafted = (name: string, body: string) =>
  readWriteFunction(`create function w.${name}(${OPERATION_ARGUMENTS}) returns json language plpgsql volatile as $$\n${body}\n$$`);

describe('the write functions keep Citus’s rule on CASE and COALESCE in a modification', () => {
  it('reads every write function, and in each its statements', () => {
    expect(FUNCTIONS.map((f) => f.name).sort()).toEqual(['apply', 'json_put', 'key_busy', 'key_keep', 'key_open', 'key_replay', ...writeOperations.map((o) => o.fn)].sort());
    for (const operation of writeOperations) {
      const fn = FUNCTIONS.find((f) => f.name === operation.fn)!;
      expect(fn.statements.some((sql) => /^(insert|update|delete|with)\b/i.test(sql)), operation.fn).toBe(true);
      expect(fn.variables.get('p_now'), operation.fn).toBe('timestamptz');
    }
  });

  it('knows which functions and casts are immutable', () => {
    expect(functions.get('lower')?.every((o) => o.immutable)).toBe(true);
    expect(functions.get('now')?.some((o) => !o.immutable)).toBe(true);
    expect(functions.get('to_timestamp')?.length).toBeGreaterThan(1);
  });

  it.each(FUNCTIONS.map((f) => [f.name, f] as const))('%s', (_name, fn) => {
    expect(checkWriteFunction(fn, catalogue)).toEqual([]);
  });
});

describe('the rule names what Citus would refuse', () => {
  // The old defect's shape, and its kin.
  const BREAKING: ReadonlyArray<{ name: string; body: string; detail: string }> = [
    {
      name: 'now() in a CASE of an UPDATE',
      body: `begin
  update projects set due_at = case when p_input->>'due_at' is not null then now() else due_at end where user_id = p_user and id = 1;
  return null;
end`,
      detail: 'now() in a CASE',
    },
    {
      name: 'a text argument cast to timestamptz in a COALESCE of an UPDATE',
      body: `declare
  v_due text := p_input->>'due_at';
  v_project projects%rowtype;
begin
  if v_due is not null then
    update projects set due_at = coalesce(v_due::timestamptz, due_at) where user_id = p_user and id = 1 returning * into v_project;
  end if;
  return null;
end`,
      detail: '::timestamptz of text in a COALESCE',
    },
    {
      name: 'current_timestamp in a CASE of an UPDATE in a CTE',
      body: `declare
  v_n int;
begin
  with moved as (update tasks set started_at = case state when 'started' then current_timestamp end where user_id = p_user returning id)
  select count(*) into v_n from moved;
  return null;
end`,
      detail: 'current_timestamp in a CASE',
    },
    {
      name: 'to_timestamp of a text in a COALESCE of an INSERT, in a FOR loop',
      body: `declare
  v_at json;
begin
  for v_at in select value from json_array_elements(p_input) loop
    insert into events (user_id, seq, type, data, at) values (p_user, 1, 't', v_at, coalesce(to_timestamp(v_at->>'at', 'YYYY'), p_now));
  end loop;
  return null;
end`,
      detail: 'to_timestamp() in a COALESCE',
    },
  ];

  it.each(BREAKING)('$name', async ({ body, detail }) => {
    const fn = crafted('crafted_write', body);
    const faults = checkWriteFunction(fn, await catalogueFor([fn]));
    expect(faults).toEqual([expect.stringContaining(`crafted_write [case-coalesce] ${detail}`)]);
  });

  it('passes the same writes with the value computed before, as a variable', async () => {
    const fn = crafted(
      'crafted_write',
      `declare
  v_due timestamptz := (p_input->>'due_at')::timestamptz;
  v_project projects%rowtype;
begin
  update projects set due_at = coalesce(v_due, due_at), name = coalesce(lower(p_input->>'name'), name),
    started_at = case when v_due is not null then p_now else started_at end, version = version + case when v_due is null then 0 else 1 end
   where user_id = p_user and id = 1 returning * into v_project;
  -- Not a modification: Citus evaluates a SELECT's expressions as PostgreSQL does.
  select coalesce(now(), p_now) into v_due;
  return json_build_object('at', coalesce(v_project.due_at, now()));
end`,
    );
    expect(checkWriteFunction(fn, await catalogueFor([fn]))).toEqual([]);
  });

  it('leaves the SELECT over a modifying CTE to PostgreSQL, and holds the CTE to the rule', async () => {
    const select = (set: string) =>
      crafted(
        'crafted_write',
        `declare
  v_events json[];
begin
  with moved as (update tasks set ${set} where user_id = p_user returning id, started_at)
  select coalesce(array_agg(json_build_object('id', moved.id, 'at', extract(epoch from moved.started_at))), '{}') into v_events from moved;
  return null;
end`,
      );
    const keeping = select('started_at = coalesce(started_at, p_now)');
    expect(checkWriteFunction(keeping, await catalogueFor([keeping]))).toEqual([]);
    const breaking = select('started_at = coalesce(started_at, now())');
    expect(checkWriteFunction(breaking, await catalogueFor([breaking]))).toEqual([expect.stringContaining('crafted_write [case-coalesce] now() in a COALESCE')]);
  });

  it('reports a statement it cannot parse', () => {
    const fn = crafted('crafted_write', `begin\n  update projects set due_at = where user_id = p_user;\n  return null;\nend`);
    expect(checkWriteFunction(fn, catalogue)).toEqual([expect.stringContaining('crafted_write [parse]')]);
  });
});

describe('the write functions stay on the user’s shard, run on the user’s worker by a delegated call of apply', () => {
  it('holds the user in the first argument of apply and of every operation’s function', () => {
    expect(USER).toBe('p_user');
    for (const fn of FUNCTIONS.filter((f) => f.name !== 'json_put')) expect([...fn.variables.keys()][0], fn.name).toBe(USER);
    expect(tables.userTables.has('tasks')).toBe(true);
  });

  it.each(FUNCTIONS.map((f) => [f.name, f] as const))('%s', (_name, fn) => {
    expect(routeWriteFunction(fn, tables, USER)).toEqual([]);
  });
});

describe('the routing rules name the function and the statement Citus would send to every shard, or refuse', () => {
  const BREAKING: ReadonlyArray<{ name: string; body: string; fault: string }> = [
    {
      name: 'tasks read through a join on user_id = u.id only',
      body: `declare
  v_task tasks%rowtype;
begin
  select t.* into v_task from tasks t join users u on t.user_id = u.id where u.id = p_user and t.id = (p_input->>'id')::bigint;
  return null;
end`,
      fault: 'crafted_write #1 [user-param] tasks (as t) without t.user_id = p_user at its level — select t.* from tasks t join users u on t.user_id = u.id',
    },
    {
      name: 'tasks updated through a join on user_id = u.id only',
      body: `begin
  update tasks t set label = 'x' from users u where t.user_id = u.id and u.id = p_user and t.id = (p_input->>'id')::bigint;
  return null;
end`,
      fault: 'crafted_write #1 [user-param] tasks (as t) without t.user_id = p_user at its level — update tasks t set',
    },
    {
      name: 'an INSERT whose user_id is not p_user',
      body: `declare
  v_task tasks%rowtype;
begin
  select t.* into v_task from tasks t where t.user_id = p_user and t.id = 1;
  insert into events (user_id, seq, type, data, at) values (v_task.user_id, 1, 'task.updated', null, p_now);
  return null;
end`,
      fault: 'crafted_write #2 [user-param] INSERT into events whose user_id is not p_user',
    },
    {
      name: 'the user taken from the input',
      body: `begin
  delete from tasks where user_id = (p_input->>'user_id')::bigint and id = 1;
  return null;
end`,
      fault: 'crafted_write #1 [user-param] tasks without tasks.user_id = p_user at its level',
    },
    {
      name: 'the user as a numbered argument',
      body: `begin
  delete from tasks where user_id = $2 and id = 1;
  return null;
end`,
      fault: 'crafted_write #1 [user-param] tasks without tasks.user_id = p_user at its level',
    },
    {
      name: 'a subquery whose user comes from the outer row',
      body: `declare
  v_project projects%rowtype;
begin
  select p.* into v_project from projects p where p.user_id = p_user and p.id = 1 and exists (select 1 from tasks t where t.user_id = p.user_id and t.project_id = p.id);
  return null;
end`,
      fault: 'crafted_write #1 [user-param] tasks (as t) without t.user_id = p_user at its level',
    },
    {
      name: 'a subquery of an assignment without the user',
      body: `declare
  v_ids bigint[];
begin
  v_ids := array(select t.id from tasks t where t.project_id = (p_input->>'id')::bigint);
  return null;
end`,
      fault: 'crafted_write #1 [user-param] tasks (as t) without t.user_id = p_user at its level — select t.id from tasks t where',
    },
    {
      name: 'a notification, which would reach the worker’s listeners',
      body: `begin
  perform pg_notify('user_events', p_user::text);
  return null;
end`,
      fault: 'crafted_write #1 [notify] pg_notify in a function delegated to a worker',
    },
    {
      name: 'a NOTIFY statement',
      body: `begin
  if p_input is not null then
    notify user_events;
  end if;
  return null;
end`,
      fault: 'crafted_write #1 [notify] NOTIFY in a function delegated to a worker',
    },
    {
      name: 'the clock in an UPDATE',
      body: `begin
  update tasks set started_at = clock_timestamp() where user_id = p_user and id = 1;
  return null;
end`,
      fault: 'crafted_write #1 [volatile] clock_timestamp() in an UPDATE of tasks',
    },
    {
      name: 'a cast in RETURNING',
      body: `declare
  v_at text;
begin
  update tasks set label = 'x' where user_id = p_user and id = 1 returning started_at::text into v_at;
  return null;
end`,
      fault: 'crafted_write #1 [returning] RETURNING of tasks holds an expression, not a plain column',
    },
  ];

  it.each(BREAKING)('$name', ({ body, fault }) => {
    expect(routeWriteFunction(crafted('crafted_write', body), tables, USER)).toEqual([expect.stringContaining(fault)]);
  });

  it('passes the same statements with the user named at each level, ? read as jsonb’s operator', () => {
    const fn = crafted(
      'crafted_write',
      `declare
  v_task tasks%rowtype;
  v_ids bigint[];
  v_order bigint;
begin
  select t.* into v_task from tasks t join users u on u.id = p_user where t.user_id = p_user and t.id = (p_input->>'id')::bigint;
  update tasks t set label = 'x' from users u where t.user_id = p_user and u.id = p_user and t.id = v_task.id;
  insert into events (user_id, seq, type, data, at) values (p_user, 1, 'task.updated', null, p_now);
  v_ids := array(select t.id from tasks t where t.user_id = p_user and t.project_id = v_task.project_id and p_input::jsonb ? 'id');
  update users u set next_task_order = u.next_task_order + 1 where u.id = p_user returning u.next_task_order - 1 into v_order;
  return null;
end`,
    );
    expect(fn.statements).toHaveLength(5);
    expect(routeWriteFunction(fn, tables, USER)).toEqual([]);
  });
});
