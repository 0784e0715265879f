-- tasks.reorder

select u.id, u.username, u.last_event_seq::text as seq from access_tokens t join users u on u.id = t.user_id where t.token_hash = ? and t.expires_at > ?

begin

/* batched */ select set_config('lock_timeout', '5000ms', true), id from users where id = ? for no key update

with target as ( select id, "order" as from_order, least(?::bigint, (select max("order") from tasks where user_id = ?))::int as to_order from tasks where id = ? and user_id = ? ), moved as ( update tasks set "order" = case when tasks.id = target.id then target.to_order when target.to_order < target.from_order then tasks."order" + 1 else tasks."order" - 1 end from target where tasks.user_id = ? and target.to_order <> target.from_order and tasks."order" between least(target.from_order, target.to_order) and greatest(target.from_order, target.to_order) returning tasks.id, tasks.user_id, tasks.project_id, tasks.label, tasks."order", tasks.planned_count, tasks.state, coalesce(floor(extract(epoch from tasks.started_at)), 0)::float8 as started_at, coalesce(floor(extract(epoch from tasks.planned_at)), 0)::float8 as planned_at, coalesce(floor(extract(epoch from tasks.finished_at)), 0)::float8 as finished_at, coalesce(floor(extract(epoch from tasks.abandoned_at)), 0)::float8 as abandoned_at ) select id, "order", to_jsonb(moved) as moved from moved union all select id, from_order, null from target

rollback
