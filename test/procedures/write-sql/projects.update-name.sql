-- projects.update-name

select u.id, u.username, u.time_zone, u.last_event_seq::text as seq from access_tokens t join users u on u.id = t.user_id where t.token_hash = ? and t.expires_at > ?

begin

/* batched */ select set_config('lock_timeout', '5000ms', true), id from users where id = ? for no key update

select "p0".* from "projects" as "p0" where "p0"."id" = ? and "p0"."user_id" = ? limit ?

select count(*) as "count" from "projects" as "p0" where "p0"."user_id" = ? and "p0"."slug" = ? and "p0"."id" != ?

update "projects" set "name" = ?, "slug" = ?, "version" = ? where "id" = ? and "user_id" = ? and "version" = ? returning "version"

select project_id, id from tasks where user_id = ? and project_id = any(?::int[]) and tasks.state <> 'abandoned' order by project_id, tasks."order", tasks.id

/* batched */ with evs as (select e.n, e.type, e.data from rows from (json_array_elements(?::json), unnest(?::text[])) with ordinality as e(data, type, n)), mark as ( update users set last_event_seq = last_event_seq + (select count(*) from evs) where id = ? and exists (select 1 from evs) returning last_event_seq - (select count(*) from evs) as base ), stored as ( insert into events (user_id, seq, type, data, at) select ?, mark.base + evs.n, evs.type, evs.data, ?::timestamptz from mark, evs returning seq, type, data, at ), payload as ( select ? || ':' || min(seq) || ':' || max(seq) as head, sum(octet_length(data::text)) as documents from stored having count(*) > 0 ), notified as ( select pg_notify('user_events', case when octet_length(body) <= 7000 then head || ':' || body else head end) from payload left join lateral (select json_agg(json_build_object('id', seq::text, 'type', type, 'data', data, 'at', floor(extract(epoch from at))::bigint) order by seq)::text as body from stored where payload.documents <= 7000) as events on true ) select count(*) from notified

commit
