-- deliverer.mark-sending

with
  u as (
    select
      id
    from
      users
    where
      id = ?
    for key share
  )
update webhooks w
set
  sending_until = ?
from
  u
where
  w.user_id = ?
  and u.id = ?
  and w.id = ?
  and w.lease_owner = ?
returning
  w.secret,
  w.retired_secrets,
  w.retired_until
