/**
 * String literals (src/db/literals.ts): the fast quoting writes exactly what MikroORM's
 * PostgreSQL platform writes, for any string (quotes, backslashes, both, none, any Unicode,
 * long texts), and an ORM opened by the service uses it.
 */
import fc from 'fast-check';
import { PostgreSqlPlatform } from '@mikro-orm/postgresql';
import { describe, expect, it } from 'vitest';
import { openOrm } from '../../src/app/orm.js';
import { escapeLiteral } from '../../src/db/literals.js';
import { createTestDatabase } from '../helpers/test-app.js';

const platform = new PostgreSqlPlatform();
/** The platform's own method (private in its types). */
const own = (PostgreSqlPlatform.prototype as unknown as { escapeLiteral(value: string): string }).escapeLiteral;
const original = (value: string) => own.call(platform, value);

/** Strings rich in what quoting must handle. */
const tricky = fc.array(fc.oneof(fc.constantFrom("'", '\\', "''", "\\'", '?', 'E', ' ', '\n', '\u0000', '"'), fc.string({ unit: 'grapheme' })), { maxLength: 30 }).map((parts) => parts.join(''));

describe('fast string literals', () => {
  it('are the platform’s own, for any string', () => {
    fc.assert(fc.property(fc.oneof(fc.string({ unit: 'binary' }), tricky), (value) => {
      expect(escapeLiteral(value)).toBe(original(value));
    }), { numRuns: 5000 });
  });

  it('for the cases that matter, by name', () => {
    for (const value of ['', 'plain', "it's", 'a\\b', "both ' and \\", '\\', "'", '{"label":"x\\"y"}']) expect(escapeLiteral(value)).toBe(original(value));
    expect(escapeLiteral("it's")).toBe("'it''s'");
    expect(escapeLiteral('a\\b')).toBe(" E'a\\\\b'");
  });

  it('for a long JSON document', () => {
    const value = JSON.stringify(Array.from({ length: 200 }, (_, i) => ({ label: `Task ${i}: it's "quoted" \\ ${'é'.repeat(i % 7)}` })));
    expect(escapeLiteral(value)).toBe(original(value));
  });
});

describe('an ORM opened by the service', () => {
  it('writes its literals with them, and PostgreSQL reads back the very strings', async () => {
    const orm = await openOrm(await createTestDatabase(), { migrate: false, poolSize: 1 });
    try {
      expect((orm.em.getPlatform() as unknown as { escapeLiteral: unknown }).escapeLiteral).toBe(escapeLiteral);
      const values = ["it's", 'a\\b', "both ' and \\ and ?", '{"label":"x\\"y"}', 'é😀'];
      const rows = await orm.em.fork().execute<Array<{ v: string }>>(`select unnest(array[${values.map(() => '?::text').join(', ')}]) as v`, values);
      expect(rows.map((row) => row.v)).toEqual(values);
    } finally {
      await orm.close(true);
    }
  });
});
