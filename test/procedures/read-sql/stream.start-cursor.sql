-- stream.start-cursor

select
  last_event_seq::text as last,
  events_pruned_through::text as pruned
from
  users
where
  id = ?
