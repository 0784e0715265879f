/**
 * The distribution step (`npm run citus:distribute`) and src/db/data-layout.ts agree: on the
 * migrated schema its plan distributes `users` by `id` and every table of user data by
 * `user_id` co-located with `users`, makes exactly the reference tables of NOT_USER_DATA
 * reference tables and leaves the local ones, places every table once, and orders each table
 * after the tables it references. A new table of user data is planned without any list naming
 * it; a table with no place in the layout stops the step.
 *
 * CI has no Citus: what runs a statement on Citus is not run here. The step itself is run as a
 * user runs it, against plain PostgreSQL: it refuses, and `--dry-run` prints the plan.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { MikroORM } from '@mikro-orm/postgresql';
import { openOrm } from '../../src/app/orm.js';
import { DISTRIBUTION_COLUMN, NOT_USER_DATA, USERS } from '../../src/db/data-layout.js';
import { DistributionRefused, NODE_SETTINGS, distributionPlan, type DistributionStep } from '../../src/db/citus-distribute.js';
import { createTestDatabase } from '../helpers/test-app.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

let orm: MikroORM;
let databaseUrl: string;
const em = () => orm.em.fork();
const run = (sql: string, params: unknown[] = []) => em().execute(sql, params, 'run');

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  orm = await openOrm(databaseUrl, { migrate: true, poolSize: 2 });
});
afterAll(async () => {
  await orm?.close(true);
});

/** The tables of a schema, read from the catalogue as the layout reads them (partitions aside). */
async function tablesOf(schema: string): Promise<Array<{ table: string; hasUserId: boolean }>> {
  return em().execute(
    `select c.relname::text as "table",
            exists (select 1 from pg_attribute a where a.attrelid = c.oid and a.attname = ? and not a.attisdropped) as "hasUserId"
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = ? and c.relkind in ('r', 'p') and not c.relispartition`,
    [DISTRIBUTION_COLUMN, schema],
  );
}

/** Each foreign key of a schema as child → parent, a key to its own table aside. */
async function keysOf(schema: string): Promise<Array<{ child: string; parent: string }>> {
  return em().execute(
    `select c.relname::text as "child", p.relname::text as "parent"
       from pg_constraint con join pg_class c on c.oid = con.conrelid join pg_class p on p.oid = con.confrelid
       join pg_namespace n on n.oid = c.relnamespace
      where con.contype = 'f' and n.nspname = ? and con.conrelid <> con.confrelid`,
    [schema],
  );
}

/** The type of `users.id`, so that a scratch table's `user_id` matches it whatever it is. */
async function usersKeyType(): Promise<string> {
  const [row] = await em().execute<Array<{ type: string }>>(
    `select format_type(a.atttypid, a.atttypmod) as "type" from pg_attribute a
      where a.attrelid = 'public.users'::regclass and a.attname = ?`,
    [USERS.column],
  );
  return row!.type;
}

const tablesOfKind = (plan: DistributionStep[], kind: DistributionStep['kind']) =>
  plan.filter((step) => step.kind === kind).map((step) => step.table).sort();

/** That every table comes after the tables it references, and the kinds come in their order. */
function expectParentsFirst(plan: DistributionStep[], keys: Array<{ child: string; parent: string }>) {
  const at = new Map(plan.map((step, i) => [step.table, i]));
  for (const { child, parent } of keys) {
    expect(at.get(parent)!, `${parent} before ${child}`).toBeLessThan(at.get(child)!);
  }
  const rank = (step: DistributionStep) =>
    step.kind === 'reference' ? 0 : step.table === USERS.table ? 1 : step.kind === 'distributed' ? 2 : 3;
  const ranks = plan.map(rank);
  expect(ranks).toEqual([...ranks].sort((a, b) => a - b));
}

/**
 * Runs `npm run citus:distribute`'s entry as a process, with DATABASE_URL on `url`: its
 * source compiled to JavaScript as the run's services are (test/helpers/global-setup.ts), so
 * that each run does not compile its modules again through tsx.
 */
function runStep(url: string, args: string[] = []): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const entry = path.join(path.dirname(inject('serviceEntry')), 'citus-distribute-cli.js');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [entry, ...args], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: url, DATABASE_DIRECT_URL: '', LOG_LEVEL: 'silent' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('the distribution plan of the migrated schema', () => {
  it('distributes users by id and every other table with user_id by user_id, co-located with users', async () => {
    const plan = await distributionPlan(em(), 'public');
    const withUserId = (await tablesOf('public')).filter((t) => t.hasUserId && !NOT_USER_DATA[t.table]).map((t) => t.table);
    expect(withUserId.length).toBeGreaterThan(5);
    expect(tablesOfKind(plan, 'distributed')).toEqual([USERS.table, ...withUserId].sort());

    const users = plan.find((step) => step.table === USERS.table)!;
    expect(users).toMatchObject({ kind: 'distributed', column: 'id', sql: "select create_distributed_table('users', 'id')" });
    expect(users.colocateWith).toBeUndefined();
    for (const table of withUserId) {
      expect(plan.find((step) => step.table === table), table).toMatchObject({
        kind: 'distributed',
        column: 'user_id',
        colocateWith: 'users',
        sql: `select create_distributed_table('${table}', 'user_id', colocate_with => 'users')`,
      });
    }
  });

  it('makes exactly the reference tables of NOT_USER_DATA reference tables, and leaves the local ones as they are', async () => {
    const plan = await distributionPlan(em(), 'public');
    const listed = (kind: 'reference' | 'local') =>
      Object.entries(NOT_USER_DATA).filter(([, entry]) => entry.kind === kind).map(([table]) => table).sort();
    expect(tablesOfKind(plan, 'reference')).toEqual(listed('reference'));
    expect(tablesOfKind(plan, 'local')).toEqual(listed('local'));
    for (const step of plan.filter((s) => s.kind === 'reference')) {
      expect(step.sql).toBe(`select create_reference_table('${step.table}')`);
    }
    for (const step of plan.filter((s) => s.kind === 'local')) expect(step.sql, step.table).toBeNull();
  });

  it('places every table of the schema exactly once', async () => {
    const plan = await distributionPlan(em(), 'public');
    const planned = plan.map((step) => step.table);
    expect(new Set(planned).size).toBe(planned.length);
    expect([...planned].sort()).toEqual((await tablesOf('public')).map((t) => t.table).sort());
  });

  it('lays out reference tables first, then users, then each table of user data after the tables it references', async () => {
    const plan = await distributionPlan(em(), 'public');
    const keys = await keysOf('public');
    expect(keys.some((k) => k.parent !== USERS.table)).toBe(true); // tasks → projects, at least
    expectParentsFirst(plan, keys);
  });

  it('says which tables are unlogged', async () => {
    const plan = await distributionPlan(em(), 'public');
    const [unlogged] = await em().execute<Array<{ tables: string[] }>>(
      `select coalesce(array_agg(c.relname::text order by c.relname), '{}') as "tables"
         from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = 'public' and c.relkind in ('r', 'p') and c.relpersistence = 'u'`,
    );
    expect(plan.filter((step) => step.unlogged).map((step) => step.table).sort()).toEqual(unlogged!.tables);
  });
});

describe('a table added to the schema', () => {
  it('is distributed by user_id, after the tables it references, when it has user_id: no list names it', async () => {
    const type = await usersKeyType();
    // scratch_parts sorts before scratch_things, which it references: the order is the keys', not the names'.
    await run(`
      create table scratch_things (
        user_id ${type} not null references users (id) on delete cascade, id ${type} not null, primary key (user_id, id));
      create table scratch_parts (
        user_id ${type} not null, id ${type} not null, thing_id ${type} not null, primary key (user_id, id),
        foreign key (user_id, thing_id) references scratch_things (user_id, id) on delete cascade)`);
    try {
      const plan = await distributionPlan(em(), 'public');
      for (const table of ['scratch_things', 'scratch_parts']) {
        expect(plan.find((step) => step.table === table), table).toMatchObject({
          kind: 'distributed',
          column: 'user_id',
          colocateWith: 'users',
          sql: `select create_distributed_table('${table}', 'user_id', colocate_with => 'users')`,
        });
      }
      expectParentsFirst(plan, await keysOf('public'));
    } finally {
      await run('drop table scratch_parts, scratch_things');
    }
  });

  it('stops the step, named, when it has no user_id and is not listed', async () => {
    await run('create table "scratch_notes" ("id" integer primary key, "body" text not null)');
    try {
      const refused = await distributionPlan(em(), 'public').then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(DistributionRefused);
      expect((refused as DistributionRefused).violations.map((v) => `${v.table} ${v.rule}`)).toContain('scratch_notes placement');
      expect((refused as DistributionRefused).message).toMatch(/^scratch_notes: placement/m);
    } finally {
      await run('drop table "scratch_notes"');
    }
  });
});

describe('what Citus would refuse although the layout allows it', () => {
  it('refuses foreign keys in a circle, and a reference table pointing to a local one', async () => {
    await run('create schema "probe_plan"');
    try {
      await run(`
        create table probe_plan.users (id bigint primary key);
        create table probe_plan.counters (key text primary key);
        create table probe_plan.names (name text primary key, counter text references probe_plan.counters (key));
        create table probe_plan.a (user_id bigint not null references probe_plan.users (id), id bigint not null, b_id bigint,
          primary key (user_id, id));
        create table probe_plan.b (user_id bigint not null, id bigint not null, a_id bigint, primary key (user_id, id),
          foreign key (user_id, a_id) references probe_plan.a (user_id, id));
      `);
      const listed = {
        names: { kind: 'reference', reason: 'names' },
        counters: { kind: 'reference', reason: 'counters' },
      } as const;
      // As it is: names after counters, then users, then a before b, qualified by the schema.
      const plan = await distributionPlan(em(), 'probe_plan', listed);
      expect(plan.map((step) => step.sql)).toEqual([
        "select create_reference_table('probe_plan.counters')",
        "select create_reference_table('probe_plan.names')",
        "select create_distributed_table('probe_plan.users', 'id')",
        "select create_distributed_table('probe_plan.a', 'user_id', colocate_with => 'probe_plan.users')",
        "select create_distributed_table('probe_plan.b', 'user_id', colocate_with => 'probe_plan.users')",
      ]);

      await run('alter table probe_plan.a add foreign key (user_id, b_id) references probe_plan.b (user_id, id)');
      await expect(distributionPlan(em(), 'probe_plan', listed)).rejects.toThrow(/foreign keys among a, b form a circle/);

      await expect(
        distributionPlan(em(), 'probe_plan', { ...listed, counters: { kind: 'local', reason: 'counters' } }),
      ).rejects.toThrow(/names: foreign key names_counter_fkey points to counters, a local table/);
    } finally {
      await run('drop schema "probe_plan" cascade');
    }
  });
});

describe('npm run citus:distribute', () => {
  it('refuses on PostgreSQL without the citus extension, with exit code 1, and changes nothing', async () => {
    const { code, stdout, stderr } = await runStep(databaseUrl);
    expect(stderr).toMatch(/the citus extension is not installed/);
    expect(stderr).toMatch(/Nothing was changed/);
    expect(stdout).not.toMatch(/create_distributed_table/);
    expect(code).toBe(1);
  });

  it('prints the plan’s statements with --dry-run, and runs none', async () => {
    const { code, stdout, stderr } = await runStep(databaseUrl, ['--dry-run']);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const plan = await distributionPlan(em(), 'public');
    const statements = stdout.split('\n').filter((line) => line !== '' && !line.startsWith('--'));
    // The tables in the plan's order, then the settings of the database on every node (no JIT).
    expect(statements).toEqual([...plan.filter((step) => step.sql !== null).map((step) => `${step.sql};`), ...NODE_SETTINGS.map((sql) => `${sql};`)]);
    expect(NODE_SETTINGS.join(' ')).toMatch(/set jit = off/);
    for (const step of plan.filter((s) => s.kind === 'local')) expect(stdout).toContain(`-- ${step.table}`);
    expect(stdout).toMatch(/citus extension is not installed here/);
  });

  it('refuses, naming each violation, when the schema breaks the layout', async () => {
    await run('create table "scratch_orphans" ("id" integer primary key)');
    try {
      const { code, stdout, stderr } = await runStep(databaseUrl, ['--dry-run']);
      expect(stderr).toMatch(/cannot be laid out as src\/db\/data-layout\.ts says/);
      expect(stderr).toMatch(/scratch_orphans: placement/);
      expect(stdout).not.toMatch(/create_/);
      expect(code).toBe(1);
    } finally {
      await run('drop table "scratch_orphans"');
    }
  });
});
