/**
 * String values the ORM writes into SQL as literals (MikroORM sends a statement as text with its
 * values written in, outside the prepared reads of src/db/prepared.ts): PostgreSQL reads back the
 * very strings, whatever they hold (quotes, backslashes, `?`, the `E'…'` form, any Unicode; no
 * NUL, which no PostgreSQL text holds).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { openOrm } from '../../src/app/orm.js';
import { createTestDatabase } from '../helpers/test-app.js';

/** Strings rich in what quoting must handle. */
const tricky = fc
  .array(fc.oneof(fc.constantFrom("'", '\\', "''", "\\'", '?', 'E', ' ', '\n', '"', '$$', '😀'), fc.string({ unit: 'grapheme' })), { maxLength: 30 })
  .map((parts) => parts.join('').replaceAll('\0', ''));

describe('an ORM opened by the service', () => {
  it('writes string literals PostgreSQL reads back as the very strings', async () => {
    const orm = await openOrm(await createTestDatabase(), { migrate: false, poolSize: 1 });
    try {
      const readBack = async (values: string[]) => {
        const rows = await orm.em.fork().execute<Array<{ v: string }>>(`select unnest(array[${values.map(() => '?::text').join(', ')}]) as v`, values);
        return rows.map((row) => row.v);
      };
      const named = ["it's", 'a\\b', "both ' and \\ and ?", '{"label":"x\\"y"}', 'é😀', ''];
      expect(await readBack(named)).toEqual(named);
      const long = JSON.stringify(Array.from({ length: 200 }, (_, i) => ({ label: `Task ${i}: it's "quoted" \\ ${'é'.repeat(i % 7)}` })));
      expect(await readBack([long])).toEqual([long]);
      await fc.assert(fc.asyncProperty(fc.array(tricky, { minLength: 1, maxLength: 20 }), async (values) => {
        expect(await readBack(values)).toEqual(values);
      }), { numRuns: 60 });
    } finally {
      await orm.close(true);
    }
  });
});
