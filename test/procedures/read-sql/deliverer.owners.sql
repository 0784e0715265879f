-- deliverer.owners

select distinct
  user_id
from
  webhooks
