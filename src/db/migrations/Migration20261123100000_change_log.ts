import { Migration } from '@mikro-orm/migrations';

/**
 * The per-user change log (API-CONTRACT.md §10). Events are numbered per user (`seq`) by
 * the write that appends them, under the owner's row lock (src/core/write.ts), so a user's
 * numbers commit in the order they were taken: a reader that has seen N never later finds
 * an event below N. `users.last_event_seq` is the newest number handed out; `events_pruned_through` the newest
 * number removed by retention (a cursor below it has missed events: 410 cursor_expired).
 */
export class Migration20261123100000_change_log extends Migration {
  override name = 'Migration20261123100000_change_log';

  override up(): void {
    this.addSql(`alter table "users"
      add column "last_event_seq" bigint not null default 0,
      add column "events_pruned_through" bigint not null default 0;`);
    this.addSql(`create table "events" (
      "user_id" integer not null references "users" ("id") on delete cascade,
      "seq" bigint not null,
      "type" text not null,
      "data" jsonb not null,
      "at" timestamptz not null,
      primary key ("user_id", "seq")
    );`);
    this.addSql(`create index "events_at_index" on "events" ("at");`);
  }

  override down(): void {
    this.addSql(`drop table if exists "events";`);
    this.addSql(`alter table "users" drop column if exists "last_event_seq", drop column if exists "events_pruned_through";`);
  }
}
