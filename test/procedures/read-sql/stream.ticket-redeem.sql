-- stream.ticket-redeem

delete from event_stream_tickets
where
  user_id = ?
  and ticket_hash = ?
returning
  token_hash,
  expires_at

select
  1
from
  access_tokens
where
  user_id = ?
  and token_hash = ?
  and expires_at > ?
