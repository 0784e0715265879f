/**
 * The version of a row (API-CONTRACT.md §11) moved by the UPDATE that changes it: no trigger
 * does it (Citus distributes no table that has one: see
 * src/db/migrations/Migration20261129000000_citus_ready.ts). An edit that may leave its row as
 * it was (the same label, nothing to edit) moves the version only when a column changes, as the
 * trigger did (`new is distinct from old`): each assignment's value is compared with the column
 * it replaces. Both are read from the row as it was (PostgreSQL evaluates every expression of a
 * SET on the old row), so the comparison sees what the assignment writes.
 */

/**
 * `version = <table>.version + 1` when any assignment of `set` changes its column, with the
 * values of its `?` (those of `set` again, in their order). `set` holds `column = expression`
 * items, one or more per string, separated by commas as a SET list writes them.
 */
export function versionIfChanged(table: string, set: readonly string[], setParams: readonly unknown[]): { sql: string; params: unknown[] } {
  const assignments = set.flatMap(topLevelItems).map((item) => {
    const at = item.indexOf('=');
    if (at < 0) throw new Error(`not an assignment: ${item}`);
    return { column: item.slice(0, at).trim(), value: item.slice(at + 1).trim() };
  });
  const values = assignments.map((a) => a.value).join(', ');
  const columns = assignments.map((a) => `${table}.${a.column}`).join(', ');
  // A row of one value is that value: `(x) is distinct from (c)` compares two scalars.
  return {
    sql: `version = ${table}.version + case when (${values}) is distinct from (${columns}) then 1 else 0 end`,
    params: [...setParams],
  };
}

/** The items of a comma list, split where no parenthesis, bracket or quote is open. */
function topLevelItems(list: string): string[] {
  const items: string[] = [];
  let depth = 0;
  let quote: string | null = null;
  let start = 0;
  for (let i = 0; i < list.length; i++) {
    const c = list[i]!;
    if (quote) {
      if (c === quote) quote = null; // a doubled quote closes and opens again: the same
    } else if (c === "'" || c === '"') quote = c;
    else if (c === '(' || c === '[') depth++;
    else if (c === ')' || c === ']') depth--;
    else if (c === ',' && depth === 0) {
      items.push(list.slice(start, i));
      start = i + 1;
    }
  }
  if (quote || depth !== 0) throw new Error(`an unbalanced SET list: ${list}`);
  items.push(list.slice(start));
  return items.map((item) => item.trim()).filter((item) => item !== '');
}
