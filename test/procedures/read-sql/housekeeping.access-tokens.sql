-- housekeeping.access-tokens

delete from access_tokens
where
  expires_at < ?
