-- users.authorize

select
  user_id
from
  usernames
where
  username = ?

select
  id,
  username,
  time_zone,
  password_hash
from
  users
where
  id = ?

begin

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
