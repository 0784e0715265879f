-- stream.catch-up

select
  e.seq::text as id,
  e.type,
  e.data,
  extract(
    epoch
    from
      e.at
  )::float8 as at
from
  events e
where
  e.user_id = ?
  and e.seq > ?
order by
  e.seq
limit
  ?
