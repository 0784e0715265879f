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

select
  1 as held
from
  users
where
  id = ?
  and password_hash = ?
for share

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
