-- webhooks.test

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

with
  found as (
    select
      w.user_id,
      w.id,
      jsonb_array_length(w.test_events) < ? as room
    from
      webhooks w
    where
      w.user_id = ?
      and w.id = ?
  ),
  queued as (
    update webhooks w
    set
      test_events = w.test_events || jsonb_build_array(
        jsonb_build_object('id', ?::text, 'at', ?::bigint)
      ),
      updated_at = ?
    from
      found
    where
      found.room
      and w.user_id = ?
      and w.id = found.id
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
  w.cursor::text as cursor,
  true as queued
from
  queued w
union all
select
  w.user_id,
  w.id,
  w.url,
  w.events,
  w.description,
  w.state,
  w.disabled_reason,
  w.created_at,
  w.cursor::text as cursor,
  false
from
  webhooks w
  join found f on f.id = w.id
where
  w.user_id = ?
  and not f.room

commit
