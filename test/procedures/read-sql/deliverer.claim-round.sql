-- deliverer.claim-round

select
  w.user_id
from
  webhooks w
  join users u on u.id = w.user_id
where
  (
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
group by
  w.user_id
order by
  min(w.next_attempt_at)
limit
  ?
