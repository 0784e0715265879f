-- webhooks.update-disable

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
  w.state,
  w.url,
  w.events,
  w.cursor::text as cursor,
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
      url = coalesce(?, w.url),
      events = coalesce(?::jsonb, w.events),
      description = coalesce(?, w.description),
      state = coalesce(?, w.state),
      disabled_reason = case
        when ? then null
        when ? = 'disabled'
        and w.state = 'enabled' then null
        else w.disabled_reason
      end,
      attempt = case
        when ? then 0
        else w.attempt
      end,
      next_attempt_at = case
        when ? then 'epoch'
        else w.next_attempt_at
      end,
      generation = w.generation + case
        when ? then 1
        else 0
      end,
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
