-- deliverer.release-leases

update webhooks
set
  lease_owner = null,
  lease_until = null
where
  lease_owner like ?
