/**
 * How the service's pool reads int8 and int8[] (src/db/orm-config.ts): as JS numbers, exactly,
 * whatever PostgreSQL writes for them (a flat array of integers is split at its commas, the
 * rest goes through the general array parser); a value beyond the integers a number holds
 * exactly fails its statement instead of being rounded.
 */
import fc from 'fast-check';
import type { MikroORM } from '@mikro-orm/postgresql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openOrm } from '../../src/app/orm.js';
import { createTestDatabase } from '../helpers/test-app.js';

let orm: MikroORM;
beforeAll(async () => {
  orm = await openOrm(await createTestDatabase(), { migrate: false, poolSize: 2 });
});
afterAll(async () => {
  await orm?.close(true);
});

/** The value PostgreSQL reads from `text` as `type`, as the service's pool gives it back. */
async function read(text: string, type: 'int8' | 'int8[]'): Promise<unknown> {
  const [row] = await orm.em.fork().execute<Array<{ v: unknown }>>(`select ?::${type} as v`, [text]);
  return row!.v;
}

const safe = fc.integer({ min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER });

describe('int8 and int8[] read by the service', () => {
  it('give any flat array of safe integers back, as numbers, in order', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.oneof(safe, fc.integer({ min: -10, max: 10 })), { maxLength: 60 }), async (values) => {
        expect(await read(`{${values.join(',')}}`, 'int8[]')).toEqual(values);
      }),
      { numRuns: 200 },
    );
  });

  it('read NULLs, nesting and explicit bounds through the general parser', async () => {
    expect(await read('{}', 'int8[]')).toEqual([]);
    expect(await read('{1,NULL,3}', 'int8[]')).toEqual([1, null, 3]);
    expect(await read('{{1,2},{3,4}}', 'int8[]')).toEqual([[1, 2], [3, 4]]);
    expect(await read('[0:1]={7,8}', 'int8[]')).toEqual([7, 8]);
    expect(await read(' { 5 , -6 } ', 'int8[]')).toEqual([5, -6]);
  });

  it('fail the statement for a value beyond 2^53 − 1, alone or in an array, never rounding it', async () => {
    await expect(read('9007199254740993', 'int8')).rejects.toThrow(/beyond the integers/);
    await expect(read('{1,9007199254740993}', 'int8[]')).rejects.toThrow(/beyond the integers/);
    await expect(read('{{1},{-9007199254740993}}', 'int8[]')).rejects.toThrow(/beyond the integers/);
    expect(await read(String(Number.MAX_SAFE_INTEGER), 'int8')).toBe(Number.MAX_SAFE_INTEGER);
  });
});
