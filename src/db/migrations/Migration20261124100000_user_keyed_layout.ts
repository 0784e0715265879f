import { Migration } from '@mikro-orm/migrations';

/**
 * A layout that a sharded PostgreSQL (Citus) can split by user without a rewrite: every table
 * of user data is keyed by its user. `users` is distributed by `id`; every other table of user
 * data by `user_id`, which is in its primary key and in each of its unique constraints, and
 * its foreign keys to other user tables carry `user_id` on both sides, so that a user's rows
 * of every table live on one node. The tables that are not user data are listed, with why,
 * in src/db/data-layout.ts, and test/rules/citus-ready-schema.test.ts reads the catalogue and
 * fails on a table that breaks this.
 *
 * Table by table:
 * - `usernames` (new): the directory of usernames, `username` → `user_id`. A name is unique
 *   across all users, so that uniqueness cannot live in a table split by user: it moves here,
 *   out of `users` (whose `username` stays, the user's own copy, read with its row and never
 *   changed). Filled from `users`. No foreign key to `users`: on Citus it is a reference
 *   table (a copy on every node), and a reference table cannot point into a distributed one;
 *   registration writes both rows in one transaction, and users are never deleted by the
 *   service (a deleted user's name would stay taken).
 * - `projects`: primary key (user_id, id), which also replaces the (user_id, id) index.
 *   (user_id, slug) stays unique.
 * - `tasks`: primary key (user_id, id). (user_id, "order") stays unique (deferrable). The
 *   link to a project is (user_id, project_id) → projects (user_id, id), so a task can only
 *   name a project of its own user, with no action on delete: Citus refuses ON DELETE SET
 *   NULL on a key that holds the distribution column, and the service already detaches a
 *   project's tasks in the statement before it deletes the project
 *   (src/projects/delete-project.ts), under the owner's lock. A user deleted with its
 *   projects and tasks still goes (the check runs at the end of the statement, after every
 *   cascade). The index behind that key and the project's task list is (user_id,
 *   project_id, "order").
 * - `access_tokens`: primary key (token_hash, user_id), replacing the primary key on `id` and
 *   the unique token_hash. Tokens stay opaque (API-CONTRACT.md §3), so a request's token is
 *   found by its hash alone: the key leads with the hash, and that lookup stays one indexed
 *   statement (on Citus it asks every shard; a token that names its user would route it).
 *   `id` stays, a plain column numbering tokens in the order they were issued.
 * - `event_stream_tickets`: primary key (ticket_hash, user_id), for the same reason.
 * - `events` (user_id, seq), `idempotency_keys` (user_id, key), `task_counts` (user_id,
 *   shard): already so.
 * - `rate_limit_hits` (local): counters of client keys, not user data; unchanged.
 *
 * The entities map these keys as they are: a project or a task is (id, user_id) to the ORM,
 * an access token (token_hash, user_id), so the ORM's updates and deletes name the user; so
 * does every statement of the service on a user's rows (each finds them through the new
 * keys, and on Citus goes to one node), except the lookups that start from something else:
 * a token's or ticket's hash, a login's username (through `usernames`), and the housekeeping
 * that prunes all users' old rows. Ids still come from their sequences, so an id alone is
 * still one row.
 *
 * The keys are rebuilt under the migration's exclusive locks; at today's size that is
 * moments.
 */
export class Migration20261124100000_user_keyed_layout extends Migration {
  override name = 'Migration20261124100000_user_keyed_layout';

  override up(): void {
    this.addSql(`create table "usernames" (
      "username" text primary key,
      "user_id" integer not null
    );`);
    this.addSql(`insert into "usernames" ("username", "user_id") select "username", "id" from "users";`);
    this.addSql(`alter table "users" drop constraint "users_username_unique";`);

    this.addSql(`alter table "tasks" drop constraint "tasks_project_id_fkey";`);
    this.addSql(`alter table "projects" drop constraint "projects_pkey", add constraint "projects_pkey" primary key ("user_id", "id");`);
    this.addSql(`drop index "projects_user_id_id_index";`);
    this.addSql(`alter table "tasks" drop constraint "tasks_pkey", add constraint "tasks_pkey" primary key ("user_id", "id");`);
    this.addSql(`drop index "tasks_project_id_index";`);
    this.addSql(
      `create index "tasks_project_id_index" on "tasks" ("user_id", "project_id", "order") where "project_id" is not null;`,
    );
    this.addSql(`alter table "tasks" add constraint "tasks_user_id_project_id_fkey"
      foreign key ("user_id", "project_id") references "projects" ("user_id", "id");`);

    this.addSql(`alter table "access_tokens" drop constraint "access_tokens_pkey", drop constraint "access_tokens_token_hash_unique",
      add constraint "access_tokens_pkey" primary key ("token_hash", "user_id");`);
    this.addSql(`alter table "event_stream_tickets" drop constraint "event_stream_tickets_pkey",
      add constraint "event_stream_tickets_pkey" primary key ("ticket_hash", "user_id");`);
  }

  override down(): void {
    this.addSql(`alter table "event_stream_tickets" drop constraint "event_stream_tickets_pkey",
      add constraint "event_stream_tickets_pkey" primary key ("ticket_hash");`);
    this.addSql(`alter table "access_tokens" drop constraint "access_tokens_pkey",
      add constraint "access_tokens_pkey" primary key ("id"),
      add constraint "access_tokens_token_hash_unique" unique ("token_hash");`);

    this.addSql(`alter table "tasks" drop constraint "tasks_user_id_project_id_fkey";`);
    this.addSql(`drop index "tasks_project_id_index";`);
    this.addSql(`create index "tasks_project_id_index" on "tasks" ("project_id", "order") where "project_id" is not null;`);
    this.addSql(`alter table "tasks" drop constraint "tasks_pkey", add constraint "tasks_pkey" primary key ("id");`);
    this.addSql(`alter table "projects" drop constraint "projects_pkey", add constraint "projects_pkey" primary key ("id");`);
    this.addSql(`create index "projects_user_id_id_index" on "projects" ("user_id", "id");`);
    this.addSql(`alter table "tasks" add constraint "tasks_project_id_fkey"
      foreign key ("project_id") references "projects" ("id") on delete set null;`);

    this.addSql(`alter table "users" add constraint "users_username_unique" unique ("username");`);
    this.addSql(`drop table if exists "usernames";`);
  }
}
