import { Migration } from '@mikro-orm/migrations';

/**
 * Versions of projects and tasks, and idempotency records (API-CONTRACT.md §11).
 *
 * `version` starts at 1 and grows by one with every change of its row. Entity flushes bump
 * it themselves (MikroORM's optimistic-lock property: `set version = version + 1 ... returning
 * version`, so the new value comes back in the same statement); every other UPDATE (the
 * set-based statements of src/tasks/task.store.ts: reorders, a project's effect on its tasks)
 * leaves it alone and the row trigger bumps it, so no code path can change a row without
 * changing its version.
 *
 * `idempotency_keys` keeps the outcome of a keyed write for 24 hours, per user and key. The row
 * is written by the transaction of the write itself, so a crash leaves either both the effect
 * and its record or neither. Unlogged would lose records on a crash while the effects survive:
 * it is a plain, logged table.
 */
export class Migration20261123200000_versions_and_idempotency extends Migration {
  override name = 'Migration20261123200000_versions_and_idempotency';

  override up(): void {
    this.addSql(`alter table "projects" add column "version" integer not null default 1;`);
    this.addSql(`alter table "tasks" add column "version" integer not null default 1;`);
    for (const sql of VERSION_TRIGGERS) this.addSql(sql);

    this.addSql(`create table "idempotency_keys" (
      "user_id" integer not null references "users" ("id") on delete cascade,
      "key" text not null,
      "fingerprint" text not null,
      "status" smallint not null,
      "body" json,
      "etag" text,
      "created_at" timestamptz not null,
      primary key ("user_id", "key")
    );`);
    this.addSql(`create index "idempotency_keys_created_at_index" on "idempotency_keys" ("created_at");`);
  }

  override down(): void {
    this.addSql(`drop table if exists "idempotency_keys";`);
    this.addSql(`drop trigger if exists "tasks_bump_version" on "tasks";`);
    this.addSql(`drop trigger if exists "projects_bump_version" on "projects";`);
    this.addSql(`drop function if exists "bump_version"();`);
    this.addSql(`alter table "tasks" drop column if exists "version";`);
    this.addSql(`alter table "projects" drop column if exists "version";`);
  }
}

/**
 * `bump_version` and the row triggers on `projects` and `tasks` that call it, as this migration
 * creates them (Migration20261129000000_citus_ready's down() creates them again).
 */
export const VERSION_TRIGGERS: readonly string[] = [
  `create function "bump_version"() returns trigger language plpgsql as $$
      begin
        new."version" := old."version" + 1;
        return new;
      end
    $$;`,
  // Only rows that change, and only when the statement did not move the version itself.
  `create trigger "projects_bump_version" before update on "projects" for each row
      when (new."version" = old."version" and new is distinct from old) execute function "bump_version"();`,
  `create trigger "tasks_bump_version" before update on "tasks" for each row
      when (new."version" = old."version" and new is distinct from old) execute function "bump_version"();`,
];
