-- key_keep

create function w.key_keep (
  p_user bigint,
  p_key text,
  p_fingerprint text,
  p_status int,
  p_body json,
  p_etag text,
  p_now timestamptz
) returns void language sql volatile as $$
  insert into idempotency_keys as k (user_id, key, fingerprint, status, body, etag, created_at)
  values (p_user, p_key, p_fingerprint, p_status, p_body, p_etag, p_now)
  on conflict (user_id, key) do update
    set fingerprint = excluded.fingerprint, status = excluded.status, body = excluded.body, etag = excluded.etag, created_at = excluded.created_at
$$
