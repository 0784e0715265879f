import { Migration } from '@mikro-orm/migrations';

/**
 * Counters on the user's row, moved by the write that changes them under the user's lock
 * (docs/design/writes.md): `next_task_order`, the order the user's next task takes (SPEC.md
 * 4.5: one more than the highest), so a creation reads one row instead of the user's highest
 * order. Orders are 1..n with no gap (a task is never deleted, a reorder permutes), so the
 * highest is also `next_task_order - 1`. No trigger: Citus refuses them on distributed tables.
 */
export class Migration20261130100000_user_counters extends Migration {
  override name = 'Migration20261130100000_user_counters';

  override up(): void {
    this.addSql(`alter table "users" add column "next_task_order" bigint not null default 1;`);
    this.addSql(`update "users" u set "next_task_order" = t.next
                   from (select "user_id", max("order") + 1 as next from "tasks" group by "user_id") t
                  where t."user_id" = u."id";`);
  }

  override down(): void {
    this.addSql(`alter table "users" drop column "next_task_order";`);
  }
}
