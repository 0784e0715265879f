/**
 * The SQL inside the write functions, held to Citus's rule on CASE and COALESCE. Citus refuses
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
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openOrm } from '../../src/app/orm.js';
import { writeFunctionSet, writeOperations } from '../../src/app/write-functions.js';
import { loadParser } from '../helpers/citus-statements.js';
import {
  castsIn,
  checkWriteFunction,
  readWriteFunction,
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

beforeAll(async () => {
  await loadParser();
  orm = await openOrm(await createTestDatabase(), { migrate: true, poolSize: 2 });
  functions = await readFunctions();
  catalogue = await catalogueFor(FUNCTIONS);
});
afterAll(async () => {
  await orm?.close(true);
});

/** A function over the operations' arguments, `body` from `declare` (or `begin`) to `end`. */
const crafted = (name: string, body: string) =>
  readWriteFunction(`create function w.${name}(p_user bigint, p_now timestamptz, p_day json, p_input json, p_if_match text[]) returns json language plpgsql volatile as $$\n${body}\n$$`);

describe('the write functions keep Citus’s rule on CASE and COALESCE in a modification', () => {
  it('reads every write function, and in each its statements', () => {
    expect(FUNCTIONS.map((f) => f.name).sort()).toEqual(['apply', 'json_put', 'key_keep', 'key_open', ...writeOperations.map((o) => o.fn)].sort());
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
