-- users.register

select 1 from usernames where username = ?

begin

with "user" as ( insert into users (username, password_hash, time_zone, created_at) values (?, ?, ?, ?) returning id, username, time_zone ), "name" as ( insert into usernames (username, user_id) select username, id from "user" ) select id, username, time_zone from "user"

insert into "access_tokens" ("token_hash", "user_id", "created_at", "expires_at") values (?, ?, ?, ?)

commit
