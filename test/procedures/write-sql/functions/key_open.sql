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
    return w.key_busy(p_user, p_key, p_key_since);
  end if;
  v_setting := set_config('lock_timeout', '5000ms', true);
  select u.last_event_seq, u.next_task_order into v_last, v_next_order from users u where u.id = p_user for no key update;
  if not found then
    return json_build_object('refusal', json_build_object('code', 'unauthorized'));
  end if;
  if p_key is not null then
    v_record := w.key_replay(p_user, p_key, p_key_since);
    if v_record is not null then
      return v_record;
    end if;
  end if;
  return json_build_object('last', v_last, 'next_order', v_next_order);
end
$$
