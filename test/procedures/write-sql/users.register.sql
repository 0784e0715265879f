-- users.register

select
  1
from
  usernames
where
  username = ?

begin

insert into
  users (username, password_hash, time_zone, created_at)
values
  (?, ?, ?, ?)
returning
  id,
  username,
  time_zone

insert into
  usernames (username, user_id)
values
  (?, ?)

insert into
  "access_tokens" (
    "token_hash",
    "user_id",
    "created_at",
    "expires_at",
    "kind",
    "last_used_at"
  )
values
  (?, ?, ?, ?, ?, ?)

commit
