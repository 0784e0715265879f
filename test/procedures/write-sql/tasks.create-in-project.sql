-- tasks.create-in-project

select u.id, u.username, u.time_zone, u.last_event_seq::text as seq from access_tokens t join users u on u.id = t.user_id where t.token_hash = ? and t.expires_at > ?

begin

/* batched */ select set_config('lock_timeout', '5000ms', true), id from users where id = ? for no key update

select id, state = 'started' as started from projects where id = ? and user_id = ?

with owner as (select ?::int as id), changed as (insert into tasks (user_id, "order", project_id, label, planned_count, state, started_at, planned_at, finished_at, abandoned_at, created_at) select owner.id, next_task_order(owner.id), ?, ?, ?, ?, ?, ?, ?, ?, ? from owner returning *) select changed.id, changed.user_id, changed.project_id, changed.label, changed."order", changed.planned_count, changed.state, coalesce(floor(extract(epoch from changed.started_at)), 0)::float8 as started_at, coalesce(floor(extract(epoch from changed.planned_at)), 0)::float8 as planned_at, coalesce(floor(extract(epoch from changed.finished_at)), 0)::float8 as finished_at, coalesce(floor(extract(epoch from changed.abandoned_at)), 0)::float8 as abandoned_at, changed.version from changed

select p.id, p.user_id, p.name, p.slug, p.description, p.state, p.version, coalesce(floor(extract(epoch from p.started_at)), 0)::float8 as started_at, coalesce(floor(extract(epoch from p.due_at)), 0)::float8 as due_at, coalesce(floor(extract(epoch from p.paused_at)), 0)::float8 as paused_at, coalesce(floor(extract(epoch from p.finished_at)), 0)::float8 as finished_at, array(select t.id from tasks t where t.user_id = p.user_id and t.project_id = p.id and t.state <> 'abandoned' order by t."order", t.id) as task_ids from projects p where p.user_id = ? and p.id = any(?::int[])

/* batched */ with evs as (select e.n, e.type, e.data from rows from (json_array_elements(?::json), unnest(?::text[])) with ordinality as e(data, type, n)), mark as ( update users set last_event_seq = last_event_seq + (select count(*) from evs) where id = ? and exists (select 1 from evs) returning last_event_seq - (select count(*) from evs) as base ), stored as ( insert into events (user_id, seq, type, data, at) select ?, mark.base + evs.n, evs.type, evs.data, ?::timestamptz from mark, evs returning seq, type, data, at ), payload as ( select ? || ':' || min(seq) || ':' || max(seq) as head, sum(octet_length(data::text)) as documents from stored having count(*) > 0 ), notified as ( select pg_notify('user_events', case when octet_length(body) <= 7000 then head || ':' || body else head end) from payload left join lateral (select json_agg(json_build_object('id', seq::text, 'type', type, 'data', data, 'at', floor(extract(epoch from at))::bigint) order by seq)::text as body from stored where payload.documents <= 7000) as events on true ) select count(*) from notified

commit
