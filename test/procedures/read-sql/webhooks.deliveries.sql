-- webhooks.deliveries

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

select
  exists (
    select
      1
    from
      webhooks w
    where
      w.user_id = ?
      and w.id = ?
  ) as found,
  (
    select
      count(*)
    from
      webhook_deliveries d
    where
      d.user_id = ?
      and d.webhook_id = ?
  )::int as total

select
  d.id::text as id,
  d.event_id,
  d.event_type,
  d.attempt,
  d.at,
  d.outcome,
  d.http_status,
  d.error,
  d.duration_ms,
  d.next_attempt_at
from
  webhook_deliveries d
where
  d.user_id = ?
  and d.webhook_id = ?
order by
  d.id desc
offset
  ?
limit
  ?
