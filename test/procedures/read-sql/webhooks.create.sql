-- webhooks.create

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
  room as (
    select
      u.last_event_seq
    from
      users u
    where
      u.id = ?
      and (
        select
          count(*)
        from
          webhooks c
        where
          c.user_id = ?
      ) < ?
  ),
  changed as (
    insert into
      webhooks as w (
        user_id,
        url,
        events,
        description,
        secret,
        created_at,
        updated_at,
        cursor,
        next_attempt_at
      )
    select
      ?,
      ?,
      ?::jsonb,
      ?,
      ?,
      ?,
      ?,
      room.last_event_seq,
      'epoch'
    from
      room
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
