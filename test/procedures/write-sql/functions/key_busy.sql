-- key_busy

create function w.key_busy(p_user bigint, p_key text, p_key_since timestamptz) returns json language sql stable as $$
  select coalesce(w.key_replay(p_user, p_key, p_key_since), json_build_object('refusal', json_build_object('code', 'request_in_progress')))
$$
