-- housekeeping.stream-tickets

delete from event_stream_tickets
where
  expires_at < ?
