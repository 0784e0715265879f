-- events.list-newest

select
  u.id,
  u.username,
  u.time_zone,
  u.last_event_seq::text as seq,
  t.id as token_id,
  t.kind,
  t.scopes,
  (
    t.last_used_at is null
    or t.last_used_at <= ?::timestamptz - interval '60 seconds'
  ) as stale
from
  access_tokens t
  join users u on u.id = t.user_id
where
  t.user_id = ?
  and t.token_hash = ?
  and u.id = ?
  and t.expires_at > ?

select
  last_event_seq::text as last,
  events_pruned_through::text as pruned,
  pg_is_in_recovery()
  or current_setting('transaction_read_only')::boolean as read_only
from
  users
where
  id = ?
