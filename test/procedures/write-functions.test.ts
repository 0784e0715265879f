/**
 * The write functions (docs/design/writes.md), committed as text under
 * test/procedures/write-sql/functions/, one file each (as Immich commits its queries): a change
 * of a rule table or of a write shows in review as a diff of the SQL it makes. Each piece of a
 * body with a line over 120 characters (a SQL statement, an assignment's expression, a
 * condition, a returned value, a raised message) and a long head are formatted one clause a
 * line (test/helpers/sql-format.ts). Also: the set is installed with the migrations, once,
 * under the schema its text names.
 *
 * After a deliberate change: `npx vitest run test/procedures/write-functions.test.ts -u`.
 */
import { describe, expect, it } from 'vitest';
import { writeFunctionSet, writeOperations } from '../../src/app/write-functions.js';
import { useProcedures } from '../helpers/procedures.js';
import { formatFunction } from '../helpers/sql-format.js';

const app = useProcedures();

describe('the write functions', () => {
  it.each(writeOperations.map((o) => [o.op, o] as const))('%s: its function, as installed', async (_op, operation) => {
    const text = writeFunctionSet.statements.find((s) => s.includes(`.${operation.fn}(`))!;
    await expect(`-- ${operation.op}\n\n${await formatFunction(text.replaceAll(writeFunctionSet.schema, 'w'))}\n`).toMatchFileSnapshot(`./write-sql/functions/${operation.fn}.sql`);
  });

  it.each([
    ['apply', 'the one call every write makes'],
    ['json_put', "sets a batch's refs in an operation's input"],
    ['key_open', "every write's first step: its key, the user's lock, the key's record"],
    ['key_keep', "keeps a write's outcome under its key"],
    ['key_replay', "the outcome kept under a key, to replay"],
    ['key_busy', "a key another request holds: its kept outcome, or in progress"],
  ])('%s: %s', async (fn) => {
    const text = writeFunctionSet.statements.find((s) => s.includes(`function ${writeFunctionSet.schema}.${fn}(`))!;
    await expect(`-- ${fn}\n\n${await formatFunction(text.replaceAll(writeFunctionSet.schema, 'w'))}\n`).toMatchFileSnapshot(`./write-sql/functions/${fn}.sql`);
  });

  it('are installed under the schema their text names, with every function', async () => {
    const rows = await app.orm.em.fork().execute<Array<{ name: string }>>(
      `select p.proname as name from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = ? order by 1`,
      [writeFunctionSet.schema],
    );
    expect(rows.map((r) => r.name)).toEqual(['apply', 'json_put', 'key_busy', 'key_keep', 'key_open', 'key_replay', ...writeOperations.map((o) => o.fn)].sort());
  });
});
