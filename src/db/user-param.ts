/**
 * The user a statement is about, named as a parameter wherever it reads or writes a user table.
 * Sharded by user (Citus, src/db/data-layout.ts), a statement goes to one node only when each of
 * its references to a user table says `user_id = $n` (`users`: `id = $n`) with the same value:
 * a join on another CTE's column (`tasks.user_id = owner.id`) does not tell the planner which
 * node, and it asks every one.
 *
 * Fragments are written apart from the statement they end up in, each with its own `?` values.
 * They write `USER` where the user goes, and the statement's builder binds it once
 * (`bindUser`), so no fragment has to know where its values land among the others'. An unbound
 * `USER` is a syntax error, never a wrong value.
 */

/** The user's id, in a fragment: bound by `bindUser`. */
export const USER = '%user%';

/** `?`, `USER`, and what they may not be taken from: quoted literals and identifiers. */
const PLACES = /'(?:[^']|'')*'|"(?:[^"]|"")*"|\?|%user%/g;

/** `sql` with each `USER` made a `?` and the user's id put at its place among `params`. */
export function bindUser(sql: string, params: readonly unknown[], userId: number): { sql: string; params: unknown[] } {
  const bound: unknown[] = [];
  let next = 0;
  const text = sql.replace(PLACES, (match) => {
    if (match === '?') {
      if (next >= params.length) throw new Error('a statement has more `?` than values');
      bound.push(params[next++]);
      return '?';
    }
    if (match === USER) {
      bound.push(userId);
      return '?';
    }
    return match;
  });
  if (next !== params.length) throw new Error(`a statement has ${next} \`?\` for ${params.length} values`);
  return { sql: text, params: bound };
}
