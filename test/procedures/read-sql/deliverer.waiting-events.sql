-- deliverer.waiting-events

select
  w.state,
  sum(greatest(u.last_event_seq - w.cursor, 0))::text as waiting
from
  webhooks w
  join users u on u.id = w.user_id
group by
  w.state
