-- key_open

create function w.key_open (
  p_user bigint,
  p_key text,
  p_key_lock bigint,
  p_key_since timestamptz
) returns json language plpgsql volatile as $$
declare
  v_last bigint;
  v_next_order bigint;
  v_record json;
  v_setting text;
begin
  if p_key is not null and not pg_try_advisory_xact_lock(p_key_lock) then
    return json_build_object('refusal', json_build_object('code', 'request_in_progress'));
  end if;
  v_setting := set_config('lock_timeout', '5000ms', true);
  select u.last_event_seq, u.next_task_order into v_last, v_next_order from users u where u.id = p_user for no key update;
  if not found then
    return json_build_object('refusal', json_build_object('code', 'unauthorized'));
  end if;
  if p_key is not null then
    select
      json_build_object(
        'fingerprint',
        k.fingerprint,
        'status',
        k.status,
        'body',
        k.body,
        'etag',
        k.etag
      ) into v_record
    from
      idempotency_keys k
    where
      k.user_id = p_user
      and k.key = p_key
      and k.created_at > p_key_since;
    if v_record is not null then
      return json_build_object('replay', v_record);
    end if;
  end if;
  return json_build_object('last', v_last, 'next_order', v_next_order);
end
$$
