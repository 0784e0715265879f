-- housekeeping.stream-leases

select
  extract(
    epoch
    from
      clock_timestamp()
  )::float8 * 1000 as ms

delete from event_stream_leases
where
  expires_at < ?::timestamptz
