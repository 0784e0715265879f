import { Migration } from '@mikro-orm/migrations';

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
    this.addSql(`create function "take_event_stream_lease"(p_user_id integer, p_token_hash text, p_id uuid, p_max integer, p_ttl_ms integer)
      returns boolean language plpgsql volatile as $$
      begin
        perform set_config('lock_timeout', '2s', true);
        perform pg_advisory_xact_lock(1937011309, hashtext(p_token_hash));
        delete from "event_stream_leases"
         where "user_id" = p_user_id and "token_hash" = p_token_hash and "expires_at" <= clock_timestamp();
        if (select count(*) from "event_stream_leases" where "user_id" = p_user_id and "token_hash" = p_token_hash) >= p_max then
          return false;
        end if;
        insert into "event_stream_leases" ("user_id", "id", "token_hash", "expires_at")
          values (p_user_id, p_id, p_token_hash, clock_timestamp() + make_interval(secs => p_ttl_ms / 1000.0));
        return true;
      end
    $$;`);
    this.addSql(`create function "listed_task_ids"(owner integer, project integer) returns integer[] language plpgsql volatile as $$
      begin
        return array(select t.id from tasks t where t.user_id = owner and t.project_id = project and t.state <> 'abandoned' order by t."order", t.id);
      end
    $$;`);
    this.addSql(`create function "next_task_order"(owner integer) returns integer language plpgsql volatile as $$
      begin
        return (select coalesce(max("order"), 0) + 1 from tasks where user_id = owner);
      end
    $$;`);

    this.addSql(`drop index "tasks_open_by_user";`);
    this.addSql(`create table "task_counts" (
      "user_id" integer not null references "users" ("id") on delete cascade,
      "shard" smallint not null,
      "open" integer not null check ("open" >= 0),
      primary key ("user_id", "shard")
    );`);
    this.addSql(`insert into "task_counts" ("user_id", "shard", "open")
      select "user_id", "id" % 16, count(*) filter (where ${OPEN('tasks')})
        from "tasks" group by "user_id", "id" % 16;`);
    this.addSql(`create function "task_counts_add"("owner" integer, "task" integer, "d" integer) returns void language plpgsql as $$
      begin
        if "d" = 0 then
          perform 1 from "task_counts" where "user_id" = "owner" and "shard" = "task" % 16;
          if not found then
            insert into "task_counts" ("user_id", "shard", "open") values ("owner", "task" % 16, 0) on conflict do nothing;
          end if;
          return;
        end if;
        update "task_counts" set "open" = "open" + "d" where "user_id" = "owner" and "shard" = "task" % 16;
        if not found then
          insert into "task_counts" as c ("user_id", "shard", "open") values ("owner", "task" % 16, "d")
            on conflict ("user_id", "shard") do update set "open" = c."open" + excluded."open";
        end if;
      end
    $$;`);
    this.addSql(`create function "task_counts_row"() returns trigger language plpgsql as $$
      begin
        if tg_op = 'UPDATE' and old."user_id" = new."user_id" and old."id" = new."id" then
          if (${OPEN('old')}) <> (${OPEN('new')}) then
            update "task_counts" set "open" = "open" + case when ${OPEN('new')} then 1 else -1 end
             where "user_id" = new."user_id" and "shard" = new."id" % 16;
          end if;
          return null;
        end if;
        if tg_op = 'INSERT' then
          if ${OPEN('new')} then
            update "task_counts" set "open" = "open" + 1 where "user_id" = new."user_id" and "shard" = new."id" % 16;
            if found then return null; end if;
          end if;
        elsif ${OPEN('old')} then
          update "task_counts" set "open" = "open" - 1 where "user_id" = old."user_id" and "shard" = old."id" % 16;
        end if;
        if tg_op <> 'DELETE' then
          perform "task_counts_add"(new."user_id", new."id", case when ${OPEN('new')} then 1 else 0 end);
        end if;
        return null;
      end
    $$;`);
    this.addSql(`create trigger "tasks_count_insert" after insert on "tasks"
      for each row execute function "task_counts_row"();`);
    this.addSql(`create trigger "tasks_count_update" after update on "tasks" for each row
      when ((${OPEN('old')}) <> (${OPEN('new')}) or old."user_id" <> new."user_id" or old."id" <> new."id")
      execute function "task_counts_row"();`);
    this.addSql(`create trigger "tasks_count_delete" after delete on "tasks" for each row
      when (${OPEN('old')}) execute function "task_counts_row"();`);

    this.addSql(`create function "bump_version"() returns trigger language plpgsql as $$
      begin
        new."version" := old."version" + 1;
        return new;
      end
    $$;`);
    this.addSql(`create trigger "projects_bump_version" before update on "projects" for each row
      when (new."version" = old."version" and new is distinct from old) execute function "bump_version"();`);
    this.addSql(`create trigger "tasks_bump_version" before update on "tasks" for each row
      when (new."version" = old."version" and new is distinct from old) execute function "bump_version"();`);
  }
}

/** A task that is neither abandoned nor finished (`t`: a row or a table's name). */
const OPEN = (t: string) => `${t}."state" not in ('abandoned', 'finished')`;

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
