/**
 * src/db/transaction-timeout.ts on a real PostgreSQL (and, in the pooled tier, through
 * PgBouncer in transaction mode): the statement timeout travels in the message of each
 * plain-text statement, bounds it, and changes nothing else the caller sees.
 */
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { timeoutEachTransaction } from '../../src/db/transaction-timeout.js';
import { createTestDatabase, directUrlOf } from '../helpers/test-app.js';

const SETTING = "select set_config('statement_timeout', '300', true)";

let client: pg.Client;
/** Reads and sets up rows past the pooler (the pooled tier): what it sees is PostgreSQL's. */
let observer: pg.Client;

beforeAll(async () => {
  const url = await createTestDatabase();
  client = new pg.Client({ connectionString: url });
  observer = new pg.Client({ connectionString: directUrlOf(url) });
  await Promise.all([client.connect(), observer.connect()]);
  timeoutEachTransaction(client, SETTING);
  await client.query('create table items (id int primary key, note text)');
});

afterAll(async () => {
  await Promise.all([client?.end(), observer?.end()]);
});

const rows = async (sql: string) => (await observer.query(sql)).rows;

// Each test starts from an empty table and puts in what it needs, so they run in any order.
beforeEach(async () => {
  await observer.query('truncate items');
});

describe('the statement timeout of each transaction', () => {
  it('bounds a statement sent alone, and a statement of a transaction, on the server', async () => {
    const started = Date.now();
    await expect(client.query('select pg_sleep(3)')).rejects.toMatchObject({ code: '57014' });
    await client.query('begin');
    await expect(client.query('select pg_sleep(3)')).rejects.toMatchObject({ code: '57014' });
    await client.query('rollback');
    expect(Date.now() - started).toBeLessThan(2_500);
    expect((await client.query("select current_setting('statement_timeout') as t")).rows).toEqual([{ t: '300ms' }]);
  });

  it('answers each statement with its own result, a text of several statements with all of its own', async () => {
    expect((await client.query(`insert into items values (1, 'one') returning id, note`)).rows).toEqual([{ id: 1, note: 'one' }]);
    const several = (await client.query('select 1 as a; select 2 as b')) as unknown as pg.QueryResult[];
    expect(several.map((r) => r.rows)).toEqual([[{ a: 1 }], [{ b: 2 }]]);
    expect((await client.query('begin')).command).toBe('BEGIN');
    expect((await client.query('commit')).command).toBe('COMMIT');
  });

  it('keeps a transaction whole: not committed before its commit, undone by its rollback', async () => {
    await client.query('begin');
    await client.query(`insert into items values (2, 'two')`);
    expect(await rows('select id from items')).toEqual([]);
    await client.query('commit');
    await client.query('begin');
    await client.query(`insert into items values (3, 'three')`);
    await client.query('rollback');
    expect(await rows('select id from items order by id')).toEqual([{ id: 2 }]);
  });

  it('gives a transaction opened with an isolation level the setting after its opening, not before it', async () => {
    // Before the opening, the setting's select would make it "SET TRANSACTION ISOLATION LEVEL
    // must be called before any query" (25001): the account's export through PgBouncer.
    await client.query('start transaction isolation level repeatable read read only');
    const settings = await client.query(`select current_setting('transaction_isolation') as isolation, current_setting('transaction_read_only') as ro`);
    await client.query('rollback');
    expect(settings.rows).toEqual([{ isolation: 'repeatable read', ro: 'on' }]);
  });

  it('sends a rollback, a savepoint and its release alone: a failed transaction still ends, a failed step is undone', async () => {
    await observer.query(`insert into items values (1, 'one')`);
    await client.query('begin');
    await expect(client.query(`insert into items values (1, 'duplicate key')`)).rejects.toMatchObject({ code: '23505' });
    await client.query('rollback');
    await client.query('begin');
    await client.query(`insert into items values (4, 'four')`);
    await client.query('savepoint step');
    await expect(client.query(`insert into items values (1, 'duplicate key')`)).rejects.toMatchObject({ code: '23505' });
    await client.query('rollback to savepoint step');
    await client.query('release savepoint step');
    await client.query('commit');
    expect(await rows('select id, note from items order by id')).toEqual([{ id: 1, note: 'one' }, { id: 4, note: 'four' }]);
  });

  it('leaves a statement with bind parameters as it is: a message of its own', async () => {
    expect((await client.query(`insert into items values ($1, $2) returning note`, [5, 'five'])).rows).toEqual([{ note: 'five' }]);
    expect((await client.query("select current_setting('statement_timeout') = $1 as headed", ['300ms'])).rows).toEqual([{ headed: false }]);
  });
});
