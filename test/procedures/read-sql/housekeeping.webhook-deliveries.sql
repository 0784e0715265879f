-- housekeeping.webhook-deliveries

select distinct
  user_id
from
  webhook_deliveries
where
  at < ?
limit
  100

delete from webhook_deliveries d
where
  d.user_id = ?
  and d.id in (
    select
      o.id
    from
      webhook_deliveries o
    where
      o.user_id = ?
      and o.at < ?
    limit
      5000
  )

select distinct
  user_id
from
  webhook_deliveries
where
  at < ?
limit
  100
