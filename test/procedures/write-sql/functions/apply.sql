-- apply

create function w.apply (
  p_user bigint,
  p_now timestamptz,
  p_day json,
  p_ops json,
  p_key text,
  p_key_lock bigint,
  p_fingerprint text,
  p_key_since timestamptz,
  p_batch boolean
) returns json language plpgsql volatile as $$
declare
  v_opened json;
  v_op json;
  v_result json;
  v_answers json[] := '{}';
  v_statuses int[] := '{}';
  v_types text[] := '{}';
  v_data json[] := '{}';
  v_notify text;
  v_text text := '';
  v_seq bigint;
  v_answer json;
  v_events json;
  v_open int := 0;
  v_opened_by int;
  v_next_order bigint;
  v_first_order bigint;
  v_orders int;
  v_type text;
  v_datum json;
  v_etag text;
  v_index int := 0;
  v_refusal json;
  v_last bigint;
  v_body json;
  v_input json;
  v_if_match text[];
  v_if_none_match text[];
  v_at json;
  v_refs jsonb := '{}';
  v_count int := 0;
  v_ids bigint[] := '{}';
  v_id bigint;
  v_k int;
  v_project text;
  v_projects jsonb := '{}';
begin
  -- The key is claimed outside the block too, so that it holds while a refusal is kept (a lock held twice is released once).
  if p_key is not null and not pg_try_advisory_xact_lock(p_key_lock) then
    return w.key_busy(p_user, p_key, p_key_since);
  end if;
  -- The user's row locked and updated in one (sub)transaction: no MultiXact (docs/design/writes.md).
  begin
    v_opened := w.key_open(p_user, p_key, p_key_lock, p_key_since);
    if v_opened->'refusal' is not null then
      return json_build_object('refusal', v_opened->'refusal');
    elsif v_opened->'replay' is not null then
      return v_opened;
    end if;
    v_next_order := (v_opened->>'next_order')::bigint;
    v_first_order := v_next_order;
    for v_op in select value from json_array_elements(p_ops) loop
      v_input := v_op->'input';
      if v_op->'refs' is not null then
        for v_at in select value from json_array_elements(v_op->'refs') loop
          v_input :=
            w.json_put (
              v_input,
              array(
                select
                  json_array_elements_text(v_at -> 'at')
              ),
              (v_refs -> (v_at ->> 'ref'))::json
            );
        end loop;
      end if;
      if v_op->>'op' = 'stop' then
        if
          v_input ->> 'task' is not null
          and not exists (
            select
              1
            from
              tasks r
            where
              r.user_id = p_user
              and r.id = (v_input ->> 'task')::bigint
          )
        then
          raise exception using errcode = 'PX000', message =
            json_build_object(
              'code',
              'record_not_found',
              'validation',
              true,
              'pointer',
              '/task',
              'detail',
              'No task with this id exists for the current user.'
            )::text;
        end if;
        if
          v_input ->> 'project' is not null
          and not exists (
            select
              1
            from
              projects r
            where
              r.user_id = p_user
              and r.id = (v_input ->> 'project')::bigint
          )
        then
          raise exception using errcode = 'PX000', message =
            json_build_object(
              'code',
              'record_not_found',
              'validation',
              true,
              'pointer',
              '/project',
              'detail',
              'No project with this id exists for the current user.'
            )::text;
        end if;
        raise exception using errcode = 'PX000', message = '{"stop": true}';
      end if;
      if v_op->>'op' in ('projects.delete') then
        if cardinality(array_remove(v_ids, null)) > 0 then
          for v_k, v_datum in
            select
              e.k,
              (
                '{"type":"project","id":' || p.id || ',"attributes":' || json_build_object(
                  'name',
                  p.name,
                  'slug',
                  p.slug,
                  'description',
                  p.description,
                  'state',
                  p.state,
                  'startedAt',
                  coalesce(
                    floor(
                      extract(
                        epoch
                        from
                          p.started_at
                      )
                    ),
                    0
                  )::float8::bigint,
                  'dueAt',
                  coalesce(
                    floor(
                      extract(
                        epoch
                        from
                          p.due_at
                      )
                    ),
                    0
                  )::float8::bigint,
                  'pausedAt',
                  coalesce(
                    floor(
                      extract(
                        epoch
                        from
                          p.paused_at
                      )
                    ),
                    0
                  )::float8::bigint,
                  'finishedAt',
                  coalesce(
                    floor(
                      extract(
                        epoch
                        from
                          p.finished_at
                      )
                    ),
                    0
                  )::float8::bigint,
                  'isInProgress',
                  p.state in ('started')
                )::text || ',"relationships":{"user":{"data":{"type":"user","id":' || p.user_id || '}},"tasks":{"data":[' || (
                  select
                    case
                      when cardinality(listed.ids) = 0 then ''
                      else '{"type":"task","id":' || array_to_string(listed.ids, '},{"type":"task","id":') || '}'
                    end
                  from
                    (
                      select
                        array(
                          select
                            t.id
                          from
                            tasks t
                          where
                            t.user_id = p_user
                            and t.project_id = p.id
                            and t.state <> 'abandoned'
                          order by
                            t."order",
                            t.id
                        ) as ids
                    ) as listed
                ) || ']}}}'
              )::json
            from
              unnest(v_types, v_data, v_ids) with ordinality as e (type, data, id, k)
              join projects p on p.user_id = p_user
              and p.id = e.id
            where
              e.type is not null
              and e.data is null
          loop
            v_data[v_k] := v_datum;
          end loop;
        end if;
      end if;
            v_if_match := null;
      if json_typeof(v_op->'if_match') = 'array' then
        v_if_match := array(select json_array_elements_text(v_op->'if_match'));
      end if;
      v_if_none_match := null;
      if json_typeof(v_op->'if_none_match') = 'array' then
        v_if_none_match := array(select json_array_elements_text(v_op->'if_none_match'));
      end if;
      v_result :=
        case v_op ->> 'op'
          when 'projects.create' then w.projects_create (
            p_user,
            p_now,
            p_day,
            v_input,
            v_if_match,
            v_if_none_match,
            v_next_order
          )
          when 'projects.update' then w.projects_update (
            p_user,
            p_now,
            p_day,
            v_input,
            v_if_match,
            v_if_none_match,
            v_next_order
          )
          when 'projects.changeState' then w.projects_change_state (
            p_user,
            p_now,
            p_day,
            v_input,
            v_if_match,
            v_if_none_match,
            v_next_order
          )
          when 'projects.delete' then w.projects_delete (
            p_user,
            p_now,
            p_day,
            v_input,
            v_if_match,
            v_if_none_match,
            v_next_order
          )
          when 'tasks.create' then w.tasks_create (
            p_user,
            p_now,
            p_day,
            v_input,
            v_if_match,
            v_if_none_match,
            v_next_order
          )
          when 'tasks.update' then w.tasks_update (
            p_user,
            p_now,
            p_day,
            v_input,
            v_if_match,
            v_if_none_match,
            v_next_order
          )
          when 'tasks.changeState' then w.tasks_change_state (
            p_user,
            p_now,
            p_day,
            v_input,
            v_if_match,
            v_if_none_match,
            v_next_order
          )
          when 'tasks.reorder' then w.tasks_reorder (
            p_user,
            p_now,
            p_day,
            v_input,
            v_if_match,
            v_if_none_match,
            v_next_order
          )
        end;
      if v_result is null then
        raise exception 'unknown operation %', v_op->>'op';
      end if;
      -- Members read in one pass (each -> parses the text again); arrays set in place (|| copies).
      select r.answer, r.etag, r.events, r.open, r.orders into v_answer, v_etag, v_events, v_opened_by, v_orders
        from json_to_record(v_result) as r(answer json, etag text, events json, open int, orders int);
      v_open := v_open + coalesce(v_opened_by, 0);
      v_next_order := v_next_order + coalesce(v_orders, 0);
      v_answers[v_index + 1] := v_answer;
      v_statuses[v_index + 1] := (v_op->>'status')::int;
      for v_type, v_datum, v_id in
        select
          e.type,
          e.data,
          e.project
        from
          json_to_recordset(v_events) as e (type text, data json, project bigint)
      loop
        v_count := v_count + 1;
        v_types[v_count] := v_type;
        v_data[v_count] := v_datum;
        v_ids[v_count] := v_id;
        -- A batch keeps one project.updated a project, its last: the one before is dropped.
        if p_batch and v_type = 'project.updated' then
          v_project := coalesce(v_id::text, v_datum->>'id');
          if v_projects ? v_project then
            v_types[(v_projects->>v_project)::int] := null;
          end if;
          v_projects := v_projects || jsonb_build_object(v_project, v_count);
        end if;
      end loop;
      if v_op->>'ref' is not null then
        v_refs := v_refs || jsonb_build_object(v_op->>'ref', v_answer->'data'->'id');
      end if;
      v_index := v_index + 1;
    end loop;
    if cardinality(array_remove(v_ids, null)) > 0 then
      for v_k, v_datum in
        select
          e.k,
          (
            '{"type":"project","id":' || p.id || ',"attributes":' || json_build_object(
              'name',
              p.name,
              'slug',
              p.slug,
              'description',
              p.description,
              'state',
              p.state,
              'startedAt',
              coalesce(
                floor(
                  extract(
                    epoch
                    from
                      p.started_at
                  )
                ),
                0
              )::float8::bigint,
              'dueAt',
              coalesce(
                floor(
                  extract(
                    epoch
                    from
                      p.due_at
                  )
                ),
                0
              )::float8::bigint,
              'pausedAt',
              coalesce(
                floor(
                  extract(
                    epoch
                    from
                      p.paused_at
                  )
                ),
                0
              )::float8::bigint,
              'finishedAt',
              coalesce(
                floor(
                  extract(
                    epoch
                    from
                      p.finished_at
                  )
                ),
                0
              )::float8::bigint,
              'isInProgress',
              p.state in ('started')
            )::text || ',"relationships":{"user":{"data":{"type":"user","id":' || p.user_id || '}},"tasks":{"data":[' || (
              select
                case
                  when cardinality(listed.ids) = 0 then ''
                  else '{"type":"task","id":' || array_to_string(listed.ids, '},{"type":"task","id":') || '}'
                end
              from
                (
                  select
                    array(
                      select
                        t.id
                      from
                        tasks t
                      where
                        t.user_id = p_user
                        and t.project_id = p.id
                        and t.state <> 'abandoned'
                      order by
                        t."order",
                        t.id
                    ) as ids
                ) as listed
            ) || ']}}}'
          )::json
        from
          unnest(v_types, v_data, v_ids) with ordinality as e (type, data, id, k)
          join projects p on p.user_id = p_user
          and p.id = e.id
        where
          e.type is not null
          and e.data is null
      loop
        v_data[v_k] := v_datum;
      end loop;
    end if;
    -- The events numbered after the user's newest, and the counters, in one update of the user's row.
    v_last := (v_opened->>'last')::bigint;
    v_count := cardinality(array_remove(v_types, null));
    if v_count > 0 or v_open <> 0 or v_next_order <> v_first_order then
      update users u
      set
        last_event_seq = u.last_event_seq + v_count,
        open_tasks = u.open_tasks + v_open,
        next_task_order = v_next_order
      where
        u.id = p_user
      returning
        u.last_event_seq into v_last;
    end if;
    if v_count > 0 then
      insert into events (user_id, seq, type, data, at)
      select p_user, v_last - v_count + row_number() over (order by e.n), e.type, e.data, p_now
        from unnest(v_types, v_data) with ordinality as e(type, data, n)
       where e.type is not null;
    end if;
    -- Queries only where needed: a statement costs more than an expression, under the lock.
    if p_batch then
      v_body :=
        json_build_object(
          'data',
          (
            select
              coalesce(
                json_agg(
                  json_build_object('status', v_statuses[a.n], 'body', a.answer)
                  order by
                    a.n
                ),
                '[]'::json
              )
            from
              unnest(v_answers) with ordinality as a (answer, n)
          )
        );
    else
      v_body := v_answers[1];
    end if;
    if p_key is not null then
      perform
        w.key_keep (
          p_user,
          p_key,
          p_fingerprint,
          case
            when p_batch then 200
            else v_statuses[1]
          end,
          v_body,
          case
            when p_batch then null
            else v_etag
          end,
          p_now
        );
    end if;
    -- The NOTIFY's payload, its events written out only while they fit.
    if v_count > 0 then
      v_notify := p_user || ':' || (v_last - v_count + 1) || ':' || v_last;
      v_seq := v_last - v_count;
      for v_k in 1..cardinality(v_types) loop
        continue when v_types[v_k] is null;
        v_seq := v_seq + 1;
        if octet_length(v_data[v_k]::text) > 7000 then
          v_text := null;
          exit;
        end if;
        v_text :=
          v_text || case
            when v_text = '' then ''
            else ','
          end || json_build_object(
            'id',
            v_seq::text,
            'type',
            v_types[v_k],
            'data',
            v_data[v_k],
            'at',
            floor(
              extract(
                epoch
                from
                  p_now
              )
            )::bigint
          )::text;
        exit when octet_length(v_text) > 7000 - 2;
      end loop;
      if octet_length(v_text) <= 7000 - 2 then
        v_notify := v_notify || ':[' || v_text || ']';
      end if;
    end if;
    return json_build_object('body', v_body, 'etag', case when p_batch then null else v_etag end, 'notify', v_notify);
  exception when sqlstate 'PX000' then
    -- The block undone; a refusal of work that ran is kept under the key, one of the input is not (§11).
    v_refusal := sqlerrm::json;
    if
      p_key is not null
      and v_refusal ->> 'stop' is null
      and v_refusal ->> 'validation' is null
      and not exists (
        select
          1
        from
          json_array_elements(coalesce(v_refusal -> 'errors', '[]')) as e
        where
          e ->> 'validation' is not null
      )
    then
      perform
        w.key_keep (
          p_user,
          p_key,
          p_fingerprint,
          0,
          json_build_object('refusal', v_refusal, 'index', v_index),
          null,
          p_now
        );
    end if;
    return json_build_object('refusal', v_refusal, 'index', v_index);
  end;
end
$$
