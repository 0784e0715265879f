-- users.me-old-form-token

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
  t.token_hash = ?
  and t.expires_at > ?

update access_tokens
set
  last_used_at = ?
where
  user_id = ?
  and token_hash = ?
  and (
    last_used_at is null
    or last_used_at <= ?::timestamptz - interval '60 seconds'
  )
