-- users.changePassword

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
  w.key_open (?::bigint, ?::text, ?::bigint, ?::timestamptz) as opened

update users
set
  password_hash = ?
where
  id = ?
  and password_hash = ?
returning
  id

delete from access_tokens
where
  user_id = ?
  and kind = 'session'
  and token_hash <> ?
returning
  token_hash

commit

select
  pg_notify (?, ?)
