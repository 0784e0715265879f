-- tasks.reorder

select u.id, u.username, u.time_zone, u.last_event_seq::text as seq from access_tokens t join users u on u.id = t.user_id where t.user_id = ? and t.token_hash = ? and u.id = ? and t.expires_at > ?

select w.apply( $1::bigint, $2::timestamptz, $3::json, $4::text, $5::bigint, $6::text, $7::timestamptz, false) as applied

select pg_notify($1, $2)
