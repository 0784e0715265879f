-- users.authorize-rate-limited

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
  user_id
from
  usernames
where
  username = ?

select
  id,
  username,
  time_zone,
  password_hash
from
  users
where
  id = ?

begin

select
  1 as held
from
  users
where
  id = ?
  and password_hash = ?
for share

insert into
  "access_tokens" (
    "token_hash",
    "user_id",
    "created_at",
    "expires_at",
    "kind",
    "last_used_at"
  )
values
  (?, ?, ?, ?, ?, ?)

commit
