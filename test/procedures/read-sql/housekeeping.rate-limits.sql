-- housekeeping.rate-limits

delete from rate_limit_hits
where
  window_start < ?
