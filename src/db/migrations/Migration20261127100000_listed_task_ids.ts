import { Migration } from '@mikro-orm/migrations';

/**
 * `listed_task_ids(owner, project)`: the ids of a project's listed tasks (not abandoned), by
 * order then id: the `tasks` of its document (src/tasks/task.sql.ts `listedTaskIdsOf`, the
 * same rule). Volatile, like `next_task_order`, so its query takes a snapshot of its own when
 * it runs: a write made in one statement (a task created in a project, whose event carries
 * the project's document) calls it after the owner's lock is granted, and sees every task
 * committed before that, where a subquery would read the statement's snapshot, taken before
 * the wait. Whether it sees a row the calling statement itself inserts is not something to
 * rely on: the caller removes the new task's id and appends it (src/tasks/task.store.ts
 * `LISTED_WITH_NEW_TASK`), which is right either way.
 */
export class Migration20261127100000_listed_task_ids extends Migration {
  override name = 'Migration20261127100000_listed_task_ids';

  override up(): void {
    this.addSql(LISTED_TASK_IDS_FUNCTION);
  }

  override down(): void {
    this.addSql(`drop function if exists "listed_task_ids"(integer, integer);`);
  }
}

/** `listed_task_ids` as this migration creates it (Migration20261129000000_citus_ready's down() creates it again). */
export const LISTED_TASK_IDS_FUNCTION = `create function "listed_task_ids"(owner integer, project integer) returns integer[] language plpgsql volatile as $$
      begin
        return array(select t.id from tasks t where t.user_id = owner and t.project_id = project and t.state <> 'abandoned' order by t."order", t.id);
      end
    $$;`;
