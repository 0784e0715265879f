/**
 * Whether Citus can route a statement to one shard, judged from its parse tree alone: CI has no
 * Citus (neither Debian nor npm ships it), so the statements are read, not run. The parser is
 * libpg-query, PostgreSQL's own grammar (the 15 of Citus 13.2) compiled to WebAssembly: a
 * statement is read exactly as the server reads it, CTEs, casts and all, where a lookalike
 * grammar or a regular expression would miss what hides in a subquery.
 *
 * The rules, each what a Citus coordinator refuses or spreads over every shard:
 * - `returning`: a RETURNING list holds plain columns (`c`, `t.c`, `*`, `t.*`) only (or such a
 *   column plus or minus an integer constant, always immutable: see `isPlainColumn`). Citus
 *   refuses any non-immutable function there, and whether a cast or an operator is immutable
 *   depends on types a parse tree does not have (`started_at::text` is not, `id::text` is):
 *   conversions belong to the SELECT that reads the returned rows. (A local table, on the
 *   coordinator only, is PostgreSQL's own and exempt.)
 * - `volatile`: no clock, random or sequence call (`now()` and its spellings too: the time is a
 *   parameter, read once), nor any volatile function of the schema, anywhere in an UPDATE or
 *   DELETE of a user table, its CTEs (also the SELECTs it reads by name) and subqueries.
 * - `notify`: `pg_notify` only in a statement that reads no table at all, which the coordinator
 *   runs itself: run on a worker, the notification would go to that worker's listeners.
 * - `user-param`: every reference to a user table names the user as a parameter, at its own
 *   query level: a top-level conjunct `<alias>.user_id = $n` (`users`: `<alias>.id = $n`) of
 *   the WHERE or of a JOIN … ON (unqualified when the level reads one table); an INSERT into a
 *   user table takes `user_id` from a parameter (`users` takes its id from its identity, which
 *   the coordinator hands out). A join on `user_id` to another level's row is not enough:
 *   Citus plans a query level by level once it is not one router task, and then sends a level
 *   without its own parameter to every shard, or refuses a correlated subquery outright.
 *
 * A statement in the body of a function Citus delegates to the user's worker (`apply` and what
 * it calls, distributed by the user's id) is checked with `delegated` and `userParams`: its
 * values are the function's variables, which PL/pgSQL hands the planner as parameters, so the
 * user is named by the variable that holds it (`p_user`), and a `?` is jsonb's operator, not a
 * placeholder. On the worker each statement is planned by Citus again, so `returning`,
 * `volatile` and `user-param` hold there as on the coordinator (a statement without the user
 * goes from the worker to every shard, within the write's transaction); `notify` is stricter:
 * the whole call runs on the worker, so any `pg_notify` or NOTIFY there reaches that worker's
 * listeners, never the service's, whether or not it reads a table.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import { loadModule, parseSync } from 'libpg-query';
import { DISTRIBUTION_COLUMN, NOT_USER_DATA, USERS } from '../../src/db/data-layout.js';

export type CitusRule = 'parse' | 'returning' | 'volatile' | 'notify' | 'user-param';

export interface Violation {
  rule: CitusRule;
  /** What is wrong, naming the table or function. */
  detail: string;
  /** The statement's text from where the fault is (placeholders numbered). */
  fragment: string;
}

/** Where a statement runs, when it is not one the service sends (see the header). */
export interface StatementPlace {
  /** The variables that hold the user, in place of `$n` (a function's argument `p_user`). */
  userParams?: readonly string[];
  /** In the body of a function delegated to the user's worker. */
  delegated?: boolean;
}

/** What the rules need to know of the schema, read from its catalogue. */
export interface Catalogue {
  /** `users` and every table of user data (split by user). */
  userTables: ReadonlySet<string>;
  /** Tables on the coordinator only, where PostgreSQL's own rules hold. */
  localTables: ReadonlySet<string>;
  /** The schema's own volatile functions. */
  volatileFunctions: ReadonlySet<string>;
}

/**
 * The catalogue of a migrated schema: `users` and every table of `public` with `user_id` not
 * listed as other data (src/db/data-layout.ts), the local tables listed, the volatile functions
 * of `public`. A table or function a migration adds is held to the rules at once.
 */
export async function readCatalogue(orm: MikroORM): Promise<Catalogue> {
  const em = orm.em.fork();
  const withColumn = await em.execute<Array<{ table: string }>>(
    `select c.relname::text as "table" from pg_class c
       join pg_namespace n on n.oid = c.relnamespace
       join pg_attribute a on a.attrelid = c.oid and a.attname = ? and a.attnum > 0 and not a.attisdropped
      where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition`,
    [DISTRIBUTION_COLUMN],
  );
  const functions = await em.execute<Array<{ name: string }>>(
    `select p.proname::text as name from pg_proc p join pg_namespace n on n.oid = p.pronamespace
      where n.nspname = 'public' and p.prokind = 'f' and p.provolatile = 'v' and p.prorettype <> 'trigger'::regtype`,
  );
  return {
    userTables: new Set([USERS.table, ...withColumn.map((r) => r.table).filter((table) => !NOT_USER_DATA[table])]),
    localTables: new Set(Object.entries(NOT_USER_DATA).filter(([, t]) => t.kind === 'local').map(([table]) => table)),
    volatileFunctions: new Set(functions.map((r) => r.name)),
  };
}

/** `users` is split by its own key; every other user table by `user_id`. */
export const USERS_TABLE = 'users';

/** Built-in functions whose value changes from row to row or call to call. */
export const VOLATILE_BUILTINS: ReadonlySet<string> = new Set([
  'clock_timestamp', 'random', 'now', 'statement_timestamp', 'transaction_timestamp', 'timeofday', 'gen_random_uuid', 'nextval',
  'setval', 'uuid_generate_v4', 'random_normal',
]);

/** `current_timestamp` and its kin are `now()` written as keywords. */
const CLOCK_KEYWORDS: Readonly<Record<string, string>> = {
  SVFOP_CURRENT_DATE: 'current_date',
  SVFOP_CURRENT_TIME: 'current_time',
  SVFOP_CURRENT_TIME_N: 'current_time',
  SVFOP_CURRENT_TIMESTAMP: 'current_timestamp',
  SVFOP_CURRENT_TIMESTAMP_N: 'current_timestamp',
  SVFOP_LOCALTIME: 'localtime',
  SVFOP_LOCALTIME_N: 'localtime',
  SVFOP_LOCALTIMESTAMP: 'localtimestamp',
  SVFOP_LOCALTIMESTAMP_N: 'localtimestamp',
};

let loaded: Promise<void> | undefined;
/** The parser's WebAssembly module, loaded once. */
export function loadParser(): Promise<void> {
  return (loaded ??= loadModule());
}

/**
 * A statement as the ORM logs it, `?` for each value, with `$1`, `$2`, … instead (the `?` in
 * quoted literals, quoted identifiers and comments left alone).
 */
export function numberPlaceholders(sql: string): string {
  let n = 0;
  return sql.replace(/'(?:[^']|'')*'|"(?:[^"]|"")*"|\/\*[\s\S]*?\*\/|\?/g, (match) => (match === '?' ? `$${++n}` : match));
}

// The parse tree is JSON: a node is `{ "TypeName": { …fields } }`; a field of a fixed node type
// (an UPDATE's `relation`, a `withClause`, an `alias`) holds the fields without the wrapper.
export type Fields = Record<string, unknown>;

export const isObject = (value: unknown): value is Fields => typeof value === 'object' && value !== null && !Array.isArray(value);
export const list = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);

/** The node type and fields of a wrapped node, if `value` is one. */
export function tagged(value: unknown): [string, Fields] | undefined {
  if (!isObject(value)) return undefined;
  const keys = Object.keys(value);
  if (keys.length !== 1 || !/^[A-Z]/.test(keys[0]!)) return undefined;
  const fields = value[keys[0]!];
  return isObject(fields) ? [keys[0]!, fields] : undefined;
}

export const sval = (value: unknown): string | undefined => {
  const node = tagged(value);
  return node?.[0] === 'String' ? (node[1].sval as string | undefined) : undefined;
};

/** CTEs in scope, by name: a name in FROM that is one of these is not a table. */
type Scope = ReadonlyMap<string, unknown>;

const MODIFYING = new Set(['InsertStmt', 'UpdateStmt', 'DeleteStmt']);

/**
 * Calls `visit` for every wrapped node under `value`, with the CTEs in scope there; an
 * INSERT's, UPDATE's or DELETE's target (`relation`, unwrapped in the tree) is visited as a
 * RangeVar too.
 */
function walk(value: unknown, scope: Scope, visit: (type: string, fields: Fields, scope: Scope) => void): void {
  if (Array.isArray(value)) {
    for (const item of value) walk(item, scope, visit);
    return;
  }
  if (!isObject(value)) return;
  const node = tagged(value);
  if (!node) {
    for (const child of Object.values(value)) walk(child, scope, visit);
    return;
  }
  const [type, fields] = node;
  let inner = scope;
  const ctes = isObject(fields.withClause) ? list(fields.withClause.ctes) : [];
  if (ctes.length) {
    const names = new Map(scope);
    for (const cte of ctes) {
      const c = tagged(cte);
      if (c) names.set(c[1].ctename as string, c[1].ctequery);
    }
    inner = names;
  }
  visit(type, fields, inner);
  if (MODIFYING.has(type) && isObject(fields.relation)) visit('RangeVar', fields.relation, inner);
  for (const [key, child] of Object.entries(fields)) if (!(MODIFYING.has(type) && key === 'relation')) walk(child, inner, visit);
}

const isCte = (rangeVar: Fields, scope: Scope) => !rangeVar.schemaname && scope.has(rangeVar.relname as string);
const aliasOf = (rangeVar: Fields) => (isObject(rangeVar.alias) ? (rangeVar.alias.aliasname as string) : (rangeVar.relname as string));

/**
 * A value given as a parameter, or such a value cast to a type: `$n`; or, where the user is
 * held by variables (`named`), one of them, and only them (in a function's body `$n` is its
 * n-th argument, which need not be the user).
 */
function isParam(value: unknown, named: readonly string[]): boolean {
  const node = tagged(value);
  if (!node) return false;
  if (node[0] === 'ParamRef') return named.length === 0;
  if (node[0] === 'ColumnRef') {
    const names = list(node[1].fields).map(sval);
    return names.length === 1 && named.includes(names[0]!);
  }
  return node[0] === 'TypeCast' && isParam(node[1].arg, named);
}

/** The top-level AND-conjuncts of a condition. */
function conjuncts(condition: unknown): unknown[] {
  const node = tagged(condition);
  if (node?.[0] === 'BoolExpr' && node[1].boolop === 'AND_EXPR') return list(node[1].args).flatMap(conjuncts);
  return condition === undefined ? [] : [condition];
}

/** The column a conjunct `column = $n` (either way round) pins to a parameter: its qualifier and name. */
function pinnedColumn(conjunct: unknown, named: readonly string[]): { qualifier?: string; column: string } | undefined {
  const node = tagged(conjunct);
  if (node?.[0] !== 'A_Expr' || node[1].kind !== 'AEXPR_OP') return undefined;
  const op = list(node[1].name).map(sval);
  if (op.length !== 1 || op[0] !== '=') return undefined;
  for (const [columnSide, paramSide] of [[node[1].lexpr, node[1].rexpr], [node[1].rexpr, node[1].lexpr]]) {
    const column = tagged(columnSide);
    if (column?.[0] !== 'ColumnRef' || !isParam(paramSide, named)) continue;
    const names = list(column[1].fields).map(sval);
    if (names.some((name) => name === undefined)) continue;
    if (names.length === 1) return { column: names[0]! };
    if (names.length === 2) return { qualifier: names[0]!, column: names[1]! };
  }
  return undefined;
}

interface Level {
  /** Every item of the level's FROM (tables, CTEs, subqueries, functions), the target of an UPDATE or DELETE first. */
  items: Array<{ rangeVar?: Fields }>;
  conditions: unknown[];
}

/** Collects the FROM items and JOIN … ON conditions of one FROM list. */
function collectFrom(from: unknown[], level: Level): void {
  for (const entry of from) {
    const node = tagged(entry);
    if (!node) continue;
    const [type, fields] = node;
    if (type === 'JoinExpr') {
      collectFrom([fields.larg, fields.rarg], level);
      if (fields.quals !== undefined) level.conditions.push(fields.quals);
    } else {
      level.items.push(type === 'RangeVar' ? { rangeVar: fields } : {});
    }
  }
}

/** The query level a SELECT, UPDATE or DELETE is, or undefined for other nodes. */
function levelOf(type: string, fields: Fields): Level | undefined {
  const level: Level = { items: [], conditions: [] };
  if (type === 'SelectStmt') collectFrom(list(fields.fromClause), level);
  else if (type === 'UpdateStmt' || type === 'DeleteStmt') {
    level.items.push({ rangeVar: fields.relation as Fields });
    collectFrom(list(type === 'UpdateStmt' ? fields.fromClause : fields.usingClause), level);
  } else return undefined;
  level.conditions.unshift(fields.whereClause);
  return level;
}

/**
 * Whether a RETURNING item is a plain column or star, or a column plus or minus an integer
 * constant (`u.next_task_order - 1`): whatever the column's type, every `+` and `-` whose right
 * operand is an integer (or a type an integer converts to implicitly) is immutable, which
 * citus-statements.test.ts asks the catalogue, so no type is needed to know Citus accepts it.
 */
function isPlainColumn(value: unknown): boolean {
  const node = tagged(value);
  if (node?.[0] === 'A_Expr' && node[1].kind === 'AEXPR_OP' && ['+', '-'].includes(list(node[1].name).map(sval).join())) {
    const constant = tagged(node[1].rexpr);
    return constant?.[0] === 'A_Const' && constant[1].ival !== undefined && isPlainColumn(node[1].lexpr);
  }
  if (node?.[0] !== 'ColumnRef') return false;
  return list(node[1].fields).every((field) => sval(field) !== undefined || tagged(field)?.[0] === 'A_Star');
}

const functionName = (fields: Fields) => list(fields.funcname).map(sval).at(-1)?.toLowerCase() ?? '';

/**
 * The rules this statement breaks (`sql` with `?` placeholders, as the ORM logs it; or, with
 * `place.delegated`, a function body's statement as written). A statement the parser refuses is
 * one `parse` violation.
 */
export function checkStatement(sql: string, catalogue: Catalogue, place: StatementPlace = {}): Violation[] {
  const text = place.delegated ? sql : numberPlaceholders(sql);
  const named = place.userParams ?? [];
  const userParam = named.length ? named.join(' or ') : '$n';
  const bytes = Buffer.from(text, 'utf8');
  /** The text around a node's location: a few words before it, about 100 characters from it. */
  const at = (location: unknown): string => {
    const start = typeof location === 'number' && location >= 0 ? location : 0;
    const before = bytes.subarray(0, start).toString('utf8');
    const rest = bytes.subarray(start).toString('utf8');
    const lead = before.length <= 30 ? before : `… ${before.slice(-30).replace(/^\S*\s+/, '')}`;
    return lead + (rest.length <= 100 ? rest : `${rest.slice(0, 100).replace(/\s+\S*$/, '')} …`);
  };
  let tree: { stmts?: Array<{ stmt: unknown }> };
  try {
    tree = parseSync(text) as typeof tree;
  } catch (error) {
    // The ORM's log drops line ends: a `--` comment there runs to the end of the statement.
    const hint = /--/.test(text.replace(/'(?:[^']|'')*'|"(?:[^"]|"")*"/g, '')) ? ' (a -- comment, which runs to the end of the logged line: write it /* … */)' : '';
    return [{ rule: 'parse', detail: `${(error as Error).message}${hint}`, fragment: at((error as { sqlDetails?: { cursorPosition?: number } }).sqlDetails?.cursorPosition) }];
  }
  const violations: Violation[] = [];
  const add = (rule: CitusRule, detail: string, location: unknown) => violations.push({ rule, detail, fragment: at(location) });
  const statements = list(tree.stmts).map((s) => (s as { stmt: unknown }).stmt);

  // Whether the statement reads any table (a CTE's name in FROM counts: it is a RangeVar).
  let readsTable = false;
  walk(statements, new Map(), (type) => {
    if (type === 'RangeVar') readsTable = true;
  });

  /** The forbidden calls under `root` (a CTE read by name is looked into, once). */
  const volatileCalls = (root: unknown, scope: Scope, seen: Set<unknown>, report: (name: string, location: unknown) => void) => {
    walk(root, scope, (type, fields, inner) => {
      if (type === 'FuncCall') {
        const name = functionName(fields);
        if (VOLATILE_BUILTINS.has(name) || catalogue.volatileFunctions.has(name)) report(`${name}()`, fields.location);
      } else if (type === 'SQLValueFunction' && CLOCK_KEYWORDS[fields.op as string]) {
        report(CLOCK_KEYWORDS[fields.op as string]!, fields.location);
      } else if (type === 'RangeVar' && isCte(fields, inner)) {
        // A CTE that modifies is a statement of its own, judged where it stands.
        const query = inner.get(fields.relname as string);
        if (!seen.has(query) && !MODIFYING.has(tagged(query)?.[0] ?? '')) {
          seen.add(query);
          volatileCalls(query, inner, seen, report);
        }
      }
    });
  };

  walk(statements, new Map(), (type, fields, scope) => {
    const target = MODIFYING.has(type) && isObject(fields.relation) ? (fields.relation.relname as string) : undefined;

    // returning
    if (target !== undefined && !catalogue.localTables.has(target)) {
      for (const item of list(fields.returningList)) {
        const res = tagged(item)?.[1];
        if (res && !isPlainColumn(res.val)) add('returning', `RETURNING of ${target} holds an expression, not a plain column`, res.location);
      }
    }

    // volatile
    if ((type === 'UpdateStmt' || type === 'DeleteStmt') && target !== undefined && catalogue.userTables.has(target)) {
      const seen = new Set<unknown>();
      const reported = new Set<unknown>();
      volatileCalls({ [type]: fields }, scope, seen, (name, location) => {
        if (reported.has(location)) return;
        reported.add(location);
        add('volatile', `${name} in ${type === 'UpdateStmt' ? 'an UPDATE' : 'a DELETE'} of ${target}`, location);
      });
    }

    // notify
    if (type === 'FuncCall' && functionName(fields) === 'pg_notify' && (readsTable || place.delegated)) {
      add('notify', `pg_notify in ${place.delegated ? 'a function delegated to a worker' : 'a statement that reads a table'}`, fields.location);
    }
    if (type === 'NotifyStmt' && place.delegated) add('notify', 'NOTIFY in a function delegated to a worker', 0);

    // user-param: each reference to a user table, at its level
    const level = levelOf(type, fields);
    if (level) {
      const pinned = level.conditions.flatMap(conjuncts).map((c) => pinnedColumn(c, named)).filter((p) => p !== undefined);
      for (const { rangeVar } of level.items) {
        if (!rangeVar || isCte(rangeVar, scope) || !catalogue.userTables.has(rangeVar.relname as string)) continue;
        const table = rangeVar.relname as string;
        const alias = aliasOf(rangeVar);
        const column = table === USERS_TABLE ? 'id' : 'user_id';
        const pinnedHere = pinned.some((p) => p.column === column && (p.qualifier === alias || (p.qualifier === undefined && level.items.length === 1)));
        if (!pinnedHere) add('user-param', `${table}${alias !== table ? ` (as ${alias})` : ''} without ${alias}.${column} = ${userParam} at its level`, rangeVar.location);
      }
    }

    // user-param: an INSERT into a user table takes user_id from a parameter
    if (type === 'InsertStmt' && target !== undefined && target !== USERS_TABLE && catalogue.userTables.has(target)) {
      const columns = list(fields.cols).map((col) => tagged(col)?.[1].name as string | undefined);
      const index = columns.indexOf('user_id');
      const source = tagged(fields.selectStmt);
      let given = false;
      if (index >= 0 && source?.[0] === 'SelectStmt') {
        const select = source[1];
        if (list(select.valuesLists).length) {
          given = list(select.valuesLists).every((row) => isParam(list(tagged(row)?.[1].items)[index], named));
        } else {
          given = isParam(tagged(list(select.targetList)[index])?.[1].val, named);
        }
      }
      if (!given) add('user-param', `INSERT into ${target} whose user_id is not ${named.length ? userParam : 'a parameter'}`, fields.relation && (fields.relation as Fields).location);
    }
  });
  return violations;
}
