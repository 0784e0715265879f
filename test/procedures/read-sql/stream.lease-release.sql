-- stream.lease-release

delete from event_stream_leases
where
  user_id = any (?::bigint[])
  and id = any (?::uuid[])
