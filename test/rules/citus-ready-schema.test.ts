/**
 * The schema can be split by user (src/db/data-layout.ts): on the migrated database, every
 * table of user data has `user_id` (`users`: `id`) in its primary key and in each unique
 * constraint, foreign keys between user tables pair those columns, and every other table is
 * listed as a reference or local table with why. Read from PostgreSQL's catalogue, so a
 * migration that breaks it fails here, without a sharded database to try it on.
 *
 * The checker is shown to fail too: on a scratch schema with one table breaking each rule,
 * it names each of them (and only them).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MikroORM } from '@mikro-orm/postgresql';
import { openOrm } from '../../src/app/orm.js';
import { NOT_USER_DATA, checkDataLayout, type LayoutViolation } from '../../src/db/data-layout.js';
import { createTestDatabase } from '../helpers/test-app.js';

let orm: MikroORM;
const em = () => orm.em.fork();
const run = (sql: string, params: unknown[] = []) => em().execute(sql, params, 'run');
const named = (violations: LayoutViolation[]) => violations.map((v) => `${v.table} ${v.rule} ${v.object}`).sort();

beforeAll(async () => {
  orm = await openOrm(await createTestDatabase(), { migrate: true, poolSize: 2 });
});
afterAll(async () => {
  await orm?.close(true);
});

describe('the schema keeps each user’s rows together', () => {
  it('breaks no rule once migrated', async () => {
    expect(await checkDataLayout(em(), 'public')).toEqual([]);
  });

  it('lists every table that is not user data as reference or local, with why', () => {
    for (const [table, { kind, reason }] of Object.entries(NOT_USER_DATA)) {
      expect(['reference', 'local'], table).toContain(kind);
      expect(reason.length, table).toBeGreaterThan(20);
    }
  });

  it('names a table added to the service’s schema that has no place in the layout', async () => {
    await run('create table "scratch_notes" ("id" integer primary key, "body" text not null)');
    try {
      expect(named(await checkDataLayout(em(), 'public'))).toEqual(['scratch_notes placement scratch_notes']);
    } finally {
      await run('drop table "scratch_notes"');
    }
  });

  it('names every table, constraint and index that breaks a rule, and nothing else', async () => {
    await run('create schema "probe"');
    try {
      await run(`
        create table probe.users (id integer primary key, username text not null);
        -- Right: keyed by user, unique per user, foreign keys pairing user_id.
        create table probe.lists (
          user_id integer not null references probe.users (id) on delete cascade, id integer not null, name text not null,
          primary key (user_id, id), unique (user_id, name));
        create table probe.items (
          user_id integer not null references probe.users (id), id integer not null, list_id integer,
          primary key (user_id, id), foreign key (user_id, list_id) references probe.lists (user_id, id));
        -- Right: partitioned by time within the user; its partition is judged as its parent.
        create table probe.history (user_id integer not null, at date not null, primary key (user_id, at)) partition by range (at);
        create table probe.history_2026 partition of probe.history for values from ('2026-01-01') to ('2027-01-01');
        -- Listed as reference and local tables; user data may point to a reference table.
        create table probe.directory (name text primary key, user_id integer not null references probe.users (id));
        create table probe.counters (key text primary key, hits integer not null);
        create table probe.profiles (
          user_id integer not null, id integer not null, name text references probe.directory (name), primary key (user_id, id));

        -- Wrong, one rule each:
        create table probe.notes (user_id integer not null, id integer primary key);
        create table probe.logs (user_id integer not null, line text);
        create table probe.tags (
          user_id integer not null, id integer not null, name text not null,
          primary key (user_id, id), constraint tags_name_unique unique (name));
        create unique index tags_by_expression on probe.tags (lower(name));
        create unique index tags_by_user_and_expression on probe.tags (user_id, lower(name)); -- right
        create table probe.bookings (
          user_id integer not null, id integer not null, during tstzrange not null,
          primary key (user_id, id), constraint bookings_no_overlap exclude using gist (during with &&));
        create table probe.shares (
          user_id integer not null references probe.users (id), id integer not null,
          shared_with integer not null references probe.users (id), primary key (user_id, id));
        create table probe.cards (
          user_id integer not null, id integer not null, list_id integer, primary key (user_id, id),
          constraint cards_list_fkey foreign key (user_id, list_id) references probe.lists (user_id, id) on delete set null (list_id));
        create table probe.wide (user_id bigint not null, id integer not null, primary key (user_id, id));
        create table probe.settings (key text primary key, value text);
        create table probe.hits (
          user_id integer not null, id integer not null, counter text references probe.counters (key), primary key (user_id, id));
      `);
      const found = await checkDataLayout(em(), 'probe', {
        directory: { kind: 'reference', reason: 'names of all users' },
        counters: { kind: 'local', reason: 'traffic counters' },
        ghost: { kind: 'local', reason: 'listed, never created' },
      });
      expect(named(found)).toEqual([
        'bookings unique bookings_no_overlap', // an exclusion constraint without user_id
        'cards foreign-key-action cards_list_fkey', // on delete set null, on a key with user_id
        'directory foreign-key directory_user_id_fkey', // a reference table pointing into user data
        'ghost placement ghost', // listed, but no such table
        'hits foreign-key hits_counter_fkey', // user data pointing to a local table
        'logs primary-key logs', // no primary key
        'notes primary-key notes_pkey', // a primary key without user_id
        'settings placement settings', // no user_id, not listed
        'shares foreign-key shares_shared_with_fkey', // a key between user tables without user_id
        'tags unique tags_by_expression', // a unique index on an expression
        'tags unique tags_name_unique', // a unique constraint without user_id
        'wide distribution-type wide', // user_id bigint beside users.id integer
      ]);
      expect(found.find((v) => v.object === 'notes_pkey')?.detail).toBe('primary key (id) does not include user_id');
    } finally {
      await run('drop schema "probe" cascade');
    }
  });
});

describe('the keys between a user’s rows', () => {
  async function userWithProject(name: string) {
    const [user] = await em().execute<Array<{ id: number }>>(
      `with u as (insert into users (username, password_hash, created_at) values (?, 'x', now()) returning id),
            n as (insert into usernames (username, user_id) select ?, id from u)
       select id from u`,
      [name, name],
    );
    const [project] = await em().execute<Array<{ id: number }>>(
      `insert into projects (user_id, name, slug, created_at) values (?, 'Garden', 'garden', now()) returning id`,
      [user!.id],
    );
    return { userId: user!.id, projectId: project!.id };
  }
  const insertTask = (userId: number, projectId: number | null, order: number) =>
    run(`insert into tasks (user_id, project_id, label, "order", state, created_at) values (?, ?, 'Dig', ?, 'newed', now())`, [
      userId, projectId, order,
    ]);

  it('let a task name only a project of its own user', async () => {
    const alice = await userWithProject('key_alice');
    const bob = await userWithProject('key_bob');
    await insertTask(alice.userId, alice.projectId, 1);
    await expect(insertTask(alice.userId, bob.projectId, 2)).rejects.toThrow(/tasks_user_id_project_id_fkey/);
  });

  it('keep a project with tasks until they are detached (as the service does), and go with their user', async () => {
    const carol = await userWithProject('key_carol');
    await insertTask(carol.userId, carol.projectId, 1);
    const remove = () => run('delete from projects where user_id = ? and id = ?', [carol.userId, carol.projectId]);
    await expect(remove()).rejects.toThrow(/tasks_user_id_project_id_fkey/);
    await run('update tasks set project_id = null where user_id = ? and project_id = ?', [carol.userId, carol.projectId]);
    await remove();

    const dave = await userWithProject('key_dave');
    await insertTask(dave.userId, dave.projectId, 1);
    await run('delete from users where id = ?', [dave.userId]);
    expect(await em().execute('select 1 from tasks where user_id = ? union all select 1 from projects where user_id = ?', [
      dave.userId, dave.userId,
    ])).toEqual([]);
  });
});
