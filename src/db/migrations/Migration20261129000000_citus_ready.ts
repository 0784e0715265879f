import { Migration } from '@mikro-orm/migrations';
import { TASK_COUNTS_TABLE } from './Migration20261123000000_task_counts.js';
import { VERSION_TRIGGERS } from './Migration20261123200000_versions_and_idempotency.js';
import { NEXT_TASK_ORDER_FUNCTION } from './Migration20261123300000_next_task_order.js';
import { takeEventStreamLeaseFunction } from './Migration20261124000000_event_stream_leases.js';
import { OPEN, TASK_COUNT_ROW_TRIGGERS } from './Migration20261125000000_task_count_row_triggers.js';
import { LISTED_TASK_IDS_FUNCTION } from './Migration20261127100000_listed_task_ids.js';

/**
 * A schema Citus can distribute as src/db/data-layout.ts says, and route each statement of a
 * request to one node: no triggers on user tables, no function that reads a user table, no
 * volatile call inside a modification, and ids wide enough for any node to hand out.
 *
 * - Versions (Migration20261123200000_versions_and_idempotency): Citus refuses to distribute a
 *   table with triggers. The row trigger that moved `version` on any UPDATE that did not goes;
 *   every UPDATE of projects and tasks now moves it itself, exactly when the row changes: the
 *   entities' optimistic-lock property, the set-based statements, and the one-statement edits
 *   (src/db/row-version.ts), which keep a row that an edit leaves as it was at its version.
 * - `task_counts` and its row triggers (Migration20261125000000_task_count_row_triggers): the
 *   task list counts a user's open tasks (neither abandoned nor finished) itself, through the
 *   partial index `tasks_open_by_user`: an index-only scan of the user's open tasks, on the
 *   node that holds them, with nothing to keep in step on any write.
 * - `next_task_order` and `listed_task_ids`: a function that queries a table runs where it is
 *   called (the coordinator), not on the node a routed statement goes to; their callers read
 *   the tables in the statement itself.
 * - `take_event_stream_lease`: reads the clock once, after the token's lock, into a variable
 *   that its DELETE and INSERT compare and write (Citus refuses a volatile call in a
 *   modification of a distributed table), and takes the user's id as bigint.
 * - bigint ids: each id and each column that refers to one. Citus requires an identity column
 *   of a distributed table to be bigint, so that each node can hand out ids of its own range;
 *   an id column and its references stay of one type (co-location, joins without a cast).
 *   Changing an identity column's type changes its sequence with it. Counts, versions, orders
 *   and attempts stay integer. The tables are rewritten under the migration's exclusive locks:
 *   at today's size, moments. The service reads int8 as a JS number (src/db/orm-config.ts).
 */
export class Migration20261129000000_citus_ready extends Migration {
  override name = 'Migration20261129000000_citus_ready';

  override up(): void {
    this.addSql(`drop trigger "projects_bump_version" on "projects";`);
    this.addSql(`drop trigger "tasks_bump_version" on "tasks";`);
    this.addSql(`drop function "bump_version"();`);

    this.addSql(`drop trigger "tasks_count_insert" on "tasks";`);
    this.addSql(`drop trigger "tasks_count_update" on "tasks";`);
    this.addSql(`drop trigger "tasks_count_delete" on "tasks";`);
    this.addSql(`drop function "task_counts_row"();`);
    this.addSql(`drop function "task_counts_add"(integer, integer, integer);`);
    this.addSql(`drop table "task_counts";`);
    this.addSql(`create index "tasks_open_by_user" on "tasks" ("user_id") where "state" not in ('abandoned', 'finished');`);

    this.addSql(`drop function "next_task_order"(integer);`);
    this.addSql(`drop function "listed_task_ids"(integer, integer);`);
    this.addSql(`drop function "take_event_stream_lease"(integer, text, uuid, integer, integer);`);

    for (const [table, columns] of ID_COLUMNS) {
      this.addSql(`alter table "${table}" ${columns.map((c) => `alter column "${c}" type bigint`).join(', ')};`);
    }

    this.addSql(`create function "take_event_stream_lease"(p_user_id bigint, p_token_hash text, p_id uuid, p_max integer, p_ttl_ms integer)
      returns boolean language plpgsql volatile as $$
      declare
        v_now timestamptz;
        v_until timestamptz;
      begin
        perform set_config('lock_timeout', '2s', true);
        perform pg_advisory_xact_lock(1937011309, hashtext(p_token_hash));
        -- From here each statement sees every lease of the token committed before the lock; the
        -- clock is read once, after it, so the modifications below carry values, not calls.
        v_now := clock_timestamp();
        v_until := v_now + make_interval(secs => p_ttl_ms / 1000.0);
        delete from "event_stream_leases"
         where "user_id" = p_user_id and "token_hash" = p_token_hash and "expires_at" <= v_now;
        if (select count(*) from "event_stream_leases" where "user_id" = p_user_id and "token_hash" = p_token_hash) >= p_max then
          return false;
        end if;
        insert into "event_stream_leases" ("user_id", "id", "token_hash", "expires_at")
          values (p_user_id, p_id, p_token_hash, v_until);
        return true;
      end
    $$;`);
  }

  override down(): void {
    this.addSql(`drop function "take_event_stream_lease"(bigint, text, uuid, integer, integer);`);
    for (const [table, columns] of [...ID_COLUMNS].reverse()) {
      this.addSql(`alter table "${table}" ${columns.map((c) => `alter column "${c}" type integer`).join(', ')};`);
    }
    // The functions and triggers as the migrations before this one left them.
    this.addSql(takeEventStreamLeaseFunction({ lockNote: false }));
    this.addSql(LISTED_TASK_IDS_FUNCTION);
    this.addSql(NEXT_TASK_ORDER_FUNCTION);

    this.addSql(`drop index "tasks_open_by_user";`);
    this.addSql(TASK_COUNTS_TABLE);
    this.addSql(`insert into "task_counts" ("user_id", "shard", "open")
      select "user_id", "id" % 16, count(*) filter (where ${OPEN('tasks')})
        from "tasks" group by "user_id", "id" % 16;`);
    for (const sql of TASK_COUNT_ROW_TRIGGERS) this.addSql(sql);

    for (const sql of VERSION_TRIGGERS) this.addSql(sql);
  }
}

/**
 * Every id column and every column that refers to one, by table; referenced tables first. (`webhook_deliveries.id`
 * and the change log's numbers were bigint from the start.)
 */
const ID_COLUMNS: ReadonlyArray<readonly [string, readonly string[]]> = [
  ['users', ['id']],
  ['usernames', ['user_id']],
  ['access_tokens', ['id', 'user_id']],
  ['projects', ['id', 'user_id']],
  ['tasks', ['id', 'user_id', 'project_id']],
  ['events', ['user_id']],
  ['event_stream_tickets', ['user_id']],
  ['event_stream_leases', ['user_id']],
  ['idempotency_keys', ['user_id']],
  ['webhooks', ['id', 'user_id']],
  ['webhook_deliveries', ['user_id', 'webhook_id']],
];
