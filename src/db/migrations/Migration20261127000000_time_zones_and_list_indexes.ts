import { Migration } from '@mikro-orm/migrations';

/**
 * A time zone per user (API-CONTRACT.md §13) and the indexes of the filtered task list (§12).
 *
 * `users.time_zone`: an IANA name as Node's ICU writes it (src/core/user-day.ts decides
 * which names are zones; PostgreSQL never interprets it). Every existing user gets `UTC`,
 * the default the contract gives. A constant default: adding the column rewrites no row.
 *
 * Indexes, each chosen from the plans of the filtered lists (EXPLAIN (ANALYZE, BUFFERS) on a
 * user with 100,000 tasks among others; bench/README.md "Filtered lists" has the plans and
 * the figures). Each leads with `user_id`, the column a sharded layout splits by, is partial on
 * listed tasks (`state <> 'abandoned'`), as the list is, and carries the 14-day window's
 * columns (state, finished_at), so that a count is read from the index alone. Each one costs
 * every write of a task: an update that changes an indexed column (a state, an order: nearly
 * all of them) writes a new entry into every index of the table, so a reorder of 10,000 tasks
 * writes 10,000 entries more per index. So an index is here only where a filter or a sort
 * would otherwise read all the user's tasks:
 * - `project_id=X`: the existing `tasks_project_id_index` (user_id, project_id, "order")
 *   reads the project's tasks in order, and counts them.
 * - `project_id=none`: (user_id, "order", id) of loose tasks: read in order, counted.
 * - `planned_on`, `planned_after`, `planned_before` and `sort=plannedAt`: (user_id,
 *   plannedAt as presented, id), unset ones included as 0: a range scan of that window, and
 *   the list in plannedAt order.
 * - `state`: (user_id, state): one state's tasks are found and counted without the others (a
 *   user's finished tasks are most of them, and most are out of the list's window; finished
 *   ones are read by the existing (user_id, finished_at) index of finished tasks).
 * - Not indexed, and what they cost instead (bench/README.md, at 100,000 tasks): `sort` by
 *   `label`, `startedAt` or `finishedAt`, a top-N sort of the listed rows; `q`, a substring
 *   of the label in any case, which no B-tree can find (a trigram index would need the
 *   pg_trgm extension, which a deployment's role may not be allowed to create).
 */
export class Migration20261127000000_time_zones_and_list_indexes extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "users" add column "time_zone" text not null default 'UTC';`);
    this.addSql(
      `create index "tasks_loose_index" on "tasks" ("user_id", "order", "id") include ("state", "finished_at") where "project_id" is null and "state" <> 'abandoned';`,
    );
    this.addSql(
      `create index "tasks_planned_at_index" on "tasks" ("user_id", (coalesce("planned_at", 'epoch'::timestamptz)), "id") include ("state", "finished_at") where "state" <> 'abandoned';`,
    );
    this.addSql(`create index "tasks_state_index" on "tasks" ("user_id", "state") include ("finished_at") where "state" <> 'abandoned';`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index if exists "tasks_state_index";`);
    this.addSql(`drop index if exists "tasks_planned_at_index";`);
    this.addSql(`drop index if exists "tasks_loose_index";`);
    this.addSql(`alter table "users" drop column "time_zone";`);
  }
}
