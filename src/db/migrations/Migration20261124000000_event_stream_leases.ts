import { Migration } from '@mikro-orm/migrations';

/**
 * The open event streams of every process and instance on this database (API-CONTRACT.md
 * §10: at most 10 per access token across all of them). Each open stream holds a lease: a row
 * that its process renews, for all of its streams in one statement, while the stream is open,
 * deletes when it closes, and that expires when the process dies without closing it.
 *
 * `take_event_stream_lease` opens one in one statement (no session state: it works through a
 * pooler in transaction mode). It must count the token's live leases after every open of the
 * same token that went before it has committed. A lock taken inside one plain statement is not
 * enough for that: the statement's snapshot is taken when it starts, before it waits for the
 * lock, so an open that committed while it waited would not be counted (11 streams, or more,
 * from parallel opens). Each statement of a VOLATILE function takes a snapshot of its own, so
 * here the count runs after the lock is held and sees every lease committed before it.
 * The lock is a transaction-level advisory lock on the token (released when the statement's
 * implicit transaction ends, never left on a pooled connection), waited for at most 2 s
 * (lock_timeout, set for this transaction only). Its first key, 1937011309, is 'strm' in
 * ASCII, the class of these locks; the two-key form keeps them apart from the single-key
 * locks of idempotency keys.
 *
 * Times are the database's clock, the one every instance shares. Unlogged, like the
 * rate-limit counters: a lease lives for seconds, and after a crash of PostgreSQL the table is
 * empty, the streams' renewals find their leases gone and those streams end (clients
 * reconnect). No foreign key to `users`: checking it would take a key-share lock on the user's
 * row, which writes hold. `expires_at` is in no index, so a renewal can be a HOT update;
 * leases are found by the primary key (a user's leases, then the token's among them) and
 * pruning scans the small table. The primary key starts with `user_id`, the column a
 * distributed schema would shard by.
 */
export class Migration20261124000000_event_stream_leases extends Migration {
  override name = 'Migration20261124000000_event_stream_leases';

  override up(): void {
    this.addSql(`create unlogged table "event_stream_leases" (
      "user_id" integer not null,
      "id" uuid not null,
      "token_hash" text not null,
      "expires_at" timestamptz not null,
      primary key ("user_id", "id")
    );`);
    this.addSql(takeEventStreamLeaseFunction({ lockNote: true }));
  }

  override down(): void {
    this.addSql(`drop function if exists "take_event_stream_lease"(integer, text, uuid, integer, integer);`);
    this.addSql(`drop table if exists "event_stream_leases";`);
  }
}

/**
 * `take_event_stream_lease` as this migration creates it. Migration20261129000000_citus_ready's
 * down() creates it again as it was, but without the comment that follows the lock
 * (`lockNote: false`), which is how that migration has always sent it.
 */
export function takeEventStreamLeaseFunction({ lockNote }: { lockNote: boolean }): string {
  const note = lockNote ? '\n        -- From here each statement sees every lease of the token committed before the lock.' : '';
  return `create function "take_event_stream_lease"(p_user_id integer, p_token_hash text, p_id uuid, p_max integer, p_ttl_ms integer)
      returns boolean language plpgsql volatile as $$
      begin
        perform set_config('lock_timeout', '2s', true);
        perform pg_advisory_xact_lock(1937011309, hashtext(p_token_hash));${note}
        delete from "event_stream_leases"
         where "user_id" = p_user_id and "token_hash" = p_token_hash and "expires_at" <= clock_timestamp();
        if (select count(*) from "event_stream_leases" where "user_id" = p_user_id and "token_hash" = p_token_hash) >= p_max then
          return false;
        end if;
        insert into "event_stream_leases" ("user_id", "id", "token_hash", "expires_at")
          values (p_user_id, p_id, p_token_hash, clock_timestamp() + make_interval(secs => p_ttl_ms / 1000.0));
        return true;
      end
    $$;`;
}
