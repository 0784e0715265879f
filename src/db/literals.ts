/**
 * String values written into SQL as literals, fast. MikroORM sends every statement as text
 * with its values written in (src/db/prepared.ts), and its PostgreSQL platform quotes a string
 * one character at a time, appending each to the result: a rope of one piece per character,
 * flattened again when the statement is written to the socket. For a short label that is
 * nothing; for the documents of a reorder's or a project start's events (one JSON text of
 * 30–100 kB) it was most of the write's CPU in Node (quoting, flattening, and the garbage).
 *
 * `escapeLiteral` gives the platform's exact text (libpq's rule: quotes doubled, and when the
 * string has a backslash, backslashes doubled and an ` E` prefix) with two native replaces;
 * test/rules/literals.test.ts compares the two on any string.
 */

/** The SQL literal of `value`, exactly as MikroORM's PostgreSQL platform writes it. */
export function escapeLiteral(value: string): string {
  const quoted = value.replaceAll("'", "''");
  return value.includes('\\') ? ` E'${quoted.replaceAll('\\', '\\\\')}'` : `'${quoted}'`;
}

/** Makes MikroORM's PostgreSQL platform (its `escapeLiteral` is private) write its string literals with `escapeLiteral`. */
export function useFastLiterals(platform: object): void {
  if (typeof (platform as { escapeLiteral?: unknown }).escapeLiteral !== 'function') throw new Error('The ORM platform quotes no string literals: not PostgreSQL?');
  (platform as { escapeLiteral: (value: string) => string }).escapeLiteral = escapeLiteral;
}
