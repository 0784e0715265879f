-- users.export

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

start transaction isolation level repeatable read read only

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
  and p.id > ?
order by
  p.id
limit
  1000

select
  t.id,
  t.user_id as "userId",
  t.project_id as "projectId",
  t.label,
  t."order",
  t.planned_count as "plannedCount",
  t.state,
  coalesce(
    floor(
      extract(
        epoch
        from
          t.started_at
      )
    ),
    0
  )::float8 as "startedAt",
  coalesce(
    floor(
      extract(
        epoch
        from
          t.planned_at
      )
    ),
    0
  )::float8 as "plannedAt",
  coalesce(
    floor(
      extract(
        epoch
        from
          t.finished_at
      )
    ),
    0
  )::float8 as "finishedAt",
  coalesce(
    floor(
      extract(
        epoch
        from
          t.abandoned_at
      )
    ),
    0
  )::float8 as "abandonedAt"
from
  tasks t
where
  t.user_id = ?
  and t.id > ?
order by
  t.id
limit
  1000

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
  webhooks w
where
  w.user_id = ?
  and w.id > ?
order by
  w.id
limit
  1000

rollback
