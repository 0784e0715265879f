import { Migration } from '@mikro-orm/migrations';

/**
 * The user's open tasks (not finished, not abandoned) as a counter on the user's row, moved by
 * the write that opens or closes a task, under the user's lock (docs/design/writes.md;
 * `openSql` in src/tasks/task.lifecycle.ts): the task list counts its page from one row
 * instead of walking an index of every open task, which grew with the user (8 ms at 60,000
 * open tasks). Counted here once from the rows; the partial index that counted them goes.
 */
export class Migration20261203000000_open_tasks extends Migration {
  override name = 'Migration20261203000000_open_tasks';

  override up(): void {
    this.addSql(`alter table "users" add column "open_tasks" bigint not null default 0;`);
    this.addSql(`update "users" u set "open_tasks" = t.open
                   from (select "user_id", count(*) as open from "tasks" where "state" not in ('finished', 'abandoned') group by "user_id") t
                  where t."user_id" = u."id";`);
    this.addSql(`drop index if exists "tasks_open_by_user";`);
  }

  override down(): void {
    this.addSql(`create index "tasks_open_by_user" on "tasks" ("user_id") where "state" not in ('abandoned', 'finished');`);
    this.addSql(`alter table "users" drop column "open_tasks";`);
  }
}
