import { Migration } from '@mikro-orm/migrations';

/**
 * Request counters for rate limiting, one row per client key and minute. Kept in PostgreSQL
 * so that every server process counts against the same limit; unlogged, since counters of a
 * minute are not worth a write-ahead log.
 */
export class Migration20261122010000_rate_limits extends Migration {
  override name = 'Migration20261122010000_rate_limits';

  override up(): void {
    this.addSql(`create unlogged table "rate_limit_hits" (
      "key" text not null,
      "window_start" timestamptz not null,
      "hits" integer not null,
      primary key ("key", "window_start")
    );`);
    this.addSql(`create index "rate_limit_hits_window_start_index" on "rate_limit_hits" ("window_start");`);
  }

  override down(): void {
    this.addSql(`drop table if exists "rate_limit_hits";`);
  }
}
