/**
 * src/db/batching.ts on a real PostgreSQL: a transaction's `begin` travels with the next
 * statement, in one message, and its failure is that statement's failure; nothing is lost,
 * reordered or left open.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { batchPool, batchStatements, roundTrips } from '../../src/db/batching.js';
import { createTestDatabase, directUrlOf } from '../helpers/test-app.js';

let client: pg.Client;
/** Reads and sets up rows, and reads the server's state, past the pooler (the pooled tier): what it sees is PostgreSQL's. */
let observer: pg.Client;
let url: string;

beforeAll(async () => {
  url = await createTestDatabase();
  client = new pg.Client({ connectionString: url });
  observer = new pg.Client({ connectionString: directUrlOf(url) });
  await Promise.all([client.connect(), observer.connect()]);
  batchStatements(client);
  await client.query('create table items (id int primary key, note text)');
});

afterAll(async () => {
  await Promise.all([client?.end(), observer?.end()]);
});

/** The messages sent while `run` runs. */
async function trips(run: () => Promise<unknown>): Promise<number> {
  const before = roundTrips.count;
  await run();
  return roundTrips.count - before;
}

const rows = async (sql: string) => (await observer.query(sql)).rows;

// Each test starts from an empty table and puts in what it needs, so they run in any order.
beforeEach(async () => {
  await observer.query('truncate items');
});
const insertRowOne = () => observer.query(`insert into items values (1, 'one')`);

describe('statements sent together', () => {
  it('begin and the first statement are one message, in the transaction; commit is a second', async () => {
    let inserted: pg.QueryResult | undefined;
    const first = await trips(async () => {
      expect((await client.query('begin')).rows).toEqual([]);
      inserted = await client.query(`insert into items values (1, 'one') returning id, note`);
    });
    expect(first).toBe(1);
    expect(inserted!.rows).toEqual([{ id: 1, note: 'one' }]);
    // Not committed yet: another session sees nothing.
    expect(await rows('select id from items')).toEqual([]);
    expect(await trips(() => client.query('commit'))).toBe(1);
    expect(await rows('select id, note from items')).toEqual([{ id: 1, note: 'one' }]);
  });

  it('a failing first statement fails with its own error; the rollback leaves nothing', async () => {
    await insertRowOne();
    await client.query('begin');
    await expect(client.query(`insert into items values (1, 'duplicate key')`)).rejects.toMatchObject({ code: '23505' });
    await client.query('rollback');
    expect(await rows(`select note from items where id = 1`)).toEqual([{ note: 'one' }]);
    // The connection is usable again, outside any transaction.
    expect((await client.query(`select 1 as ok, current_setting('transaction_isolation') as isolation`)).rows).toEqual([{ ok: 1, isolation: 'read committed' }]);
  });

  it('a rollback before anything of the transaction was sent sends nothing', async () => {
    const n = await trips(async () => {
      await client.query('begin');
      await client.query('rollback');
    });
    expect(n).toBe(0);
    // The next statement is a transaction of its own: none was left open on the server.
    expect((await client.query('select now() = statement_timestamp() as fresh')).rows).toEqual([{ fresh: true }]);
  });

  it('a statement with bind parameters sends what waits first, then itself, in the transaction', async () => {
    const n = await trips(async () => {
      await client.query('begin');
      expect((await client.query(`insert into items values ($1, $2) returning note`, [5, 'five'])).rows).toEqual([{ note: 'five' }]);
    });
    expect(n).toBe(2);
    expect(await rows('select id from items where id = 5')).toEqual([]);
    await client.query('commit');
    expect(await rows('select note from items where id = 5')).toEqual([{ note: 'five' }]);
  });

  it('a statement of several statements gets all its own results, none of those sent with it', async () => {
    await client.query('begin');
    const result = (await client.query('select 1 as a; select 2 as b')) as unknown as pg.QueryResult[];
    await client.query('commit');
    expect(result.map((r) => r.rows)).toEqual([[{ a: 1 }], [{ b: 2 }]]);
  });

  it('a connection given back with statements still waiting has them dropped, not sent ahead of the next borrower', async () => {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    const left: number[] = [];
    batchPool(pool, (n) => left.push(n));
    try {
      const first = await pool.connect();
      const pid = (await first.query('select pg_backend_pid() as pid')).rows[0].pid as number;
      await first.query('begin');
      first.release();
      expect(left).toEqual([1]);
      const second = await pool.connect();
      expect((await second.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
      second.release();
      // The borrower's statement ran on its own: no transaction left open.
      const [activity] = (await observer.query('select state from pg_stat_activity where pid = $1', [pid])).rows;
      expect(activity?.state).toBe('idle');
    } finally {
      await pool.end();
    }
  });

  it('with a prelude, a transaction opened with an isolation level gets the prelude after its opening, not before it', async () => {
    const own = new pg.Client({ connectionString: url });
    await own.connect();
    try {
      batchStatements(own, { transactionPrelude: "select set_config('statement_timeout', '1234', true)" });
      // Before the opening, the prelude's select would make it "SET TRANSACTION ISOLATION
      // LEVEL must be called before any query" (25001): the account's export through PgBouncer.
      const trips2 = await trips(async () => {
        await own.query('start transaction isolation level repeatable read read only');
        const settings = await own.query(`select current_setting('transaction_isolation') as isolation, current_setting('transaction_read_only') as ro, current_setting('statement_timeout') as timeout`);
        expect(settings.rows).toEqual([{ isolation: 'repeatable read', ro: 'on', timeout: '1234ms' }]);
      });
      expect(trips2).toBe(1);
      await own.query('rollback');
      // A rollback before anything of it was sent sends nothing, as after `begin`.
      expect(await trips(async () => {
        await own.query('start transaction isolation level serializable');
        await own.query('rollback');
      })).toBe(0);
      expect((await own.query(`select current_setting('transaction_isolation') as isolation`)).rows).toEqual([{ isolation: 'read committed' }]);
    } finally {
      await own.end();
    }
  });

  it('with a prelude, the rollback after a failed first statement waits for the status that failure left (its error may come first)', async () => {
    // Between the client and PostgreSQL, a relay that sends each ReadyForQuery (the message
    // saying the connection's status) in a packet of its own, 50 ms after what came before it:
    // pg fails the statement on its ErrorResponse, and the caller's rollback is made before
    // the status arrives, as happens now and then under load.
    const target = new URL(url);
    const relay = net.createServer((inbound) => {
      const outbound = net.connect(Number(target.port), target.hostname);
      inbound.pipe(outbound);
      let pending = Buffer.alloc(0);
      let chain = Promise.resolve();
      outbound.on('data', (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk]);
        while (pending.length >= 5 && pending.length >= 1 + pending.readUInt32BE(1)) {
          const size = 1 + pending.readUInt32BE(1);
          const message = pending.subarray(0, size);
          pending = pending.subarray(size);
          const late = message[0] === 0x5a; // 'Z'
          chain = chain.then(async () => {
            if (late) await new Promise((resolve) => setTimeout(resolve, 50));
            inbound.write(message);
          });
        }
      });
      const end = () => {
        inbound.destroy();
        outbound.destroy();
      };
      inbound.on('close', end).on('error', end);
      outbound.on('close', end).on('error', end);
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    const relayed = new URL(url);
    relayed.host = `127.0.0.1:${(relay.address() as AddressInfo).port}`;
    const slow = new pg.Client({ connectionString: relayed.toString() });
    await slow.connect();
    try {
      batchStatements(slow, { transactionPrelude: "select set_config('statement_timeout', '100', true)" });
      await slow.query('begin');
      await expect(slow.query('select pg_sleep(2)')).rejects.toMatchObject({ code: '57014' });
      // Sent with the prelude (as if outside a transaction), it failed with 25P02: the
      // transaction is aborted. It must go alone and end the transaction.
      await slow.query('rollback');
      expect((await slow.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
      await slow.query('begin');
      await slow.query(`insert into items values (7, 'seven')`);
      await slow.query('commit');
      expect(await rows('select id from items where id = 7')).toEqual([{ id: 7 }]);
    } finally {
      await slow.end();
      await new Promise((resolve) => relay.close(resolve));
    }
  });
});
