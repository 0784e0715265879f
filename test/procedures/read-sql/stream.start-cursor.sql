-- stream.start-cursor

select
  last_event_seq::text as last,
  events_pruned_through::text as pruned,
  pg_is_in_recovery()
  or current_setting('transaction_read_only')::boolean as read_only
from
  users
where
  id = ?
