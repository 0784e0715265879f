-- deliverer.claim-notified

with
  due as (
    select
      w.id
    from
      webhooks w
      join users u on u.id = w.user_id
    where
      w.user_id = ?
      and u.id = ?
      and (
        w.lease_until is null
        or w.lease_until < ?
      )
      and (
        w.test_events <> '[]'
        or (
          w.state = 'enabled'
          and w.next_attempt_at <= ?
          and u.last_event_seq > w.cursor
        )
      )
    order by
      w.next_attempt_at
    limit
      ?
    for update of
      w skip locked
  ),
  claimed as (
    update webhooks w
    set
      lease_owner = ?,
      lease_until = ?
    from
      due
    where
      w.user_id = ?
      and w.id = due.id
    returning
      w.user_id,
      w.id,
      w.url,
      w.events,
      w.state,
      w.cursor,
      w.attempt,
      w.generation,
      w.test_events,
      w.next_attempt_at,
      w.lease_owner
  )
select
  c.user_id,
  c.id,
  c.url,
  c.events,
  c.cursor::text as cursor,
  c.attempt,
  c.generation,
  c.test_events,
  (
    c.state = 'enabled'
    and c.next_attempt_at <= ?
  ) as log_due,
  c.lease_owner,
  (
    select
      u.events_pruned_through::text
    from
      users u
    where
      u.id = ?
  ) as pruned,
  coalesce(
    (
      select
        json_agg(
          json_build_object(
            'id',
            e.seq::text,
            'type',
            e.type,
            'data',
            e.data,
            'at',
            extract(
              epoch
              from
                e.at
            )::float8
          )
          order by
            e.seq
        )
      from
        (
          select
            e.seq,
            e.type,
            e.data,
            e.at
          from
            events e
          where
            e.user_id = ?
            and e.seq > c.cursor
          order by
            e.seq
          limit
            20
        ) e
    ),
    '[]'::json
  ) as pending
from
  claimed c
