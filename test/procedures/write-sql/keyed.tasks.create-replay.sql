-- keyed.tasks.create-replay

select u.id, u.username, u.time_zone, u.last_event_seq::text as seq from access_tokens t join users u on u.id = t.user_id where t.user_id = ? and t.token_hash = ? and u.id = ? and t.expires_at > ?

begin

select pg_try_advisory_xact_lock(?::bigint) as claimed

select set_config('lock_timeout', '5000ms', true), id, (select json_build_object('fingerprint', k.fingerprint, 'status', k.status, 'body', k.body, 'etag', k.etag) from idempotency_keys k where k.user_id = ? and k.key = ? and k.created_at > ?) as record from users where id = ? for no key update

commit
