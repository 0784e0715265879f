-- batch.apply

select u.id, u.username, u.time_zone, u.last_event_seq::text as seq, t.id as token_id, t.kind, t.scopes, (t.last_used_at is null or t.last_used_at <= ?::timestamptz - interval '60 seconds') as stale from access_tokens t join users u on u.id = t.user_id where t.user_id = ? and t.token_hash = ? and u.id = ? and t.expires_at > ?

begin

/* batched */ select set_config('lock_timeout', '5000ms', true), id from users where id = ? for no key update

select w.projects_create( $1::bigint, $2::timestamptz, $3::json, $4::json, $5::text[]) as result

select w.tasks_create( $1::bigint, $2::timestamptz, $3::json, $4::json, $5::text[]) as result

select w.projects_change_state( $1::bigint, $2::timestamptz, $3::json, $4::json, $5::text[]) as result

select w.tasks_update( $1::bigint, $2::timestamptz, $3::json, $4::json, $5::text[]) as result

select w.tasks_change_state( $1::bigint, $2::timestamptz, $3::json, $4::json, $5::text[]) as result

select w.tasks_reorder( $1::bigint, $2::timestamptz, $3::json, $4::json, $5::text[]) as result

select w.projects_update( $1::bigint, $2::timestamptz, $3::json, $4::json, $5::text[]) as result

select w.projects_delete( $1::bigint, $2::timestamptz, $3::json, $4::json, $5::text[]) as result

with evs as (select e.n, e.type, e.data from rows from (json_array_elements(?::json), unnest(?::text[])) with ordinality as e(data, type, n)), mark as ( update users set last_event_seq = last_event_seq + (select count(*) from evs) where id = ? and exists (select 1 from evs) returning last_event_seq ), stored as ( insert into events (user_id, seq, type, data, at) select ?, mark.last_event_seq - (select count(*) from evs) + evs.n, evs.type, evs.data, ?::timestamptz from mark, evs returning seq, type, data, at ), counted as ( select ? || ':' || min(seq) || ':' || max(seq) as head, sum(octet_length(data::text)) as documents from stored having count(*) > 0 ), payload as ( select case when octet_length(body) <= 7000 then head || ':' || body else head end as notification from counted left join lateral (select json_agg(json_build_object('id', seq::text, 'type', type, 'data', data, 'at', floor(extract(epoch from at))::bigint) order by seq)::text as body from stored where counted.documents <= 7000) as events on true ) select (select notification from payload) as notification

commit

select pg_notify($1, payload) from unnest($2::text[]) as payload
