-- tasks.reorder

create function w.tasks_reorder (
  p_user bigint,
  p_now timestamptz,
  p_day json,
  p_input json,
  p_if_match text[],
  p_if_none_match text[],
  p_next_order bigint
) returns json language plpgsql volatile as $$
declare
  v_task tasks%rowtype;
  v_to bigint;
  v_events json[];
  v_answer json;
begin
  select t.* into v_task from tasks t where t.user_id = p_user and t.id = (p_input->>'id')::bigint;
  if not found then
    raise exception using errcode = 'PX000', message =
      json_build_object(
        'code',
        'record_not_found',
        'pointer',
        '/task',
        'detail',
        'No task with this id exists for the current user.'
      )::text;
  end if;
  if
    p_if_match is not null
    and not (
      '*' = any (p_if_match)
      or '"t' || v_task.id || '.' || v_task.version || '"' = any (p_if_match)
    )
  then
    raise exception using errcode = 'PX000', message =
      json_build_object(
        'code',
        'precondition_failed',
        'parameter',
        'If-Match'
      )::text;
  end if;
  if
    p_if_none_match is not null
    and (
      '*' = any (p_if_none_match)
      or '"t' || v_task.id || '.' || v_task.version || '"' = any (p_if_none_match)
    )
  then
    raise exception using errcode = 'PX000', message =
      json_build_object(
        'code',
        'precondition_failed',
        'parameter',
        'If-None-Match',
        'detail',
        'The resource is still at a version named by If-None-Match.'
      )::text;
  end if;
  -- numeric: an order beyond bigint's range is clamped too.
  v_to := least((p_input->'task'->>'order')::numeric, p_next_order - 1);
  if v_to = v_task."order" then
    return
      json_build_object(
        'answer',
        json_build_object(
          'data',
          json_build_array(
            json_build_object(
              'type',
              'task',
              'id',
              v_task.id,
              'attributes',
              json_build_object('order', v_task."order")
            )
          ),
          'meta',
          json_build_object(
            'stability',
            'unstable',
            'notice',
            'This output may change soon.'
          )
        ),
        'etag',
        null,
        'events',
        '[]'::json
      );
  end if;
  update "tasks"
  set
    "order" = case
      when id = v_task.id then v_to
      when v_to < v_task."order" then "order" + 1
      else "order" - 1
    end,
    "version" = version + 1
  where
    "user_id" = p_user
    and "order" between least(v_task."order", v_to) and greatest(v_task."order", v_to);
  select
    json_agg(
      json_build_object(
        'type',
        'task',
        'id',
        t.id,
        'attributes',
        json_build_object('order', t."order")
      )
      order by
        t."order",
        t.id
    ) into v_answer
  from
    tasks t
  where
    t.user_id = p_user
    and t."order" between least(v_task."order", v_to) and greatest(v_task."order", v_to);
  v_events :=
    array(
      select
        e.event
      from
        (
          select
            t."order" as at,
            0 as after,
            json_build_object(
              'type',
              'task.updated',
              'data',
              json_build_object(
                'type',
                'task',
                'id',
                t.id,
                'attributes',
                json_build_object(
                  'label',
                  t.label,
                  'order',
                  t."order",
                  'plannedCount',
                  t.planned_count,
                  'state',
                  t.state,
                  'startedAt',
                  coalesce(
                    floor(
                      extract(
                        epoch
                        from
                          t.started_at
                      )
                    ),
                    0
                  )::float8::bigint,
                  'plannedAt',
                  coalesce(
                    floor(
                      extract(
                        epoch
                        from
                          t.planned_at
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
                          t.finished_at
                      )
                    ),
                    0
                  )::float8::bigint,
                  'abandonedAt',
                  coalesce(
                    floor(
                      extract(
                        epoch
                        from
                          t.abandoned_at
                      )
                    ),
                    0
                  )::float8::bigint
                ),
                'relationships',
                json_build_object(
                  'user',
                  json_build_object(
                    'data',
                    json_build_object('type', 'user', 'id', t.user_id)
                  ),
                  'project',
                  json_build_object(
                    'data',
                    case
                      when t.project_id is null then null
                      else json_build_object('type', 'project', 'id', t.project_id)
                    end
                  )
                )
              )
            ) as event
          from
            tasks t
          where
            t.user_id = p_user
            and t."order" between least(v_task."order", v_to) and greatest(v_task."order", v_to)
          union all
          select
            f.first,
            1,
            json_build_object('type', 'project.updated', 'project', p.id)
          from
            (
              select
                t.project_id,
                min(t."order") as first
              from
                tasks t
              where
                t.user_id = p_user
                and t."order" between least(v_task."order", v_to) and greatest(v_task."order", v_to)
                and t.project_id = v_task.project_id
                and t.state <> 'abandoned'
                and v_task.state <> 'abandoned'
              group by
                t.project_id
              having
                count(*) > 1
            ) as f
            join projects p on p.user_id = p_user
            and p.id = f.project_id
        ) as e
      order by
        e.at,
        e.after
    );
  return
    json_build_object(
      'answer',
      json_build_object(
        'data',
        v_answer,
        'meta',
        json_build_object(
          'stability',
          'unstable',
          'notice',
          'This output may change soon.'
        )
      ),
      'etag',
      null,
      'events',
      array_to_json(v_events)
    );
end
$$
