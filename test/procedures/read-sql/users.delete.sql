-- users.delete

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

with
  counted as (
    insert into
      rate_limit_hits ("key", "window_start", "hits")
    values
      (?, ?, ?)
    on conflict ("key", "window_start") do update
    set
      "hits" = rate_limit_hits."hits" + excluded."hits"
    returning
      "hits"
  )
select
  (
    select
      "hits"
    from
      counted
  ) as hits,
  coalesce(
    (
      select
        "hits"
      from
        rate_limit_hits
      where
        "key" = ?
        and "window_start" = ?
    ),
    0
  ) as previous

with
  counted as (
    insert into
      rate_limit_hits ("key", "window_start", "hits")
    values
      (?, ?, ?)
    on conflict ("key", "window_start") do update
    set
      "hits" = rate_limit_hits."hits" + excluded."hits"
    returning
      "hits"
  )
select
  (
    select
      "hits"
    from
      counted
  ) as hits,
  coalesce(
    (
      select
        "hits"
      from
        rate_limit_hits
      where
        "key" = ?
        and "window_start" = ?
    ),
    0
  ) as previous

with
  counted as (
    insert into
      rate_limit_hits ("key", "window_start", "hits")
    values
      (?, ?, ?)
    on conflict ("key", "window_start") do update
    set
      "hits" = rate_limit_hits."hits" + excluded."hits"
    returning
      "hits"
  )
select
  (
    select
      "hits"
    from
      counted
  ) as hits,
  coalesce(
    (
      select
        "hits"
      from
        rate_limit_hits
      where
        "key" = ?
        and "window_start" = ?
    ),
    0
  ) as previous

select
  password_hash
from
  users
where
  id = ?

begin

select
  username
from
  users
where
  id = ?
for update

select
  id
from
  webhooks
where
  user_id = ?
  and sending_until > ?
limit
  1

delete from access_tokens
where
  user_id = ?
returning
  token_hash

delete from webhook_deliveries
where
  user_id = ?

delete from webhooks
where
  user_id = ?

delete from tasks
where
  user_id = ?

delete from projects
where
  user_id = ?

delete from events
where
  user_id = ?

delete from event_stream_tickets
where
  user_id = ?

delete from event_stream_leases
where
  user_id = ?

delete from idempotency_keys
where
  user_id = ?

delete from usernames
where
  username = ?
  and user_id = ?

delete from users
where
  id = ?

commit

select
  pg_notify (?, ?)
