/**
 * The committed SQL snapshots (test/procedures/read-sql/, write-sql/ and write-sql/functions/)
 * formatted for reading, one clause a line, by sql-formatter in its PostgreSQL dialect: the
 * way Immich commits its queries (server/src/queries/*.sql), so that a change to a statement
 * shows in review as a diff of the clauses it touches, not of a line of 2,000 characters. Only
 * the snapshots are formatted: the service sends its SQL as it builds it.
 *
 * A formatted text replaces a statement only when it is that statement again: the same
 * characters but white space (its `?` and `$1` placeholders and its comments included) and
 * the same parse tree by PostgreSQL's own grammar (libpg-query, locations aside). Otherwise, or when sql-formatter throws, the statement is
 * kept as it came: a snapshot never fails for its layout.
 */
import { parseSync } from 'libpg-query';
import { format, type FormatOptionsWithLanguage } from 'sql-formatter';
import { loadParser, numberPlaceholders } from './citus-statements.js';

const OPTIONS: FormatOptionsWithLanguage = {
  language: 'postgresql',
  // `?` as the ORM logs a value, `$1` as a statement that numbers its own.
  paramTypes: { positional: true, numbered: ['$'] },
};

/**
 * In a write function's body, a piece of PL/pgSQL is formatted when one of its lines is longer
 * than this (the statements composed by Kysely, written as one line; the expressions and
 * conditions that hold one); the pieces whose lines are all shorter are left as they read.
 */
const LONG_LINE = 120;

/** A line after which a PL/pgSQL statement starts: one ended, or a block opened. */
const STATEMENT_BEFORE = /(?:;|\b(?:begin|then|else|loop))$/i;

/**
 * The pieces of a body that are formatted, from where a statement starts to where it ends (its
 * `;`, or the `then` or `loop` of a head), each split into a head kept as it is, the SQL that
 * is formatted and a tail. The SQL is a statement, or an expression: formatted as
 * `select <expression>` (and checked so, before and after), its `select` then replaced by the
 * head and its lines indented under it. A tail of `;` ends the last line; a `then` or `loop`
 * has a line of its own.
 */
const SHAPES: ReadonlyArray<{ piece: RegExp; expression: boolean }> = [
  // A SQL statement, whole (`select … into v_x from …;`, `insert … returning * into v_x;`).
  { piece: /^()((?:select|insert|update|delete|with)\s[\s\S]*;)()$/i, expression: false },
  // `for <targets> in <query> loop`: the query under its head.
  { piece: /^(for\s[\s\S]*?\sin)\s+((?:select|with)\s[\s\S]*)\s+(loop)$/i, expression: false },
  // An assignment, `v_x := <expression>;` (to an array's element too: `v_x[i] :=`).
  { piece: /^([a-z_][\w.]*(?:\[[^\]]*\])?\s*:=)\s*([\s\S]*)(;)$/i, expression: true },
  // `return <expression>;`, and `perform <query>;` (a select without its word).
  { piece: /^(return|perform)\s+([\s\S]*)(;)$/i, expression: true },
  // `raise exception using errcode = '…', message = <expression>;`: the message.
  { piece: /^(raise\s[\s\S]*?\smessage\s*=)\s*([\s\S]*)(;)$/i, expression: true },
  // A condition: `if <condition> then`, `elsif … then`, `when … then`.
  { piece: /^(if|elsif|when)\s+([\s\S]*)\s+(then)$/i, expression: true },
];

/** The function's head: `create function <name>(<parameters>) returns … as $$`. */
const HEAD = /^create\s+function\s[^(]*\([^()]*\)[\s\S]*\$\$$/i;

/** PL/pgSQL's target of a statement's rows (`… returning * into v_task;`), which SQL's grammar lacks. */
const INTO_TARGET = /\s+into\s+[a-z_][a-z0-9_]*(?:\s*,\s*[a-z_][a-z0-9_]*)*\s*;?\s*$/i;

const withoutSpace = (sql: string) => sql.replace(/\s+/g, '');

const LOCATIONS = new Set(['location', 'stmt_location', 'stmt_len']);

/** The statement's parse tree without locations, as JSON; undefined if PostgreSQL cannot read it. */
function treeOf(sql: string): string | undefined {
  try {
    return JSON.stringify(parseSync(numberPlaceholders(sql)), (key, value: unknown) => (LOCATIONS.has(key) ? undefined : value));
  } catch {
    return undefined;
  }
}

/** Its tree as SQL, or, for a PL/pgSQL statement with an INTO target at its end, without it. */
const plpgsqlTreeOf = (sql: string) => treeOf(sql) ?? (INTO_TARGET.test(sql) ? treeOf(sql.replace(INTO_TARGET, '')) : undefined);

/** One statement formatted; undefined if that cannot be done to the letter. */
function formatted(sql: string): string | undefined {
  let text: string;
  try {
    // No blank line inside a statement: a snapshot holds one statement per paragraph, and no
    // statement formatted here has a blank line of its own.
    text = format(sql, OPTIONS).replace(/\n\s*\n/g, '\n');
  } catch {
    return undefined;
  }
  if (withoutSpace(text) !== withoutSpace(sql)) return undefined;
  const before = plpgsqlTreeOf(sql);
  return before !== undefined && before === plpgsqlTreeOf(text) ? text : undefined;
}

/** The statements of a snapshot (each one line, as logged), formatted one clause a line. */
export async function formatStatements(statements: readonly string[]): Promise<string[]> {
  await loadParser();
  return statements.map((sql) => (sql.includes('\n') ? sql : (formatted(sql) ?? sql)));
}

/** The piece of a body that starts at line `i` (its lines and its shape's match), if one does. */
function pieceAt(lines: readonly string[], i: number) {
  for (let k = i; k < lines.length; k++) {
    const text = lines.slice(i, k + 1).join('\n').trim();
    for (const shape of SHAPES) {
      const match = shape.piece.exec(text);
      if (match) return { lines: lines.slice(i, k + 1), expression: shape.expression, head: match[1]!, sql: match[2]!, tail: match[3]! };
    }
    // No statement of a body goes past its `;`.
    if (lines[k]!.trim().endsWith(';')) return undefined;
  }
  return undefined;
}

/** A piece's lines formatted, indented as its first line was; undefined if it cannot be. */
function layout(piece: NonNullable<ReturnType<typeof pieceAt>>): string[] | undefined {
  const { head, sql, tail } = piece;
  const text = formatted(piece.expression ? `select ${sql}` : sql);
  if (text === undefined) return undefined;
  const lines = piece.expression
    ? text.replace(/^select/i, head).split('\n')
    : [...(head ? [head] : []), ...text.split('\n').map((line) => (head ? `  ${line}` : line))];
  if (tail === ';') lines[lines.length - 1] += tail;
  else if (tail) lines.push(tail);
  const indent = /^\s*/.exec(piece.lines[0]!)![0];
  return lines.map((line) => indent + line);
}

/**
 * A write function's text (`create function … as $$ … $$`): sql-formatter reads its body as
 * one string, so each piece of the body that has a long line (a SQL statement, an assignment's
 * expression, a condition, a raised message: SHAPES) is formatted by itself and indented as its
 * first line was, and a long head has its parameters one a line; the rest of the text is kept as
 * it is.
 */
export async function formatFunction(text: string): Promise<string> {
  await loadParser();
  const start = text.indexOf('$$');
  const end = text.lastIndexOf('$$');
  if (start < 0 || end <= start) return text;
  const lines = text.slice(start + 2, end).split('\n');
  const body: string[] = [];
  let previous = '';
  for (let i = 0; i < lines.length; ) {
    const piece = STATEMENT_BEFORE.test(previous) ? pieceAt(lines, i) : undefined;
    const taken = piece?.lines ?? [lines[i]!];
    body.push(...((piece && taken.some((line) => line.length > LONG_LINE) && layout(piece)) || taken));
    // A comment is no statement's end.
    for (const line of taken) if (line.trim() !== '' && !line.trim().startsWith('--')) previous = line.trim();
    i += taken.length;
  }
  return formattedHead(text.slice(0, start + 2)) + body.join('\n') + text.slice(end);
}

/**
 * The function's head with a line longer than LONG_LINE, its parameters one a line (formatted
 * with an empty body, `$$$$`, and checked so); as it is otherwise.
 */
function formattedHead(head: string): string {
  if (!HEAD.test(head) || head.split('\n').every((line) => line.length <= LONG_LINE)) return head;
  const text = formatted(`${head}$$`);
  return text?.endsWith('$$$$') ? text.slice(0, -2) : head;
}
