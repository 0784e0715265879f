-- webhooks.rotateSecret

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
  w.secret,
  w.retired_secrets,
  w.retired_until
from
  webhooks w
where
  w.user_id = ?
  and w.id = ?

with
  changed as (
    update webhooks w
    set
      retired_secrets = ?::text[],
      retired_until = ?::timestamptz[],
      secret = ?,
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
