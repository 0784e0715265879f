-- users.authorize

select "u0".* from "users" as "u0" where "u0"."username" = ? limit ?

begin

insert into "access_tokens" ("user_id", "token_hash", "created_at", "expires_at") values (?, ?, ?, ?) returning "id"

commit
