import { Migration } from '@mikro-orm/migrations';

/**
 * `next_task_order(user_id)`: the order a new task of the user takes (SPEC.md 4.5: the end of
 * the user's order), the one place that says it. Every creation reads it after the owner's
 * lock is held. It is a PL/pgSQL function, volatile, so its query takes a snapshot of its own
 * when it runs: called in a statement that took the owner's lock earlier (a task creation made
 * in one statement, src/writes/user-write.ts), it sees every task committed before the lock
 * was granted, where a subquery would read the statement's snapshot, taken before the wait.
 */
export class Migration20261123300000_next_task_order extends Migration {
  override name = 'Migration20261123300000_next_task_order';

  override up(): void {
    this.addSql(NEXT_TASK_ORDER_FUNCTION);
  }

  override down(): void {
    this.addSql(`drop function if exists "next_task_order"(integer);`);
  }
}

/** `next_task_order` as this migration creates it (Migration20261129000000_citus_ready's down() creates it again). */
export const NEXT_TASK_ORDER_FUNCTION = `create function "next_task_order"(owner integer) returns integer language plpgsql volatile as $$
      begin
        return (select coalesce(max("order"), 0) + 1 from tasks where user_id = owner);
      end
    $$;`;
