-- users.authorize-unknown

select
  user_id
from
  usernames
where
  username = ?
