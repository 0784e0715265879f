/**
 * src/db/prepared.ts on a real PostgreSQL: outside a transaction a statement is prepared once
 * per connection under its name and then only run; inside one it goes through the ORM; `?` in
 * quoted text stays text; errors are the ORM's, as for every other statement.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { UniqueConstraintViolationException, type MikroORM } from '@mikro-orm/postgresql';
import { openOrm } from '../../src/app/orm.js';
import { execute, named, prepared } from '../../src/db/prepared.js';
import { run, sql as kysql } from '../../src/db/sql-builder.js';
import { createTestDatabase } from '../helpers/test-app.js';

let orm: MikroORM;
const logged: string[] = [];

beforeAll(async () => {
  // One connection: the statement that lists prepared statements sees those of the others.
  orm = await openOrm(await createTestDatabase(), { migrate: false, poolSize: 1, onQuery: (line) => logged.push(line) });
  await orm.em.fork().execute('create table items (id int primary key, note text)');
});
afterAll(() => orm?.close(true));

// Each test starts from an empty table and puts in what it needs (through the ORM, not
// prepared), so they run in any order.
beforeEach(async () => {
  await orm.em.fork().execute('truncate items');
});
const insertRowOne = () => orm.em.fork().execute(`insert into items (id, note) values (1, 'one')`);

const preparedNames = async () =>
  (await execute<{ name: string }>(orm.em.fork(), `select name from pg_prepared_statements where name like 's\\_%' order by name`)).map((r) => r.name);

describe('prepared statements', () => {
  it('numbers the placeholders outside quoted text only', () => {
    expect(prepared(`select '?' as "a?", ? as v, 'it''s ?' as w where ? = ?`).text).toBe(`select '?' as "a?", $1 as v, 'it''s ?' as w where $2 = $3`);
  });

  it('prepares a statement once, runs it with its values, and logs it like any other', async () => {
    const sql = `insert into items (id, note) values (?, ?) returning id, note`;
    logged.length = 0;
    expect(await execute(orm.em.fork(), sql, [1, 'one'])).toEqual([{ id: 1, note: 'one' }]);
    expect(await execute(orm.em.fork(), sql, [2, `two ' with "quotes" and ?`])).toEqual([{ id: 2, note: `two ' with "quotes" and ?` }]);
    expect(logged.filter((line) => line.includes('insert into items'))).toHaveLength(2);
    expect(await preparedNames()).toContain(prepared(sql).name);
  });

  it('inside a transaction goes through the ORM (the transaction\'s connection), unprepared', async () => {
    await insertRowOne();
    const sql = `select note from items where id = ? and note is not null`;
    await orm.em.fork().transactional(async (em) => {
      expect(await execute(em, sql, [1])).toEqual([{ note: 'one' }]);
    });
    expect(await preparedNames()).not.toContain(prepared(sql).name);
  });

  it('fails with the ORM\'s exceptions, and keeps its connection (and what it prepared) when the server answered', async () => {
    await insertRowOne();
    const pid = async () => (await execute<{ pid: number }>(orm.em.fork(), 'select pg_backend_pid() as pid'))[0]!.pid;
    const before = await pid();
    const names = await preparedNames();
    await expect(execute(orm.em.fork(), `insert into items (id, note) values (?, ?)`, [1, 'again'])).rejects.toBeInstanceOf(UniqueConstraintViolationException);
    expect(await pid()).toBe(before);
    expect(await preparedNames()).toEqual(expect.arrayContaining(names));
  });

  it('a query composed with Kysely (a write\'s call, its NOTIFY) is prepared outside a transaction, its values bound; in one, it runs unprepared', async () => {
    const note = `it's $1 and ? and "quoted"`;
    const insert = kysql<{ id: number; note: string }>`insert into items (id, note) values (${3}, ${note}) returning id, note`;
    const name = named(insert.compile(orm.em.fork().getKysely()).sql).name;
    expect(await run(orm.em.fork(), insert)).toEqual([{ id: 3, note }]);
    expect(await preparedNames()).toContain(name);
    const read = kysql<{ note: string }>`select note from items where id = ${3} and note like ${'it%'}`;
    await orm.em.fork().transactional(async (em) => {
      expect(await run(em, read)).toEqual([{ note }]);
    });
    expect(await preparedNames()).not.toContain(named(read.compile(orm.em.fork().getKysely()).sql).name);
  });
});
