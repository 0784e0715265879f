-- stream.token-check

select
  1
from
  access_tokens
where
  user_id = ?
  and token_hash = ?
  and expires_at > ?
