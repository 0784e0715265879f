-- users.register

select count(*) as "count" from "users" as "u0" where "u0"."username" = ?

begin

insert into "users" ("username", "password_hash", "created_at") values (?, ?, ?) returning "id"

insert into "access_tokens" ("user_id", "token_hash", "created_at", "expires_at") values (?, ?, ?, ?) returning "id"

commit
