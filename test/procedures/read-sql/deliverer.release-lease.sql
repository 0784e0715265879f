-- deliverer.release-lease

update webhooks
set
  lease_owner = null,
  lease_until = null
where
  user_id = ?
  and id = ?
  and lease_owner = ?
