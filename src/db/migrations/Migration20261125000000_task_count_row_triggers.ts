import { Migration } from '@mikro-orm/migrations';
import { TASK_COUNT_STATEMENT_TRIGGERS } from './Migration20261123000000_task_counts.js';

/**
 * `task_counts` kept by row triggers that fire only where a count moves, instead of the
 * statement triggers with transition tables of Migration20261123000000_task_counts.
 *
 * Why: almost every statement of the service changes one task, or changes many without
 * moving a count (a reorder shifts orders, a project's start or pause moves tasks between
 * open states). A statement trigger fires for each of them, even for an UPDATE that changed
 * no row (a refused state change), stores every changed row in its transition tables and
 * runs two queries over them: 45–80 µs of PostgreSQL per write, a fifth of a task state
 * change. A row trigger's WHEN clause is checked in the executor, without calling the
 * function: a row whose openness does not change costs nothing, and one that does costs one
 * indexed UPDATE of its shard's row. Only a project's deletion moves many counts in one
 * statement (it abandons the project's open tasks), and pays for it: about 16 µs per open task
 * abandoned (the UPDATE of a project's 100 open tasks: 2.8 ms of backend CPU, against 1.2 ms
 * with the statement triggers). It is rare next to the writes above, and it already writes an
 * event per task.
 *
 * What stays as it was (see that migration): a task counts in the shard of its id; an
 * AFTER ROW trigger runs at the end of its statement, once the statement has locked every
 * task row it changes, so a transaction never waits for a task row while it holds a count
 * row; a count row is touched only where its count moves, except that inserting a task makes
 * sure its shard's row exists (created with 0 when the task is not open: a later change of
 * that task then only updates it). TRUNCATE still fires nothing. The counts themselves are
 * unchanged by this migration: both ways count the same rows.
 *
 * A change of a task's `user_id` or `id` (plain SQL only; the service never makes one) moves
 * it between count rows, and makes sure the new one exists.
 */
export class Migration20261125000000_task_count_row_triggers extends Migration {
  override name = 'Migration20261125000000_task_count_row_triggers';

  override up(): void {
    this.addSql(`drop trigger "tasks_count_insert" on "tasks";`);
    this.addSql(`drop trigger "tasks_count_update" on "tasks";`);
    this.addSql(`drop trigger "tasks_count_delete" on "tasks";`);
    this.addSql(`drop function "task_counts_apply"();`);

    for (const sql of TASK_COUNT_ROW_TRIGGERS) this.addSql(sql);
  }

  override down(): void {
    this.addSql(`drop trigger "tasks_count_delete" on "tasks";`);
    this.addSql(`drop trigger "tasks_count_update" on "tasks";`);
    this.addSql(`drop trigger "tasks_count_insert" on "tasks";`);
    this.addSql(`drop function "task_counts_row"();`);
    this.addSql(`drop function "task_counts_add"(integer, integer, integer);`);
    // The statement triggers of Migration20261123000000_task_counts, as they were.
    for (const sql of TASK_COUNT_STATEMENT_TRIGGERS) this.addSql(sql);
  }
}

/** A task that is neither abandoned nor finished (`t`: a row or a table's name). */
export const OPEN = (t: string) => `${t}."state" not in ('abandoned', 'finished')`;

/**
 * `task_counts_add`, `task_counts_row` and the row triggers on `tasks` that call it, as this
 * migration creates them (Migration20261129000000_citus_ready's down() creates them again).
 */
export const TASK_COUNT_ROW_TRIGGERS: readonly string[] = [
  // Adds `d` (-1, 0 or 1) to a shard's count, creating the row when it is missing. The UPDATE
  // comes first: the row is there for every write but a user's first task in a shard. With
  // nothing to add and the row there, nothing is written (and nothing locked).
  `create function "task_counts_add"("owner" integer, "task" integer, "d" integer) returns void language plpgsql as $$
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
    $$;`,
  // The usual cases in line (a state change of a task that stays where it is, an open task
  // inserted, deleted or moved out of the open set): one statement each.
  `create function "task_counts_row"() returns trigger language plpgsql as $$
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
    $$;`,
  `create trigger "tasks_count_insert" after insert on "tasks"
      for each row execute function "task_counts_row"();`,
  `create trigger "tasks_count_update" after update on "tasks" for each row
      when ((${OPEN('old')}) <> (${OPEN('new')}) or old."user_id" <> new."user_id" or old."id" <> new."id")
      execute function "task_counts_row"();`,
  `create trigger "tasks_count_delete" after delete on "tasks" for each row
      when (${OPEN('old')}) execute function "task_counts_row"();`,
];
