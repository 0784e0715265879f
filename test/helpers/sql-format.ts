/**
 * The committed SQL snapshots (test/procedures/read-sql/, write-sql/ and write-sql/functions/)
 * formatted for reading, one clause a line, by sql-formatter in its PostgreSQL dialect: the
 * way Immich commits its queries (server/src/queries/*.sql), so that a change to a statement
 * shows in review as a diff of the clauses it touches, not of a line of 2,000 characters. Only
 * the snapshots are formatted: the service sends its SQL as it builds it.
 *
 * A formatted text replaces a statement only when it is that statement again: the same
 * characters but white space (its `?` and `$1` placeholders and its comments, such as the
 * `batched` mark, included) and the same parse tree by PostgreSQL's own grammar (libpg-query,
 * locations aside). Otherwise, or when sql-formatter throws, the statement is
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
 * In a write function's body, a statement is formatted when it sits alone on a line longer
 * than this (the statements composed by Kysely, written as one line); the shorter ones, and
 * those already written over several lines, are left as they read.
 */
const LONG_LINE = 120;

/** A line holding one whole SQL statement, its indentation apart. */
const STATEMENT_LINE = /^(\s*)((?:select|insert|update|delete|with)\s.*;)\s*$/i;

/** A line after which a PL/pgSQL statement starts: one ended, or a block opened. */
const STATEMENT_BEFORE = /(?:;|\b(?:begin|then|else|loop))$/i;

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

/** One statement of one line, formatted; as it is if that cannot be done to the letter. */
function formatted(sql: string): string {
  let text: string;
  try {
    // No blank line inside a statement: a snapshot holds one statement per paragraph. The
    // statement is one line, so each line break is the formatter's, between two tokens.
    text = format(sql, OPTIONS).replace(/\n\s*\n/g, '\n');
  } catch {
    return sql;
  }
  if (withoutSpace(text) !== withoutSpace(sql)) return sql;
  const before = plpgsqlTreeOf(sql);
  return before !== undefined && before === plpgsqlTreeOf(text) ? text : sql;
}

/** The statements of a snapshot (each one line, as logged), formatted one clause a line. */
export async function formatStatements(statements: readonly string[]): Promise<string[]> {
  await loadParser();
  return statements.map((sql) => (sql.includes('\n') ? sql : formatted(sql)));
}

/**
 * A write function's text (`create function … as $$ … $$`): sql-formatter reads its body as
 * one string, so each SQL statement of the body that sits alone on a long line is formatted by
 * itself and indented as that line was; the rest of the text is kept as it is.
 */
export async function formatFunction(text: string): Promise<string> {
  await loadParser();
  const start = text.indexOf('$$');
  const end = text.lastIndexOf('$$');
  if (start < 0 || end <= start) return text;
  let previous = '';
  const body = text
    .slice(start + 2, end)
    .split('\n')
    .flatMap((line) => {
      const statement = STATEMENT_LINE.exec(line);
      const after = previous;
      if (line.trim() !== '') previous = line.trim();
      if (!statement || line.length <= LONG_LINE || !STATEMENT_BEFORE.test(after)) return [line];
      const indent = statement[1]!;
      return formatted(statement[2]!)
        .split('\n')
        .map((formattedLine) => indent + formattedLine);
    });
  return text.slice(0, start + 2) + body.join('\n') + text.slice(end);
}
