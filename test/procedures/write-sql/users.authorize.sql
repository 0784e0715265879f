-- users.authorize

select u.id, u.username, u.time_zone, u.password_hash from usernames n join users u on u.id = n.user_id where n.username = ?

begin

insert into "access_tokens" ("token_hash", "user_id", "created_at", "expires_at") values (?, ?, ?, ?)

commit
