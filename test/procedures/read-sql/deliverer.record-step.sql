-- deliverer.record-step

with
  p as (
    select
      ?::bigint as id,
      ?::text as owner,
      ?::int as gen,
      ?::bigint as cursor,
      ?::int as failures,
      ?::timestamptz as next_at,
      ?::text as disable,
      ?::text as test_id,
      ?::timestamptz as lease_until,
      ?::timestamptz as now
  ),
  changed as (
    update webhooks w
    set
      cursor = case
        when w.generation = p.gen then greatest(w.cursor, coalesce(p.cursor, w.cursor))
        else w.cursor
      end,
      attempt = case
        when w.generation <> p.gen then w.attempt
        when p.failures is not null then p.failures
        when p.cursor is not null then 0
        else w.attempt
      end,
      /* Given back with nothing failed: due from now, behind those due before (first come, first served). */
      next_attempt_at = case
        when w.generation <> p.gen then w.next_attempt_at
        when p.next_at is not null then p.next_at
        when p.lease_until is null then p.now
        else w.next_attempt_at
      end,
      state = case
        when w.generation = p.gen
        and p.disable is not null then 'disabled'
        else w.state
      end,
      disabled_reason = case
        when w.generation = p.gen
        and p.disable is not null then p.disable
        else w.disabled_reason
      end,
      test_events = case
        when p.test_id is not null then coalesce(
          (
            select
              jsonb_agg(
                t
                order by
                  n
              )
            from
              jsonb_array_elements(w.test_events) with ordinality as x (t, n)
            where
              t ->> 'id' is distinct from p.test_id
          ),
          '[]'::jsonb
        )
        else w.test_events
      end,
      lease_owner = case
        when w.generation = p.gen
        and p.lease_until is not null then w.lease_owner
        else null
      end,
      lease_until = case
        when w.generation = p.gen then p.lease_until
        else null
      end,
      /* The request of this step has ended (src/users/delete-user.ts waits for it). */
      sending_until = null
    from
      p
    where
      w.user_id = ?
      and w.id = p.id
      and w.lease_owner = p.owner
    returning
      w.cursor,
      w.state,
      w.generation
  ),
  held as (
    select
      c.generation = p.gen as held,
      c.cursor,
      c.state
    from
      changed c,
      p
  ),
  logged as (
    insert into
      webhook_deliveries (
        user_id,
        webhook_id,
        event_id,
        event_type,
        attempt,
        at,
        outcome,
        http_status,
        error,
        duration_ms,
        next_attempt_at
      )
    select
      ?,
      ?,
      ?,
      ?,
      ?,
      ?,
      ?,
      ?,
      ?,
      ?,
      ?::timestamptz
    where
      ?::boolean
      and exists (
        select
          1
        from
          webhooks w
        where
          w.user_id = ?
          and w.id = ?
      )
  )
select
  coalesce(
    (
      select
        h.held
      from
        held h
    ),
    false
  ) as held,
  coalesce(
    (
      select
        not h.held
      from
        held h
    ),
    false
  ) as moved,
  coalesce(
    (
      select
        h.held
        and u.last_event_seq > h.cursor
      from
        held h,
        users u
      where
        u.id = ?
    ),
    false
  ) as more,
  coalesce(
    (
      select
        h.held
        and h.state = 'enabled'
      from
        held h
    ),
    false
  ) as enabled
