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
      -- json, not jsonb: the document keeps its members in the order the endpoints send them.
      "data" json not null,
      "at" timestamptz not null,
      primary key ("user_id", "seq")
    );`);
    this.addSql(`create index "events_at_index" on "events" ("at");`);
    // Short-lived, single-use tickets that open one event stream from a browser's EventSource,
    // which cannot send an Authorization header: the long-lived token never goes in a URL.
    this.addSql(`create table "event_stream_tickets" (
      "ticket_hash" text primary key,
      "user_id" integer not null references "users" ("id") on delete cascade,
      "token_hash" text not null,
      "expires_at" timestamptz not null
    );`);
  }

  override down(): void {
    this.addSql(`drop table if exists "event_stream_tickets";`);
    this.addSql(`drop table if exists "events";`);
    this.addSql(`alter table "users" drop column if exists "last_event_seq", drop column if exists "events_pruned_through";`);
  }
}
