-- tasks.reorder

select u.id, u.username, u.last_event_seq::text as seq from access_tokens t join users u on u.id = t.user_id where t.token_hash = ? and t.expires_at > ?

begin

/* batched */ select set_config('lock_timeout', '5000ms', true), id from users where id = ? for no key update

with target as ( select id, "order" as from_order, least(?::bigint, (select max("order") from tasks where user_id = ?))::int as to_order from tasks where id = ? and user_id = ? ), moved as ( update tasks set "order" = case when tasks.id = target.id then target.to_order when target.to_order < target.from_order then tasks."order" + 1 else tasks."order" - 1 end, version = tasks.version + 1 from target where tasks.user_id = ? and target.to_order <> target.from_order and tasks."order" between least(target.from_order, target.to_order) and greatest(target.from_order, target.to_order) returning tasks.id, tasks.user_id, tasks.project_id, tasks.label, tasks."order", tasks.planned_count, tasks.state, coalesce(floor(extract(epoch from tasks.started_at)), 0)::float8 as started_at, coalesce(floor(extract(epoch from tasks.planned_at)), 0)::float8 as planned_at, coalesce(floor(extract(epoch from tasks.finished_at)), 0)::float8 as finished_at, coalesce(floor(extract(epoch from tasks.abandoned_at)), 0)::float8 as abandoned_at ) select id, "order", to_jsonb(moved) as moved from moved union all select id, from_order, null from target

select p.id, p.user_id, p.name, p.slug, p.description, p.state, p.version, coalesce(floor(extract(epoch from p.started_at)), 0)::float8 as started_at, coalesce(floor(extract(epoch from p.due_at)), 0)::float8 as due_at, coalesce(floor(extract(epoch from p.paused_at)), 0)::float8 as paused_at, coalesce(floor(extract(epoch from p.finished_at)), 0)::float8 as finished_at, array(select t.id from tasks t where t.user_id = p.user_id and t.project_id = p.id and t.state <> 'abandoned' order by t."order", t.id) as task_ids from projects p where p.user_id = ? and p.id = any(?::int[])

/* batched */ with evs as (select e.n, e.ev->>'type' as type, e.ev->'data' as data from json_array_elements(?::json) with ordinality as e(ev, n)), mark as ( update users set last_event_seq = last_event_seq + (select count(*) from evs) where id = ? and exists (select 1 from evs) returning last_event_seq - (select count(*) from evs) as base ), stored as ( insert into events (user_id, seq, type, data, at) select ?, mark.base + evs.n, evs.type, evs.data, ?::timestamptz from mark, evs returning seq, type, data, at ), payload as ( select ? || ':' || min(seq) || ':' || max(seq) as head, json_agg(json_build_object('id', seq::text, 'type', type, 'data', data, 'at', floor(extract(epoch from at))::bigint) order by seq)::text as body from stored having count(*) > 0 ), notified as ( select pg_notify('user_events', case when octet_length(body) <= 7000 then head || ':' || body else head end) from payload ) select count(*) from notified

commit
