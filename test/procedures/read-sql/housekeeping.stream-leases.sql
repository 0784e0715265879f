-- housekeeping.stream-leases

delete from event_stream_leases where expires_at < ?::timestamptz
