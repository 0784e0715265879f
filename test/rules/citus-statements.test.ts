/**
 * Every statement the service sends, as Citus would route it, checked without Citus (CI cannot
 * install it): the committed snapshots of what each write sends (test/procedures/write-sql/)
 * and of the reads, streams, webhook delivery, housekeeping and batches
 * (test/procedures/read-sql/) are parsed with PostgreSQL's own grammar and held to the rules
 * of test/helpers/citus-statements.ts: plain columns in RETURNING, no clock or random call in
 * an UPDATE or DELETE of a user table, `pg_notify` only in a statement that reads no table, and
 * the user named as a parameter wherever a user table is read. The user tables are read from
 * the migrated schema's catalogue, so a new table of user data is held to them at once.
 *
 * A statement that breaks the last rule on purpose (it prunes every user's rows, or serves
 * every user) is listed with why in test/helpers/citus-fan-outs.ts; an entry that no longer
 * matches fails, so the list cannot rot. Each rule is shown to fail on a statement that
 * breaks it.
 *
 * A failure names the snapshot, the statement's place in it (from 1), the rule, and the text
 * of the statement from the fault on (values numbered `$1`, `$2`, … as parsed).
 */
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MikroORM } from '@mikro-orm/postgresql';
import { openOrm } from '../../src/app/orm.js';
import { NOT_USER_DATA } from '../../src/db/data-layout.js';
import { FAN_OUTS, type FanOut } from '../helpers/citus-fan-outs.js';
import { checkStatement, loadParser, readCatalogue, type Catalogue, type CitusRule } from '../helpers/citus-statements.js';
import { createTestDatabase } from '../helpers/test-app.js';

const PROCEDURES = path.resolve(import.meta.dirname, '../procedures');
const SNAPSHOT_DIRS = ['write-sql', 'read-sql'] as const;

interface Statement {
  /** `write-sql/tasks.update` */
  snapshot: string;
  /** Its place in the snapshot, from 1. */
  index: number;
  sql: string;
}

/** A snapshot's statements: after its `-- name` line, one per paragraph (formatted one clause a line). */
function statementsOf(snapshot: string): Statement[] {
  const text = readFileSync(path.join(PROCEDURES, `${snapshot}.sql`), 'utf8');
  return text
    .split(/\n\s*\n/)
    .map((part) => part.trim())
    .filter((part) => part !== '' && !/^--[^\n]*$/.test(part))
    .map((sql, i) => ({ snapshot, index: i + 1, sql }));
}

const SNAPSHOTS = SNAPSHOT_DIRS.flatMap((dir) =>
  readdirSync(path.join(PROCEDURES, dir))
    .filter((file) => file.endsWith('.sql'))
    .sort()
    .map((file) => `${dir}/${file.slice(0, -'.sql'.length)}`),
);

let orm: MikroORM;
let catalogue: Catalogue;

beforeAll(async () => {
  await loadParser();
  orm = await openOrm(await createTestDatabase(), { migrate: true, poolSize: 2 });
  catalogue = await readCatalogue(orm);
});
afterAll(async () => {
  await orm?.close(true);
});

const withoutSpace = (text: string) => text.replace(/\s+/g, '');

/** An allow-list entry matches a statement of its snapshot whose text contains its fragment, white space aside. */
const matches = (entry: FanOut, statement: Statement) =>
  entry.snapshot === statement.snapshot && withoutSpace(statement.sql).includes(withoutSpace(entry.fragment));

/** What a statement breaks, each as one line; the `user-param` faults of a listed fan-out left out. */
function faultsOf(statement: Statement, fanOuts: readonly FanOut[] = FAN_OUTS): string[] {
  const listed = fanOuts.some((entry) => matches(entry, statement));
  return checkStatement(statement.sql, catalogue)
    .filter((v) => !(listed && v.rule === 'user-param'))
    .map((v) => `${statement.snapshot}.sql #${statement.index} [${v.rule}] ${v.detail} — ${v.fragment.replace(/\s+/g, ' ')}`);
}

/** The allow-list entries that match no statement breaking the `user-param` rule. */
function staleEntries(fanOuts: readonly FanOut[], statements: readonly Statement[]): FanOut[] {
  return fanOuts.filter(
    (entry) => !statements.some((s) => matches(entry, s) && checkStatement(s.sql, catalogue).some((v) => v.rule === 'user-param')),
  );
}

describe('every statement a request sends can be routed by Citus to one shard', () => {
  it('has the snapshots of writes and of reads, streams and housekeeping to check', () => {
    for (const dir of SNAPSHOT_DIRS) expect(SNAPSHOTS.filter((s) => s.startsWith(`${dir}/`)).length, dir).toBeGreaterThan(10);
  });

  it('reads the user tables and the volatile functions from the migrated schema', async () => {
    expect([...catalogue.userTables]).toEqual(expect.arrayContaining(['users', 'tasks', 'projects', 'events', 'access_tokens', 'webhooks']));
    for (const table of Object.keys(NOT_USER_DATA)) expect(catalogue.userTables.has(table), table).toBe(false);
    // A function added by a migration is held to the rules at once.
    await orm.em.fork().execute('create function scratch_touch() returns integer language sql volatile as $$ select 1 $$');
    try {
      expect((await readCatalogue(orm)).volatileFunctions.has('scratch_touch')).toBe(true);
    } finally {
      await orm.em.fork().execute('drop function scratch_touch()');
    }
  });

  it('finds every + and - with an integer on the right immutable, as a column ± an integer in RETURNING takes it', async () => {
    const mutable = await orm.em.fork().execute<Array<{ operator: string }>>(
      `select format('%s %s %s', o.oprleft::regtype, o.oprname, o.oprright::regtype) as operator
         from pg_operator o join pg_proc p on p.oid = o.oprcode
        where o.oprname in ('+', '-') and p.provolatile <> 'i'
          and (o.oprright in ('int2'::regtype, 'int4'::regtype, 'int8'::regtype)
               or o.oprright in (select c.casttarget from pg_cast c where c.castsource = 'int4'::regtype and c.castcontext = 'i'))`,
    );
    expect(mutable.map((r) => r.operator)).toEqual([]);
  });

  it.each(SNAPSHOTS)('%s: each statement keeps the rules, or is a listed fan-out', (snapshot) => {
    expect(statementsOf(snapshot).flatMap((s) => faultsOf(s))).toEqual([]);
  });

  it('lists each fan-out with why, and each entry still matches a statement that fans out', () => {
    for (const entry of FAN_OUTS) {
      expect(SNAPSHOTS, entry.snapshot).toContain(entry.snapshot);
      expect(entry.why.length, entry.snapshot).toBeGreaterThan(40);
    }
    const stale = staleEntries(FAN_OUTS, SNAPSHOTS.flatMap(statementsOf));
    expect(stale.map((e) => `${e.snapshot}: "${e.fragment}"`)).toEqual([]);
  });
});

/** Statements that each break one rule, and only it. */
const BREAKING: ReadonlyArray<{ rule: CitusRule; name: string; sql: string }> = [
  { rule: 'parse', name: 'a statement PostgreSQL cannot parse', sql: 'selec id from tasks where user_id = ?' },
  {
    rule: 'returning', name: 'a function call in RETURNING',
    sql: 'update tasks set label = ? where user_id = ? and id = ? returning id, extract(epoch from started_at)::float8 as started',
  },
  { rule: 'returning', name: 'a cast of a column in RETURNING', sql: 'update tasks set label = ? where user_id = ? and id = ? returning started_at::text' },
  { rule: 'returning', name: 'a column minus a parameter in RETURNING', sql: 'update tasks set label = ? where user_id = ? and id = ? returning started_at - ?' },
  {
    rule: 'returning', name: 'an expression in the RETURNING of a CTE',
    sql: 'with mark as (update users set last_event_seq = last_event_seq + ? where id = ? returning last_event_seq - ? as base) select base from mark',
  },
  {
    rule: 'volatile', name: 'clock_timestamp() in an UPDATE',
    sql: "update event_stream_leases set expires_at = clock_timestamp() + make_interval(secs => ?) where user_id = ? and id = ?",
  },
  { rule: 'volatile', name: 'now() spelled current_timestamp in a DELETE', sql: 'delete from access_tokens where user_id = ? and expires_at < current_timestamp' },
  {
    rule: 'volatile', name: 'random() in a subquery of an UPDATE',
    sql: 'update tasks set label = (select ? || random()::text) where user_id = ? and id = ?',
  },
  {
    rule: 'volatile', name: 'the clock read in a CTE the UPDATE reads',
    sql: 'with t as (select clock_timestamp() as now) update tasks set started_at = t.now from t where tasks.user_id = ? and tasks.id = ?',
  },
  {
    rule: 'notify', name: 'pg_notify in a CTE of a statement that reads a table',
    sql: "with stored as (select e.seq from events e where e.user_id = ? and e.seq > ?) select pg_notify('user_events', ? || ':' || max(seq)) from stored",
  },
  {
    rule: 'notify', name: 'pg_notify over a subquery that reads a table',
    sql: "select pg_notify('user_events', (select ? || ':' || u.last_event_seq from users u where u.id = ?))",
  },
  { rule: 'user-param', name: 'a user table read without its user', sql: 'select t.id from tasks t where t.id = ?' },
  {
    rule: 'user-param', name: 'a join on user_id to a table that names the user',
    sql: 'select u.id from access_tokens t join users u on u.id = t.user_id where t.user_id = ? and t.token_hash = ?',
  },
  {
    rule: 'user-param', name: 'a subquery whose user comes from the outer query',
    sql: 'select p.id, (select count(*) from tasks t where t.user_id = p.user_id) from projects p where p.user_id = ?',
  },
  {
    rule: 'user-param', name: 'an UPDATE whose user comes from a CTE',
    sql: 'with owner as (select ?::int as id) update tasks set label = ? where tasks.user_id = (select id from owner) and tasks.id = ?',
  },
  { rule: 'user-param', name: 'several users at once', sql: 'delete from event_stream_leases where user_id = any(?::integer[]) and id = any(?::uuid[])' },
  { rule: 'user-param', name: 'the user in a disjunct', sql: 'select t.id from tasks t where t.user_id = ? or t.id = ?' },
  {
    rule: 'user-param', name: 'an INSERT whose user_id is read from a CTE',
    sql: 'with owner as (select ?::int as id) insert into tasks (user_id, label) select owner.id, ? from owner',
  },
  { rule: 'user-param', name: 'an INSERT whose user_id is a constant', sql: "insert into events (user_id, seq, type, data, at) values (1, ?, ?, ?, ?)" },
];

/** Statements that keep every rule (the first is planned on a Citus coordinator as one task on one shard). */
const KEEPING = [
  'with owner as (select id, last_event_seq from users where id = ? for no key update), ' +
    'prior as (select t.* from tasks t where t.user_id = ? and t.id = ?), ' +
    'changed as (update tasks set label = ?, version = tasks.version + 1 from prior where tasks.user_id = ? and tasks.id = prior.id returning tasks.*), ' +
    'mark as (update users set last_event_seq = last_event_seq + 1 where id = ? returning last_event_seq) ' +
    'select changed.id, changed.version, (select last_event_seq from mark) as seq from owner left join changed on true',
  "select pg_notify('user_events', ?)",
  "update event_stream_leases set expires_at = ?::timestamptz where user_id = ? and id = ?::uuid returning id",
  'update users set next_task_order = next_task_order + 1 where id = ? returning next_task_order - 1',
  'insert into events (user_id, seq, type, data, at) values (?, ?, ?, ?::json, ?) returning seq, type, data, at',
  "with room as (select u.last_event_seq from users u where u.id = ?) insert into webhooks (user_id, url, cursor) select ?::int, ?, room.last_event_seq from room returning *",
  'select e.seq, e.type from events e where ? = e.user_id and e.seq > ? order by e.seq limit ?',
  "select u.id, u.username from access_tokens t join users u on u.id = ? where t.user_id = ? and t.token_hash = ? and t.expires_at > ?",
  "select 'a ? in a literal', \"a ? in a name\" from users where id = ?",
  'begin',
];

describe('each rule names a statement that breaks it', () => {
  it.each(BREAKING)('$rule: $name', ({ rule, sql }) => {
    const named = checkStatement(sql, catalogue).map((v) => v.rule);
    expect(named.length).toBeGreaterThan(0);
    expect(named.filter((r) => r !== rule)).toEqual([]);
  });

  it('names a volatile function of the schema in an UPDATE', () => {
    const withFunction: Catalogue = { ...catalogue, volatileFunctions: new Set([...catalogue.volatileFunctions, 'scratch_touch']) };
    const sql = 'update tasks set planned_count = scratch_touch() where user_id = ? and id = ?';
    expect(checkStatement(sql, catalogue)).toEqual([]);
    expect(checkStatement(sql, withFunction).map((v) => v.rule)).toEqual(['volatile']);
  });

  it('names nothing in statements that keep every rule', () => {
    expect(KEEPING.flatMap((sql) => checkStatement(sql, catalogue).map((v) => `${v.rule}: ${v.detail} — ${sql}`))).toEqual([]);
  });

  it('tells which statement, which rule and where', () => {
    const statement = { snapshot: 'write-sql/example', index: 3, sql: 'select t.id from tasks t where t.id = ?' };
    expect(faultsOf(statement, [])).toEqual(['write-sql/example.sql #3 [user-param] tasks (as t) without t.user_id = $n at its level — select t.id from tasks t where t.id = $1']);
    // Listed as a fan-out, it is excused for that rule alone.
    const entry = { snapshot: 'write-sql/example', fragment: 'from tasks t', why: 'an example' };
    expect(faultsOf(statement, [entry])).toEqual([]);
    expect(faultsOf({ ...statement, sql: 'select t.id, now()::text from tasks t where t.id = ? returning' }, [entry])).toEqual([
      expect.stringContaining('[parse]'),
    ]);
  });

  it('names an allow-list entry that matches no statement that fans out', () => {
    const statements = [
      { snapshot: 'read-sql/example', index: 1, sql: 'delete from access_tokens where expires_at < ?' },
      { snapshot: 'read-sql/example', index: 2, sql: 'delete from access_tokens where user_id = ? and expires_at < ?' },
    ];
    const entries = [
      { snapshot: 'read-sql/example', fragment: 'from access_tokens where expires_at', why: 'prunes every user' },
      { snapshot: 'read-sql/example', fragment: 'where user_id = ? and expires_at', why: 'routes: listed by mistake' },
      { snapshot: 'read-sql/other', fragment: 'from access_tokens where expires_at', why: 'another snapshot' },
    ];
    expect(staleEntries(entries, statements).map((e) => e.why)).toEqual(['routes: listed by mistake', 'another snapshot']);
  });
});
