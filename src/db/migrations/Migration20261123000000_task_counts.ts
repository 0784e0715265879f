import { Migration } from '@mikro-orm/migrations';

/**
 * What the task list needs to count its pages without reading every task of the user.
 *
 * A listed task is one that is not abandoned and not finished before the window of the
 * list (SPEC.md 4.6). The tasks that are neither abandoned nor finished ("open") are counted
 * per user in `task_counts`, in 16 shards by task id that the list sums; the finished ones
 * inside the window are found through their own small index. The counts are kept by
 * statement-level triggers on `tasks`, in the transaction of the statement that changes
 * them, so no code path (entity flush or set-based SQL) can leave them out of step.
 *
 * Locks: a trigger touches count rows only after its statement has locked every task row it
 * changes, and only where a count moves, so a transaction never waits for a task row while
 * it holds a count row. The only statements that move several shards of one user (a project
 * delete abandoning its tasks) run under the owner's lock, so no two of them interleave.
 * Shards keep state changes of different tasks of one user from queueing on one row.
 * Inserting a task creates the count row of its shard (with 0 when it is not open), so every
 * task's shard row exists whenever the task does. TRUNCATE fires none of these triggers: a
 * truncated `tasks` needs `task_counts` truncated with it.
 */
export class Migration20261123000000_task_counts extends Migration {
  override name = 'Migration20261123000000_task_counts';

  override up(): void {
    this.addSql(TASK_COUNTS_TABLE);
    // A count row for every shard that holds a task of the user, open or not: a later change
    // of that task's state only ever updates its row, never inserts one (an insert would take
    // a key-share lock on the user's row, which the owner's lock holds: a deadlock).
    this.addSql(`insert into "task_counts" ("user_id", "shard", "open")
      select "user_id", "id" % 16, count(*) filter (where "state" not in ('abandoned', 'finished'))
        from "tasks" group by "user_id", "id" % 16;`);

    for (const sql of TASK_COUNT_STATEMENT_TRIGGERS) this.addSql(sql);

    // Finished tasks by when they were finished: the list counts those inside its window.
    this.addSql(`create index "tasks_finished_index" on "tasks" ("user_id", "finished_at") where "state" = 'finished';`);
    // The list's index also carries what its filter reads, so that a deep page skips the
    // tasks before it in the index alone (an index-only scan) and reads only its own rows.
    this.addSql(`drop index "tasks_listed_index";`);
    this.addSql(`create index "tasks_listed_index" on "tasks" ("user_id", "order", "id") include ("state", "finished_at") where "state" <> 'abandoned';`);
  }

  override down(): void {
    this.addSql(`drop index "tasks_listed_index";`);
    this.addSql(`create index "tasks_listed_index" on "tasks" ("user_id", "order", "id") where "state" <> 'abandoned';`);
    this.addSql(`drop index if exists "tasks_finished_index";`);
    this.addSql(`drop trigger if exists "tasks_count_delete" on "tasks";`);
    this.addSql(`drop trigger if exists "tasks_count_update" on "tasks";`);
    this.addSql(`drop trigger if exists "tasks_count_insert" on "tasks";`);
    this.addSql(`drop function if exists "task_counts_apply"();`);
    this.addSql(`drop table if exists "task_counts";`);
  }
}

/** The table of the counts, as this migration creates it (Migration20261129000000_citus_ready's down() creates it again). */
export const TASK_COUNTS_TABLE = `create table "task_counts" (
      "user_id" integer not null references "users" ("id") on delete cascade,
      "shard" smallint not null,
      "open" integer not null check ("open" >= 0),
      primary key ("user_id", "shard")
    );`;

/**
 * `task_counts_apply` and its statement triggers on `tasks`, as this migration creates them
 * (Migration20261125000000_task_count_row_triggers' down() creates them again). One function
 * for the three events: the change of each count is the open rows after the statement minus
 * the open rows before it. A task counts in the shard of its id, so state changes of
 * different tasks of one user seldom wait for the same count row.
 */
export const TASK_COUNT_STATEMENT_TRIGGERS: readonly string[] = [
  `create function "task_counts_apply"() returns trigger language plpgsql as $$
      begin
        if tg_op = 'INSERT' then
          insert into "task_counts" as c ("user_id", "shard", "open")
            select "user_id", "id" % 16, count(*) filter (where "state" not in ('abandoned', 'finished'))
              from "new_rows" group by "user_id", "id" % 16
             order by 1, 2
            on conflict ("user_id", "shard") do update set "open" = c."open" + excluded."open";
        elsif tg_op = 'UPDATE' then
          with "delta" as (
            select "user_id", "shard", sum("d")::integer as "d" from (
              select "user_id", "id" % 16 as "shard", 1 as "d" from "new_rows" where "state" not in ('abandoned', 'finished')
              union all
              select "user_id", "id" % 16, -1 from "old_rows" where "state" not in ('abandoned', 'finished')
            ) as "moves" group by "user_id", "shard" having sum("d") <> 0
          )
          update "task_counts" as c set "open" = c."open" + "delta"."d"
            from "delta" where c."user_id" = "delta"."user_id" and c."shard" = "delta"."shard";
        else
          with "delta" as (
            select "user_id", "id" % 16 as "shard", count(*)::integer as "d" from "old_rows"
             where "state" not in ('abandoned', 'finished') group by "user_id", "id" % 16
          )
          update "task_counts" as c set "open" = c."open" - "delta"."d"
            from "delta" where c."user_id" = "delta"."user_id" and c."shard" = "delta"."shard";
        end if;
        return null;
      end
    $$;`,
  `create trigger "tasks_count_insert" after insert on "tasks"
      referencing new table as "new_rows" for each statement execute function "task_counts_apply"();`,
  `create trigger "tasks_count_update" after update on "tasks"
      referencing old table as "old_rows" new table as "new_rows" for each statement execute function "task_counts_apply"();`,
  `create trigger "tasks_count_delete" after delete on "tasks"
      referencing old table as "old_rows" for each statement execute function "task_counts_apply"();`,
];
