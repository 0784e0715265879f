-- projects.list-filters

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
  c.total,
  c.seq,
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
  (
    select
      count(*)::int as total,
      (
        select
          last_event_seq::text
        from
          users
        where
          id = ?
      ) as seq
    from
      projects
    where
      projects.user_id = ?
      and projects.state = any (?::text[])
      and replace(
        lower(projects.name collate "und-x-icu"),
        'ς',
        'σ'
      ) like replace(lower(?::text collate "und-x-icu"), 'ς', 'σ')
      and projects.due_at > 'epoch'::timestamptz
      and projects.due_at >= ?
      and projects.due_at < ?
  ) as c
  left join lateral (
    select
      *
    from
      projects
    where
      projects.user_id = ?
      and projects.state = any (?::text[])
      and replace(
        lower(projects.name collate "und-x-icu"),
        'ς',
        'σ'
      ) like replace(lower(?::text collate "und-x-icu"), 'ς', 'σ')
      and projects.due_at > 'epoch'::timestamptz
      and projects.due_at >= ?
      and projects.due_at < ?
    order by
      coalesce(projects.due_at, 'epoch'::timestamptz) desc,
      projects.id
    limit
      25
    offset
      ?
  ) as p on true
order by
  coalesce(p.due_at, 'epoch'::timestamptz) desc,
  p.id
