-- users.me-old-form-token

select u.id, u.username, u.time_zone, u.last_event_seq::text as seq from access_tokens t join users u on u.id = t.user_id where t.token_hash = ? and t.expires_at > ?
