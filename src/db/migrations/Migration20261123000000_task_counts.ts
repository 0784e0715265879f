import { Migration } from '@mikro-orm/migrations';

/**
 * What the task list needs to count its pages without reading every task of the user.
 *
 * A listed task is one that is not abandoned and not finished before the window of the
 * list (API-CONTRACT / SPEC 4.6); the tasks that are neither abandoned nor finished ("open")
 * are counted per user in `task_counts`, and the finished ones inside the window are found
 * through their own small index. The counts are kept by statement-level triggers on
 * `tasks`, in the transaction of the statement that changes them, so no code path (entity
 * flush or set-based SQL) can leave them out of step. Each trigger touches the count row
 * only after its statement has locked every task row it changes and only when the count
 * moves, so the row lock it takes never sits between two task locks: no deadlock with the
 * owner's lock or a task's row lock.
 */
export class Migration20261123000000_task_counts extends Migration {
  override name = 'Migration20261123000000_task_counts';

  override up(): void {
    this.addSql(`create table "task_counts" (
      "user_id" integer primary key references "users" ("id") on delete cascade,
      "open" integer not null check ("open" >= 0)
    );`);
    this.addSql(`insert into "task_counts" ("user_id", "open")
      select "user_id", count(*) from "tasks" where "state" not in ('abandoned', 'finished') group by "user_id";`);

    // One function for the three events: the change of each user's open count is the open
    // rows after the statement minus the open rows before it.
    this.addSql(`create function "task_counts_apply"() returns trigger language plpgsql as $$
      begin
        if tg_op = 'INSERT' then
          insert into "task_counts" as c ("user_id", "open")
            select "user_id", count(*) from "new_rows" where "state" not in ('abandoned', 'finished') group by "user_id"
            on conflict ("user_id") do update set "open" = c."open" + excluded."open";
        elsif tg_op = 'UPDATE' then
          with "delta" as (
            select "user_id", sum("d")::integer as "d" from (
              select "user_id", 1 as "d" from "new_rows" where "state" not in ('abandoned', 'finished')
              union all
              select "user_id", -1 from "old_rows" where "state" not in ('abandoned', 'finished')
            ) as "moves" group by "user_id" having sum("d") <> 0
          )
          update "task_counts" as c set "open" = c."open" + "delta"."d" from "delta" where c."user_id" = "delta"."user_id";
        else
          with "delta" as (
            select "user_id", count(*)::integer as "d" from "old_rows"
              where "state" not in ('abandoned', 'finished') group by "user_id"
          )
          update "task_counts" as c set "open" = c."open" - "delta"."d" from "delta" where c."user_id" = "delta"."user_id";
        end if;
        return null;
      end
    $$;`);
    this.addSql(`create trigger "tasks_count_insert" after insert on "tasks"
      referencing new table as "new_rows" for each statement execute function "task_counts_apply"();`);
    this.addSql(`create trigger "tasks_count_update" after update on "tasks"
      referencing old table as "old_rows" new table as "new_rows" for each statement execute function "task_counts_apply"();`);
    this.addSql(`create trigger "tasks_count_delete" after delete on "tasks"
      referencing old table as "old_rows" for each statement execute function "task_counts_apply"();`);

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
