-- stream.lease-renew

select
  extract(
    epoch
    from
      clock_timestamp()
  )::float8 * 1000 as ms

update event_stream_leases
set
  expires_at = ?::timestamptz
where
  user_id = any (?::bigint[])
  and id = any (?::uuid[])
returning
  id
