-- apply

create function w.apply(
  p_user bigint, p_now timestamptz, p_day json, p_ops json, p_key text, p_key_lock bigint, p_fingerprint text, p_key_since timestamptz, p_batch boolean
) returns json language plpgsql volatile as $$
declare
  v_record json;
  v_op json;
  v_result json;
  v_answers json[] := '{}';
  v_statuses int[] := '{}';
  v_events json[] := '{}';
  v_etag text;
  v_index int := 0;
  v_refusal json;
  v_last bigint;
  v_body json;
  v_input json;
  v_at json;
  v_refs jsonb := '{}';
begin
  -- The key first, never waited for: a request with the same key running is 409 at once.
  if p_key is not null and not pg_try_advisory_xact_lock(p_key_lock) then
    return json_build_object('refusal', json_build_object('code', 'request_in_progress'), 'index', 0);
  end if;
  -- The user's lock, taken first by every write of the user, held until the commit.
  perform set_config('lock_timeout', '5000ms', true);
  select u.last_event_seq into v_last from users u where u.id = p_user for no key update;
  -- No user: deleted since its token was read (a deletion holds this lock while it runs, and
  -- a write that waited for it finds no row): refused as its token now is.
  if not found then
    return json_build_object('refusal', json_build_object('code', 'unauthorized'), 'index', 0);
  end if;
  if p_key is not null then
    select json_build_object('fingerprint', k.fingerprint, 'status', k.status, 'body', k.body, 'etag', k.etag) into v_record
      from idempotency_keys k
     where k.user_id = p_user and k.key = p_key and k.created_at > p_key_since;
    if v_record is not null then
      return json_build_object('replay', v_record);
    end if;
  end if;
  begin
    for v_op in select value from json_array_elements(p_ops) loop
      if v_op->>'op' = 'stop' then
        raise exception using errcode = 'PX000', message = '{"stop": true}';
      end if;
      v_input := v_op->'input';
      for v_at in select value from json_array_elements(coalesce(v_op->'refs', '[]')) loop
        v_input := w.json_put(v_input, array(select json_array_elements_text(v_at->'at')), (v_refs->(v_at->>'ref'))::json);
      end loop;
      v_result := case v_op->>'op'
        when 'projects.create' then w.projects_create(p_user, p_now, p_day, v_input, case when json_typeof(v_op->'if_match') = 'array' then array(select json_array_elements_text(v_op->'if_match')) end)
        when 'projects.update' then w.projects_update(p_user, p_now, p_day, v_input, case when json_typeof(v_op->'if_match') = 'array' then array(select json_array_elements_text(v_op->'if_match')) end)
        when 'projects.changeState' then w.projects_change_state(p_user, p_now, p_day, v_input, case when json_typeof(v_op->'if_match') = 'array' then array(select json_array_elements_text(v_op->'if_match')) end)
        when 'projects.delete' then w.projects_delete(p_user, p_now, p_day, v_input, case when json_typeof(v_op->'if_match') = 'array' then array(select json_array_elements_text(v_op->'if_match')) end)
        when 'tasks.create' then w.tasks_create(p_user, p_now, p_day, v_input, case when json_typeof(v_op->'if_match') = 'array' then array(select json_array_elements_text(v_op->'if_match')) end)
        when 'tasks.update' then w.tasks_update(p_user, p_now, p_day, v_input, case when json_typeof(v_op->'if_match') = 'array' then array(select json_array_elements_text(v_op->'if_match')) end)
        when 'tasks.changeState' then w.tasks_change_state(p_user, p_now, p_day, v_input, case when json_typeof(v_op->'if_match') = 'array' then array(select json_array_elements_text(v_op->'if_match')) end)
        when 'tasks.reorder' then w.tasks_reorder(p_user, p_now, p_day, v_input, case when json_typeof(v_op->'if_match') = 'array' then array(select json_array_elements_text(v_op->'if_match')) end)
      end;
      if v_result is null then
        raise exception 'unknown operation %', v_op->>'op';
      end if;
      v_answers := v_answers || (v_result->'answer');
      v_statuses := v_statuses || (v_op->>'status')::int;
      v_events := v_events || array(select json_array_elements(v_result->'events'));
      v_etag := v_result->>'etag';
      if v_op->>'ref' is not null then
        v_refs := v_refs || jsonb_build_object(v_op->>'ref', v_result->'answer'->'data'->'id');
      end if;
      v_index := v_index + 1;
    end loop;
  exception when sqlstate 'PX000' then
    -- Everything the operations did is undone with this block; a refusal of work that ran is
    -- kept under the key (API-CONTRACT.md §11).
    v_refusal := sqlerrm::json;
    if p_key is not null and v_refusal->>'stop' is null then
      insert into idempotency_keys as k (user_id, key, fingerprint, status, body, etag, created_at)
      values (p_user, p_key, p_fingerprint, 0, json_build_object('refusal', v_refusal, 'index', v_index), null, p_now)
      on conflict (user_id, key) do update
        set fingerprint = excluded.fingerprint, status = excluded.status, body = excluded.body, etag = excluded.etag, created_at = excluded.created_at;
    end if;
    return json_build_object('refusal', v_refusal, 'index', v_index);
  end;
  if p_batch and cardinality(v_events) > 1 then
    v_events := array(
      select e.event from (
        select e.event, e.n, max(e.n) over (partition by e.event->>'type', e.event->'data'->>'id') as last
          from unnest(v_events) with ordinality as e(event, n)) as e
       where e.event->>'type' <> 'project.updated' or e.n = e.last
       order by e.n);
  end if;
  if cardinality(v_events) > 0 then
    update users u set last_event_seq = u.last_event_seq + cardinality(v_events) where u.id = p_user returning u.last_event_seq into v_last;
    insert into events (user_id, seq, type, data, at)
    select p_user, v_last - cardinality(v_events) + e.n, e.event->>'type', e.event->'data', p_now
      from unnest(v_events) with ordinality as e(event, n);
  end if;
  v_body := case when p_batch
    then json_build_object('data', (select coalesce(json_agg(json_build_object('status', v_statuses[a.n], 'body', a.answer) order by a.n), '[]'::json)
                                      from unnest(v_answers) with ordinality as a(answer, n)))
    else v_answers[1] end;
  if p_key is not null then
    insert into idempotency_keys as k (user_id, key, fingerprint, status, body, etag, created_at)
    values (p_user, p_key, p_fingerprint, case when p_batch then 200 else v_statuses[1] end, v_body, case when p_batch then null else v_etag end, p_now)
    on conflict (user_id, key) do update
      set fingerprint = excluded.fingerprint, status = excluded.status, body = excluded.body, etag = excluded.etag, created_at = excluded.created_at;
  end if;
  return json_build_object('body', v_body, 'etag', case when p_batch then null else v_etag end, 'last', v_last, 'events', array_to_json(v_events));
end
$$
