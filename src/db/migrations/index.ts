/**
 * Every migration, in order. Listed explicitly so the compiled service, the tests and the
 * MikroORM CLI run the same set without globbing the file system. A new migration file
 * (`npx mikro-orm migration:create`) must be added here.
 */
import { Migration20261122000000_initial } from './Migration20261122000000_initial.js';
import { Migration20261122010000_rate_limits } from './Migration20261122010000_rate_limits.js';
import { Migration20261123000000_task_counts } from './Migration20261123000000_task_counts.js';
import { Migration20261123100000_change_log } from './Migration20261123100000_change_log.js';
import { Migration20261123200000_versions_and_idempotency } from './Migration20261123200000_versions_and_idempotency.js';
import { Migration20261123300000_next_task_order } from './Migration20261123300000_next_task_order.js';
import { Migration20261124000000_event_stream_leases } from './Migration20261124000000_event_stream_leases.js';
import { Migration20261124100000_user_keyed_layout } from './Migration20261124100000_user_keyed_layout.js';
import { Migration20261125000000_task_count_row_triggers } from './Migration20261125000000_task_count_row_triggers.js';
import { Migration20261127000000_time_zones_and_list_indexes } from './Migration20261127000000_time_zones_and_list_indexes.js';
import { Migration20261127100000_listed_task_ids } from './Migration20261127100000_listed_task_ids.js';
import { Migration20261128000000_webhooks } from './Migration20261128000000_webhooks.js';
import { Migration20261129000000_citus_ready } from './Migration20261129000000_citus_ready.js';
import { Migration20261130000000_retired_secrets } from './Migration20261130000000_retired_secrets.js';
import { Migration20261130100000_user_counters } from './Migration20261130100000_user_counters.js';
import { Migration20261201000000_personal_tokens } from './Migration20261201000000_personal_tokens.js';
import { Migration20261202000000_webhook_sending } from './Migration20261202000000_webhook_sending.js';
import { Migration20261203000000_open_tasks } from './Migration20261203000000_open_tasks.js';

export const migrationsList = [
  { name: 'Migration20261122000000_initial', class: Migration20261122000000_initial },
  { name: 'Migration20261122010000_rate_limits', class: Migration20261122010000_rate_limits },
  { name: 'Migration20261123000000_task_counts', class: Migration20261123000000_task_counts },
  { name: 'Migration20261123100000_change_log', class: Migration20261123100000_change_log },
  { name: 'Migration20261123200000_versions_and_idempotency', class: Migration20261123200000_versions_and_idempotency },
  { name: 'Migration20261123300000_next_task_order', class: Migration20261123300000_next_task_order },
  { name: 'Migration20261124000000_event_stream_leases', class: Migration20261124000000_event_stream_leases },
  { name: 'Migration20261124100000_user_keyed_layout', class: Migration20261124100000_user_keyed_layout },
  { name: 'Migration20261125000000_task_count_row_triggers', class: Migration20261125000000_task_count_row_triggers },
  { name: 'Migration20261127000000_time_zones_and_list_indexes', class: Migration20261127000000_time_zones_and_list_indexes },
  { name: 'Migration20261127100000_listed_task_ids', class: Migration20261127100000_listed_task_ids },
  { name: 'Migration20261128000000_webhooks', class: Migration20261128000000_webhooks },
  { name: 'Migration20261129000000_citus_ready', class: Migration20261129000000_citus_ready },
  { name: 'Migration20261130000000_retired_secrets', class: Migration20261130000000_retired_secrets },
  { name: 'Migration20261130100000_user_counters', class: Migration20261130100000_user_counters },
  { name: 'Migration20261201000000_personal_tokens', class: Migration20261201000000_personal_tokens },
  { name: 'Migration20261202000000_webhook_sending', class: Migration20261202000000_webhook_sending },
  { name: 'Migration20261203000000_open_tasks', class: Migration20261203000000_open_tasks },
];
