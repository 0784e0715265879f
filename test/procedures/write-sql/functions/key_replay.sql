-- key_replay

create function w.key_replay(p_user bigint, p_key text, p_key_since timestamptz) returns json language sql stable as $$
  select json_build_object('replay', json_build_object('fingerprint', k.fingerprint, 'status', k.status, 'body', k.body, 'etag', k.etag))
    from idempotency_keys k
   where k.user_id = p_user and k.key = p_key and k.created_at > p_key_since
$$
