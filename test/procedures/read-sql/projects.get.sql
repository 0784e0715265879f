-- projects.get

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
  p.id,
  p.user_id as "userId",
  p.name,
  p.slug,
  p.description,
  p.state,
  p.version,
  coalesce(
    floor(
      extract(
        epoch
        from
          p.started_at
      )
    ),
    0
  )::float8 as "startedAt",
  coalesce(
    floor(
      extract(
        epoch
        from
          p.due_at
      )
    ),
    0
  )::float8 as "dueAt",
  coalesce(
    floor(
      extract(
        epoch
        from
          p.paused_at
      )
    ),
    0
  )::float8 as "pausedAt",
  coalesce(
    floor(
      extract(
        epoch
        from
          p.finished_at
      )
    ),
    0
  )::float8 as "finishedAt",
  array(
    select
      t.id
    from
      tasks t
    where
      t.user_id = ?
      and t.project_id = p.id
      and t.state <> 'abandoned'
    order by
      t."order",
      t.id
  ) as "taskIds"
from
  projects p
where
  p.user_id = ?
  and p.id = any (?::bigint[])
