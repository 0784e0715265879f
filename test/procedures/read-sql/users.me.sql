-- users.me

with used as ( update access_tokens a set last_used_at = ? where a.user_id = ? and a.token_hash = ? and a.expires_at > ? and (a.last_used_at is null or a.last_used_at <= ?::timestamptz - interval '60 seconds') returning a.id) select u.id, u.username, u.time_zone, u.last_event_seq::text as seq, t.id as token_id, t.kind, t.scopes from access_tokens t join users u on u.id = t.user_id where t.user_id = ? and t.token_hash = ? and u.id = ? and t.expires_at > ?
