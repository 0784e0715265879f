/**
 * The SQL inside the write functions (src/writes/write-functions.ts), read for Citus's rule on
 * CASE and COALESCE: in an INSERT, UPDATE or DELETE (and a statement with such a CTE) Citus
 * refuses "non-IMMUTABLE functions are not allowed in CASE or COALESCE statements" when a
 * CASE or COALESCE holds anything PostgreSQL's `contain_mutable_functions` finds: a call of a
 * STABLE or VOLATILE function, a clock keyword (`current_timestamp`, which is `now()`), a cast
 * whose conversion is not immutable (`text::timestamptz` reads the time zone). CI has no Citus,
 * so the text is read.
 *
 * The installed libpg-query (15.x) has no PL/pgSQL parser (`parsePlPgSQL` came with 17), so a
 * body is cut into its statements here, by PL/pgSQL's own boundaries: a SQL statement
 * (select, insert, update, delete, with, perform) starts where a PL/pgSQL statement may start
 * (after `;`, `begin`, `then`, `else`, `loop`, `return query`, a `for … in`) at parenthesis
 * depth 0 and runs to its `;` (a `for … in` query to its `loop`); its PL/pgSQL `into` target
 * is dropped, and the rest is parsed by PostgreSQL's own grammar (`parseSync`). The
 * expressions of assignments, IF conditions, RETURN and declarations are not statements and
 * cannot modify, but PL/pgSQL runs each as `select <expression>`: a subquery in one
 * (`(select …)`, `array(select …)`, `exists (…)`), the only way an expression reads a table,
 * is cut as a statement too, and so is a `pg_notify(…)` there, for the routing rules.
 * A statement the grammar refuses is reported (`parse`), so nothing is skipped silently.
 */
import { parseSync } from 'libpg-query';
import { checkStatement, isObject, list, sval, tagged, type Catalogue, type Fields } from './citus-statements.js';

/** One overload, as pg_proc has it. */
export interface Overload {
  nargs: number;
  /** How many of its arguments have defaults. */
  defaults: number;
  variadic: boolean;
  immutable: boolean;
}

export interface WriteFunctionCatalogue {
  /** Every function of the database by (unqualified, lower-case) name. */
  functions: ReadonlyMap<string, readonly Overload[]>;
  /**
   * Whether a cast from `source` (a type's name, `table%rowtype.column`, or a declaration's
   * `table.column%type`) to `target` is immutable; undefined when that cannot be known.
   */
  castImmutable: (source: string, target: string) => boolean | undefined;
}

/** A write function's text, cut up. */
export interface WriteFunction {
  /** Its name, without the schema. */
  name: string;
  /** Its arguments and declared variables (and loop variables), by name: their declared types. */
  variables: Map<string, string>;
  /** Its SQL statements, PL/pgSQL's INTO target dropped. */
  statements: string[];
}

export interface WriteViolation {
  rule: 'parse' | 'case-coalesce';
  /** The non-immutable call (`now()`, `current_timestamp`, `::timestamptz of text`), or the parser's message. */
  detail: string;
  /** The statement from the CASE or COALESCE on. */
  fragment: string;
}

interface Token {
  kind: 'word' | 'punct' | 'string' | 'quoted' | 'param';
  /** Lower-case for a word. */
  text: string;
  start: number;
  end: number;
}

/** The tokens of PL/pgSQL text, comments skipped, literals and quoted names whole. */
export function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    const rest = text.slice(i);
    let m: RegExpExecArray | null;
    if (/\s/.test(c)) i++;
    else if (rest.startsWith('--')) i = text.indexOf('\n', i) < 0 ? text.length : text.indexOf('\n', i);
    else if (rest.startsWith('/*')) i = text.indexOf('*/', i) < 0 ? text.length : text.indexOf('*/', i) + 2;
    else if ((m = /^[eE]?'(?:[^'\\]|''|\\.)*'/.exec(rest))) {
      tokens.push({ kind: 'string', text: m[0], start: i, end: i + m[0].length });
      i += m[0].length;
    } else if ((m = /^"(?:[^"]|"")*"/.exec(rest))) {
      tokens.push({ kind: 'quoted', text: m[0].slice(1, -1).replace(/""/g, '"'), start: i, end: i + m[0].length });
      i += m[0].length;
    } else if ((m = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(rest))) {
      const close = text.indexOf(m[0], i + m[0].length);
      const end = close < 0 ? text.length : close + m[0].length;
      tokens.push({ kind: 'string', text: text.slice(i, end), start: i, end });
      i = end;
    } else if ((m = /^\$\d+/.exec(rest))) {
      tokens.push({ kind: 'param', text: m[0], start: i, end: i + m[0].length });
      i += m[0].length;
    } else if ((m = /^[A-Za-z_][A-Za-z0-9_$]*/.exec(rest))) {
      tokens.push({ kind: 'word', text: m[0].toLowerCase(), start: i, end: i + m[0].length });
      i += m[0].length;
    } else if ((m = /^(?:\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|\.\.|:=|::|<<|>>|[^\sA-Za-z0-9_])/.exec(rest))) {
      tokens.push({ kind: 'punct', text: m[0], start: i, end: i + m[0].length });
      i += m[0].length;
    } else i++;
  }
  return tokens;
}

const SQL_STARTS = new Set(['select', 'insert', 'update', 'delete', 'with', 'perform', 'merge', 'values', 'table', 'notify']);
/** Words after which, at depth 0, a PL/pgSQL statement starts. */
const OPENERS = new Set(['begin', 'then', 'else', 'loop', 'declare']);

const isWord = (token: Token | undefined, ...words: string[]) => token?.kind === 'word' && words.includes(token.text);

/** The SQL of one statement: `perform` read as `select`, PL/pgSQL's `into [strict] targets` dropped. */
function sqlOf(text: string, tokens: Token[]): string {
  let sql = '';
  let from = tokens[0]?.start ?? 0;
  let depth = 0;
  for (let k = 0; k < tokens.length; k++) {
    const t = tokens[k]!;
    if (t.text === '(') depth++;
    else if (t.text === ')') depth--;
    if (k === 0 && isWord(t, 'perform')) {
      sql += 'select';
      from = t.end;
    } else if (depth === 0 && isWord(t, 'into') && !isWord(tokens[k - 1], 'insert', 'merge')) {
      // The target: `strict`?, then names (`v_x`, `v_row.field`) separated by commas.
      let j = k + 1;
      if (isWord(tokens[j], 'strict')) j++;
      while (tokens[j]?.kind === 'word' || tokens[j]?.kind === 'quoted') {
        j++;
        while (tokens[j]?.text === '.' && tokens[j + 1]) j += 2;
        if (tokens[j]?.text !== ',') break;
        j++;
      }
      sql += text.slice(from, t.start);
      from = tokens[j - 1]!.end;
      k = j - 1;
    }
  }
  const last = tokens.at(-1);
  return (sql + text.slice(from, last ? last.end : from)).trim();
}

/**
 * The end (index of the `;`, of `loop` for a FOR's query, or of the `)` closing the parenthesis
 * it is in, for a subquery or a call's arguments) of the statement starting at `i`.
 */
function endOf(tokens: Token[], i: number, forQuery: boolean): number {
  let depth = 0;
  for (let j = i; j < tokens.length; j++) {
    const t = tokens[j]!;
    if (t.text === '(') depth++;
    else if (t.text === ')' && --depth < 0) return j;
    else if (depth === 0 && (t.text === ';' || (forQuery && isWord(t, 'loop')))) return j;
  }
  return tokens.length;
}

/** A `create function <schema>.<name>(<args>) … as $$ <body> $$` statement, cut up. */
export function readWriteFunction(statement: string): WriteFunction {
  const header = /create\s+(?:or\s+replace\s+)?function\s+(?:[\w"]+\.)?"?(\w+)"?\s*\(([^)]*)\)/i.exec(statement);
  if (!header) throw new Error(`not a create function statement: ${statement.slice(0, 80)}`);
  const name = header[1]!;
  const variables = new Map<string, string>();
  for (const argument of header[2]!.split(',')) {
    const m = /^\s*(?:in\s+|out\s+|inout\s+)?(\w+)\s+(.+?)\s*$/i.exec(argument);
    if (m) variables.set(m[1]!.toLowerCase(), m[2]!);
  }
  const open = statement.indexOf('$$');
  const close = statement.lastIndexOf('$$');
  const body = statement.slice(open + 2, close);
  const tokens = tokenize(body);

  const statements: string[] = [];
  let depth = 0;
  let boundary = true;
  let inDeclare = false;
  let declStart = 0;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    // A subquery or a pg_notify in an expression (a statement's own are inside it, skipped whole).
    const notifies = isWord(t, 'pg_notify') && tokens[i + 1]?.text === '(';
    if (notifies || (t.text === '(' && isWord(tokens[i + 1], 'select', 'with', 'values', 'table'))) {
      const close = endOf(tokens, i + (notifies ? 2 : 1), false);
      statements.push(notifies ? `select ${body.slice(t.start, tokens[close]?.end)}` : sqlOf(body, tokens.slice(i + 1, close)));
      i = close;
      boundary = false;
      continue;
    }
    if (t.text === '(') depth++;
    else if (t.text === ')') depth--;
    if (depth === 0 && isWord(t, 'declare')) {
      inDeclare = true;
      declStart = i + 1;
      boundary = true;
      continue;
    }
    if (inDeclare) {
      // `name [constant] type [not null] [:= | = | default expr];`
      if (depth === 0 && t.text === ';') {
        const decl = tokens.slice(declStart, i);
        const stop = decl.findIndex((d) => d.text === ':=' || d.text === '=' || isWord(d, 'default', 'not'));
        const typeTokens = decl.slice(1, stop < 0 ? undefined : stop).filter((d) => !isWord(d, 'constant'));
        if (decl[0] && typeTokens.length) variables.set(decl[0].text, body.slice(typeTokens[0]!.start, typeTokens.at(-1)!.end));
        declStart = i + 1;
      } else if (depth === 0 && isWord(t, 'begin') && i === declStart) {
        inDeclare = false;
        boundary = true;
      }
      continue;
    }
    if (depth === 0 && boundary && isWord(t, 'for', 'foreach')) {
      // Its loop variables, then its query (`for … in <query> loop`), if it has one.
      let j = i + 1;
      while (tokens[j] && !isWord(tokens[j], 'in')) {
        if (tokens[j]!.kind === 'word' && !variables.has(tokens[j]!.text)) variables.set(tokens[j]!.text, 'record');
        j++;
      }
      const first = tokens[j + 1];
      if (isWord(first, ...SQL_STARTS)) {
        const end = endOf(tokens, j + 1, true);
        statements.push(sqlOf(body, tokens.slice(j + 1, end)));
        i = end;
        boundary = true;
      } else {
        i = j;
        boundary = false;
      }
      continue;
    }
    if (depth === 0 && boundary && isWord(t, ...SQL_STARTS)) {
      const end = endOf(tokens, i, false);
      statements.push(sqlOf(body, tokens.slice(i, end)));
      i = end;
      boundary = true;
      continue;
    }
    boundary =
      depth === 0 &&
      (t.text === ';' || t.text === '>>' || isWord(t, ...OPENERS) || (isWord(t, 'query') && isWord(tokens[i - 1], 'return')));
  }
  return { name, variables, statements };
}


function visitAll(value: unknown, visit: (type: string, fields: Fields) => void): void {
  if (Array.isArray(value)) for (const item of value) visitAll(item, visit);
  else if (isObject(value)) {
    const node = tagged(value);
    if (node) visit(node[0], node[1]);
    for (const child of Object.values(node ? node[1] : value)) visitAll(child, visit);
  }
}

const MODIFYING = new Set(['InsertStmt', 'UpdateStmt', 'DeleteStmt', 'MergeStmt']);

/** `now()` and its kin written as keywords (every SQLValueFunction is at best STABLE). */
const VALUE_FUNCTIONS: Readonly<Record<string, string>> = {
  SVFOP_CURRENT_DATE: 'current_date',
  SVFOP_CURRENT_TIME: 'current_time',
  SVFOP_CURRENT_TIME_N: 'current_time',
  SVFOP_CURRENT_TIMESTAMP: 'current_timestamp',
  SVFOP_CURRENT_TIMESTAMP_N: 'current_timestamp',
  SVFOP_LOCALTIME: 'localtime',
  SVFOP_LOCALTIME_N: 'localtime',
  SVFOP_LOCALTIMESTAMP: 'localtimestamp',
  SVFOP_LOCALTIMESTAMP_N: 'localtimestamp',
  SVFOP_CURRENT_ROLE: 'current_role',
  SVFOP_CURRENT_USER: 'current_user',
  SVFOP_USER: 'user',
  SVFOP_SESSION_USER: 'session_user',
  SVFOP_CURRENT_CATALOG: 'current_catalog',
  SVFOP_CURRENT_SCHEMA: 'current_schema',
};

/**
 * Whether a function of this name, called with `nargs` arguments, may not be immutable: any
 * overload of that name and that many arguments (defaults and VARIADIC counted) is not; when no
 * overload takes that many, any of the name. A name the catalogue lacks counts as not immutable.
 */
export function mayBeMutable(functions: WriteFunctionCatalogue['functions'], name: string, nargs: number): boolean {
  const overloads = functions.get(name) ?? [];
  if (overloads.length === 0) return true;
  const fitting = overloads.filter((o) => (o.variadic ? nargs >= o.nargs - 1 : nargs <= o.nargs && nargs >= o.nargs - o.defaults));
  return (fitting.length ? fitting : overloads).some((o) => !o.immutable);
}

/** The SQL name of a TypeName node (`timestamptz`, `bigint[]`). */
function typeNameOf(typeName: Fields): string {
  const names = list(typeName.names).map(sval).filter((n): n is string => n !== undefined);
  const base = names[0] === 'pg_catalog' && names.length > 1 ? names.slice(1).join('.') : names.join('.');
  return base + '[]'.repeat(list(typeName.arrayBounds).length);
}

/**
 * The type of a cast's argument where it can be known: a variable or argument (a row variable's
 * field as `table%rowtype.field`), a cast, a `->>` (text); undefined otherwise. A literal is cast
 * by the parser itself (its type's input function runs once, at parse time): nothing is left to
 * run, so it is not asked about.
 */
function sourceTypeOf(value: unknown, variables: ReadonlyMap<string, string>): string | 'literal' | undefined {
  const node = tagged(value);
  if (!node) return undefined;
  const [type, fields] = node;
  if (type === 'A_Const') return fields.sval || fields.isnull ? 'literal' : undefined;
  if (type === 'TypeCast') return isObject(fields.typeName) ? typeNameOf(fields.typeName) : undefined;
  if (type === 'A_Expr' && list(fields.name).map(sval).join() === '->>') return 'text';
  if (type === 'ColumnRef') {
    const names = list(fields.fields).map(sval);
    const declared = names[0] !== undefined ? variables.get(names[0].toLowerCase()) : undefined;
    if (declared === undefined || names.some((n) => n === undefined)) return undefined;
    if (names.length === 1) return declared;
    if (names.length === 2 && /%rowtype$/i.test(declared)) return `${declared}.${names[1]}`;
  }
  return undefined;
}

/**
 * The faults of one statement of a write function: each call that may not be immutable in a
 * CASE or COALESCE inside a modification (an INSERT, UPDATE, DELETE or MERGE, at the top of the
 * statement or as its CTE, with the modification's own CTEs and subqueries). The SELECT over a
 * modifying CTE is not held to it: Citus checks each modifying CTE as a modification of its
 * own (ModifyQuerySupported), and a SELECT's expressions as PostgreSQL does. Column references are not calls: a PL/pgSQL variable or argument is a
 * parameter to the planner, which Citus accepts.
 */
export function checkWriteStatement(sql: string, variables: ReadonlyMap<string, string>, catalogue: WriteFunctionCatalogue): WriteViolation[] {
  const bytes = Buffer.from(sql, 'utf8');
  const at = (location: unknown) => {
    const start = typeof location === 'number' && location >= 0 ? location : 0;
    const rest = bytes.subarray(start).toString('utf8').replace(/\s+/g, ' ');
    return rest.length <= 140 ? rest : `${rest.slice(0, 140).replace(/\s+\S*$/, '')} …`;
  };
  let tree: unknown;
  try {
    tree = parseSync(sql);
  } catch (error) {
    return [{ rule: 'parse', detail: (error as Error).message, fragment: at((error as { sqlDetails?: { cursorPosition?: number } }).sqlDetails?.cursorPosition) }];
  }
  const violations: WriteViolation[] = [];
  const reported = new Set<unknown>();
  const calls = (root: Fields, kind: string, location: unknown) => {
    const report = (detail: string, where: unknown) => {
      if (reported.has(where)) return;
      reported.add(where);
      violations.push({ rule: 'case-coalesce', detail: `${detail} in a ${kind}`, fragment: at(location) });
    };
    visitAll(root, (type, fields) => {
      if (type === 'FuncCall') {
        const name = list(fields.funcname).map(sval).at(-1)?.toLowerCase() ?? '';
        if (mayBeMutable(catalogue.functions, name, list(fields.args).length)) report(`${name}()`, fields.location);
      } else if (type === 'SQLValueFunction') {
        report(VALUE_FUNCTIONS[fields.op as string] ?? String(fields.op), fields.location);
      } else if (type === 'TypeCast' && isObject(fields.typeName)) {
        const target = typeNameOf(fields.typeName);
        const source = sourceTypeOf(fields.arg, variables);
        if (source !== undefined && source !== 'literal' && catalogue.castImmutable(source, target) === false) {
          report(`::${target} of ${source}`, fields.location);
        }
      }
    });
  };
  // Within each modification (its own CTEs and subqueries too); the SELECT over a modifying
  // CTE is not a modification: Citus checks the CTE by itself, as here.
  visitAll(tree, (type, fields) => {
    if (!MODIFYING.has(type)) return;
    visitAll(fields, (inner, innerFields) => {
      if (inner === 'CaseExpr') calls(innerFields, 'CASE', innerFields.location);
      else if (inner === 'CoalesceExpr') calls(innerFields, 'COALESCE', innerFields.location);
    });
  });
  return violations;
}

/** Every cast (source type, target type) under the statements' CASE and COALESCE expressions whose source type can be known. */
export function castsIn(fn: WriteFunction): Array<[string, string]> {
  const pairs: Array<[string, string]> = [];
  const record: WriteFunctionCatalogue = {
    functions: new Map(),
    castImmutable: (source, target) => {
      pairs.push([source, target]);
      return undefined;
    },
  };
  for (const sql of fn.statements) checkWriteStatement(sql, fn.variables, record);
  return pairs;
}

/**
 * A write function's statements held to the routing rules of citus-statements.ts as they run:
 * on the user's worker, inside the call of `apply` Citus delegates there, the user held by
 * `user` (the functions' argument). One line a fault: `<function> #<statement, from 1> [rule]
 * <detail> — <fragment>`.
 */
export function routeWriteFunction(fn: WriteFunction, catalogue: Catalogue, user: string): string[] {
  return fn.statements.flatMap((sql, i) =>
    checkStatement(sql, catalogue, { userParams: [user], delegated: true }).map(
      (v) => `${fn.name} #${i + 1} [${v.rule}] ${v.detail} — ${v.fragment.replace(/\s+/g, ' ')}`,
    ),
  );
}

/** A write function's faults, one line each: `<function> [rule] <detail> — <fragment>`. */
export function checkWriteFunction(fn: WriteFunction, catalogue: WriteFunctionCatalogue): string[] {
  return fn.statements.flatMap((sql) => checkWriteStatement(sql, fn.variables, catalogue).map((v) => `${fn.name} [${v.rule}] ${v.detail} — ${v.fragment}`));
}
