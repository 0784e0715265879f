-- housekeeping.change-log

select
  user_id,
  count(*) as n
from
  events
where
  at < ?
group by
  user_id
order by
  min(at)
limit
  ?

begin

select
  set_config('lock_timeout', '200ms', true),
  id
from
  users
where
  id = ?
for no key update

with
  removed as (
    delete from events e
    where
      e.user_id = ?
      and e.seq in (
        select
          d.seq
        from
          events d
        where
          d.user_id = ?
          and d.at < ?
        order by
          d.seq
        limit
          ?
      )
    returning
      e.seq
  ),
  marked as (
    update users u
    set
      events_pruned_through = greatest(
        u.events_pruned_through,
        (
          select
            max(seq)
          from
            removed
        )
      )
    where
      u.id = ?
      and exists (
        select
          1
        from
          removed
      )
    returning
      u.id
  )
select
  (
    select
      count(*)
    from
      removed
  )::int as removed,
  (
    select
      count(*)
    from
      marked
  )::int as marked

commit

select
  user_id,
  count(*) as n
from
  events
where
  at < ?
group by
  user_id
order by
  min(at)
limit
  ?
