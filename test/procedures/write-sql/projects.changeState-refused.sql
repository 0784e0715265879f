-- projects.changeState-refused

select u.id, u.username, u.time_zone, u.last_event_seq::text as seq from access_tokens t join users u on u.id = t.user_id where t.token_hash = ? and t.expires_at > ?

begin

/* batched */ select set_config('lock_timeout', '5000ms', true), id from users where id = ? for no key update

select "p0".* from "projects" as "p0" where "p0"."id" = ? and "p0"."user_id" = ? limit ?

rollback
