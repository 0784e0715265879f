-- batch.apply-rate-limited

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
  previous as (
    select
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
      ) as hits
  ),
  counted as (
    insert into
      rate_limit_hits ("key", "window_start", "hits")
    select
      ?,
      ?,
      ?
    from
      previous
    where
      previous.hits * ?::float8 + ? <= ?
    on conflict ("key", "window_start") do update
    set
      "hits" = rate_limit_hits."hits" + excluded."hits"
    where
      (
        select
          hits
        from
          previous
      ) * ?::float8 + rate_limit_hits."hits" + excluded."hits" <= ?
    returning
      "hits"
  )
select
  (
    select
      "hits"
    from
      counted
  ) as counted,
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
  ) as current,
  (
    select
      hits
    from
      previous
  ) as previous

select
  w.apply (
    $1::bigint,
    $2::timestamptz,
    $3::json,
    $4::json,
    $5::text,
    $6::bigint,
    $7::text,
    $8::timestamptz,
    $9::boolean
  ) as applied

select
  pg_notify ($1, payload)
from
  unnest($2::text[]) as payload
