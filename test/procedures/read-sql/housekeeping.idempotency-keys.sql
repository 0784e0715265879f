-- housekeeping.idempotency-keys

select
  user_id,
  count(*) as n
from
  idempotency_keys
where
  created_at <= ?
group by
  user_id
order by
  min(created_at)
limit
  ?

delete from idempotency_keys k
where
  k.user_id = ?
  and k.created_at <= ?
  and k.key in (
    select
      d.key
    from
      idempotency_keys d
    where
      d.user_id = ?
      and d.created_at <= ?
    order by
      d.created_at
    limit
      ?
  )
