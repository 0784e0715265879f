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
 * the figures). Each leads with `user_id`, the column a sharded layout splits by, and none
 * holds "order": a reorder rewrites the order of up to every task of its user, and each index
 * on "order" is one more index entry per moved row (there are three already: the unique
 * order, the listed tasks', the project's tasks').
 * - `project_id=X`: the existing `tasks_project_id_index` (user_id, project_id, "order")
 *   reads the project's tasks in order, and counts them.
 * - `project_id=none`: (user_id, id) where project_id is null, of listed tasks: the loose
 *   tasks are found and counted without walking the tasks of projects; their page is sorted.
 * - `planned_on`, `planned_after`, `planned_before`: (user_id, planned_at, id) where
 *   planned_at is not null, of listed tasks: a range scan of that window (a day's plans are
 *   few), sorted after. It also serves `sort=plannedAt`.
 * - `state`: (user_id, state) of listed tasks: one state's tasks are found and counted without
 *   the others (a user's finished tasks are most of them, and most are out of the list's
 *   14-day window).
 * - The other sorts (`label`, `startedAt`, `finishedAt`, `id`) are a top-N sort of the rows
 *   the filters leave: an index per sort would be kept by every write of every task for a page
 *   few clients ask for (bench/README.md gives their cost at 100,000).
 * - `q` (a substring of the label, case-insensitive) cannot use a B-tree; it is applied to
 *   the rows the other filters leave (all listed tasks at worst).
 */
export class Migration20261127000000_time_zones_and_list_indexes extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "users" add column "time_zone" text not null default 'UTC';`);
    this.addSql(`create index "tasks_loose_index" on "tasks" ("user_id", "id") where "project_id" is null and "state" <> 'abandoned';`);
    this.addSql(`create index "tasks_planned_at_index" on "tasks" ("user_id", "planned_at", "id") where "planned_at" is not null and "state" <> 'abandoned';`);
    this.addSql(`create index "tasks_state_index" on "tasks" ("user_id", "state") where "state" <> 'abandoned';`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index if exists "tasks_state_index";`);
    this.addSql(`drop index if exists "tasks_planned_at_index";`);
    this.addSql(`drop index if exists "tasks_loose_index";`);
    this.addSql(`alter table "users" drop column "time_zone";`);
  }
}
