-- tasks.list-page

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
  (
    select
      (
        (
          select
            open_tasks
          from
            users
          where
            id = ?
        ) + (
          select
            count(*)
          from
            tasks
          where
            user_id = ?
            and state = 'finished'
            and finished_at >= ?
        )
      )::int as total,
      (
        select
          last_event_seq::text
        from
          users
        where
          id = ?
      ) as seq
  ) as c
  left join lateral (
    select
      one.*
    from
      (
        select
          tasks.id
        from
          tasks
        where
          tasks.user_id = ?
          and tasks.state <> 'abandoned'
          and (
            tasks.state <> 'finished'
            or tasks.finished_at >= ?
          )
        order by
          tasks."order",
          tasks.id
        limit
          2
        offset
          ?
      ) as page
      cross join lateral (
        select
          tasks.*
        from
          tasks
        where
          tasks.user_id = ?
          and tasks.id = page.id
        limit
          1
      ) as one
  ) as t on true
order by
  t."order",
  t.id
