-- webhooks.replay

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

begin

select
  w.key_open (?::bigint, ?::text, ?::bigint, ?::timestamptz) as opened

select
  u.events_pruned_through::text as pruned,
  u.last_event_seq::text as last
from
  webhooks w
  join users u on u.id = w.user_id
where
  w.user_id = ?
  and w.id = ?
  and u.id = ?
for update of
  w

with
  changed as (
    update webhooks w
    set
      cursor = case
        when w.cursor < ? then ?
        else least(w.cursor, ?)
      end,
      attempt = 0,
      next_attempt_at = 'epoch',
      generation = w.generation + 1,
      updated_at = ?
    where
      w.user_id = ?
      and w.id = ?
    returning
      w.*
  )
select
  w.user_id,
  w.id,
  w.url,
  w.events,
  w.description,
  w.state,
  w.disabled_reason,
  w.created_at,
  w.cursor::text as cursor
from
  changed w

commit
