-- projects.changeState

create function w.projects_change_state (
  p_user bigint,
  p_now timestamptz,
  p_day json,
  p_input json,
  p_if_match text[],
  p_if_none_match text[],
  p_next_order bigint
) returns json language plpgsql volatile as $$
declare
  v_project projects%rowtype;
  v_ids bigint[];
  v_document json;
  v_to text := p_input->'project'->>'state';
  v_transition text;
  v_member text;
  v_due timestamptz := to_timestamp((p_input->'project'->>'due_at')::float8);
  v_finished timestamptz := to_timestamp((p_input->'project'->>'finished_at')::float8);
  v_task_action text;
  v_task_states text[];
  v_events json[];
begin
  select p.* into v_project from projects p where p.user_id = p_user and p.id = (p_input->>'id')::bigint;
  if not found then
    raise exception using errcode = 'PX000', message =
      json_build_object(
        'code',
        'record_not_found',
        'pointer',
        '/project',
        'detail',
        'No project with this id exists for the current user.'
      )::text;
  end if;
  v_ids :=
    array(
      select
        t.id
      from
        tasks t
      where
        t.user_id = p_user
        and t.project_id = v_project.id
        and t.state <> 'abandoned'
      order by
        t."order",
        t.id
    );
  if
    p_if_match is not null
    and not (
      '*' = any (p_if_match)
      or '"p' || v_project.id || '.' || v_project.version || '.' || translate(
        left(
          encode(
            sha256(convert_to(array_to_string(v_ids, ','), 'UTF8')),
            'base64'
          ),
          16
        ),
        '+/',
        '-_'
      ) || '"' = any (p_if_match)
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
      or '"p' || v_project.id || '.' || v_project.version || '.' || translate(
        left(
          encode(
            sha256(convert_to(array_to_string(v_ids, ','), 'UTF8')),
            'base64'
          ),
          16
        ),
        '+/',
        '-_'
      ) || '"' = any (p_if_none_match)
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
  v_transition :=
    case
      when v_project.state = 'newed'
      and v_to = 'started' then 'start'
      when v_project.state = 'started'
      and v_to = 'paused' then 'pause'
      when v_project.state = 'paused'
      and v_to = 'started' then 'restart'
      when v_project.state = 'started'
      and v_to = 'finished' then 'finish'
    end;
  if v_transition is null then
    raise exception using errcode = 'PX000', message =
      json_build_object(
        'code',
        'invalid_transition',
        'pointer',
        '/project/state',
        'detail',
        'A ' || v_project.state || ' project cannot become ' || v_to || '.'
      )::text;
  end if;
  if (p_input->'project')::jsonb - array['state', 'due_at', 'finished_at'] <> '{}'::jsonb then
    select
      m into v_member
    from
      json_object_keys(p_input -> 'project') as m
    where
      m not in ('state', 'due_at', 'finished_at')
    limit
      1;
    raise exception using errcode = 'PX000', message =
      json_build_object(
        'code',
        'cannot_be_set',
        'pointer',
        '/project/' || replace(replace(v_member, '~', '~0'), '/', '~1'),
        'detail',
        v_member || ' cannot be set when changing the state.'
      )::text;
  end if;
  if v_due is not null and v_transition in ('pause', 'finish') then
    raise exception using errcode = 'PX000', message =
      json_build_object(
        'code',
        'cannot_be_set',
        'pointer',
        '/project/due_at',
        'detail',
        'due_at cannot be set on ' || v_transition || '.'
      )::text;
  end if;
  if v_finished is not null and v_transition in ('start', 'pause', 'restart') then
    raise exception using errcode = 'PX000', message =
      json_build_object(
        'code',
        'cannot_be_set',
        'pointer',
        '/project/finished_at',
        'detail',
        'finished_at cannot be set on ' || v_transition || '.'
      )::text;
  end if;
  if v_due is null and v_transition in ('start') then
    raise exception using errcode = 'PX000', message =
      json_build_object(
        'code',
        'must_be_set',
        'pointer',
        '/project/due_at',
        'detail',
        'due_at must be set on ' || v_transition || '.'
      )::text;
  end if;
  if v_due < (p_day->>'next')::timestamptz then
    raise exception using errcode = 'PX000', message =
      json_build_object(
        'code',
        'cannot_be_before_started_at',
        'pointer',
        '/project/due_at',
        'detail',
        'due_at must be after today.'
      )::text;
  end if;
  if v_finished < v_project.started_at then
    raise exception using errcode = 'PX000', message =
      json_build_object(
        'code',
        'cannot_be_before_started_at',
        'pointer',
        '/project/finished_at',
        'detail',
        'finished_at cannot be before the project started.'
      )::text;
  end if;
  if v_finished > (p_day->>'end')::timestamptz then
    raise exception using errcode = 'PX000', message =
      json_build_object(
        'code',
        'cannot_be_after_today',
        'pointer',
        '/project/finished_at',
        'detail',
        'finished_at cannot be after today.'
      )::text;
  end if;
  if v_transition in ('start', 'restart')
     and (select count(*) from projects p where p.user_id = p_user and p.state = 'started') >= 3 then
    raise exception using errcode = 'PX000', message =
      json_build_object(
        'code',
        'reached_max_started',
        'pointer',
        '/project/state',
        'detail',
        'At most 3 projects can be started at the same time.'
      )::text;
  end if;
  update "projects"
  set
    "started_at" = case v_transition
      when 'start' then p_now
      else started_at
    end,
    "due_at" = case v_transition
      when 'start' then v_due
      when 'restart' then coalesce(v_due, due_at)
      else due_at
    end,
    "paused_at" = case v_transition
      when 'pause' then p_now
      when 'restart' then null
      else paused_at
    end,
    "finished_at" = case v_transition
      when 'finish' then coalesce(v_finished, p_now)
      else finished_at
    end,
    "state" = case v_transition
      when 'start' then 'started'
      when 'pause' then 'paused'
      when 'restart' then 'started'
      when 'finish' then 'finished'
      else state
    end,
    "version" = version + 1
  where
    "user_id" = p_user
    and "id" = v_project.id
  returning
    * into v_project;
  v_ids :=
    array(
      select
        t.id
      from
        tasks t
      where
        t.user_id = p_user
        and t.project_id = v_project.id
        and t.state <> 'abandoned'
      order by
        t."order",
        t.id
    );
  v_document :=
    (
      '{"type":"project","id":' || v_project.id || ',"attributes":' || json_build_object(
        'name',
        v_project.name,
        'slug',
        v_project.slug,
        'description',
        v_project.description,
        'state',
        v_project.state,
        'startedAt',
        coalesce(
          floor(
            extract(
              epoch
              from
                v_project.started_at
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
                v_project.due_at
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
                v_project.paused_at
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
                v_project.finished_at
            )
          ),
          0
        )::float8::bigint,
        'isInProgress',
        v_project.state in ('started')
      )::text || ',"relationships":{"user":{"data":{"type":"user","id":' || v_project.user_id || '}},"tasks":{"data":[' || (
        select
          case
            when cardinality(listed.ids) = 0 then ''
            else '{"type":"task","id":' || array_to_string(listed.ids, '},{"type":"task","id":') || '}'
          end
        from
          (
            select
              v_ids as ids
          ) as listed
      ) || ']}}}'
    )::json;
  v_events := array[json_build_object('type', 'project.updated', 'data', v_document)];
  v_task_action :=
    case v_transition
      when 'start' then 'start'
      when 'pause' then 'cancel'
      when 'restart' then 'start'
      else null
    end;
  v_task_states :=
    case v_transition
      when 'start' then array['newed']
      when 'pause' then array['started']
      when 'restart' then array['newed']
      else null
    end;
  if v_task_action is not null then
    with
      moved as (
        update "tasks"
        set
          "started_at" = case v_task_action
            when 'start' then coalesce(started_at, p_now)
            when 'plan' then coalesce(started_at, p_now)
            when 'cancel' then null
            else started_at
          end,
          "planned_at" = case v_task_action
            when 'plan' then p_now
            when 'replan' then p_now
            when 'cancel' then null
            else planned_at
          end,
          "finished_at" = case v_task_action
            when 'replan' then null
            when 'finish' then p_now
            else finished_at
          end,
          "abandoned_at" = case v_task_action
            when 'abandon' then p_now
            else abandoned_at
          end,
          "planned_count" = case
            when v_task_action in ('plan', 'replan') then planned_count + 1
            else planned_count
          end,
          "state" = case v_task_action
            when 'start' then 'started'
            when 'plan' then 'planned'
            when 'replan' then 'planned'
            when 'finish' then 'finished'
            when 'cancel' then 'newed'
            when 'abandon' then 'abandoned'
            else state
          end,
          "version" = version + 1
        where
          "user_id" = p_user
          and "project_id" = v_project.id
          and state = any (v_task_states)
        returning
          *
      )
    select
      v_events || coalesce(
        array_agg(
          json_build_object(
            'type',
            'task.updated',
            'data',
            json_build_object(
              'type',
              'task',
              'id',
              moved.id,
              'attributes',
              json_build_object(
                'label',
                moved.label,
                'order',
                moved."order",
                'plannedCount',
                moved.planned_count,
                'state',
                moved.state,
                'startedAt',
                coalesce(
                  floor(
                    extract(
                      epoch
                      from
                        moved.started_at
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
                        moved.planned_at
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
                        moved.finished_at
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
                        moved.abandoned_at
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
                  json_build_object('type', 'user', 'id', moved.user_id)
                ),
                'project',
                json_build_object(
                  'data',
                  case
                    when moved.project_id is null then null
                    else json_build_object('type', 'project', 'id', moved.project_id)
                  end
                )
              )
            )
          )
          order by
            moved."order",
            moved.id
        ),
        '{}'
      ) into v_events
    from
      moved;
  end if;
  return
    json_build_object(
      'answer',
      json_build_object(
        'data',
        v_document,
        'meta',
        json_build_object(
          'stability',
          'unstable',
          'notice',
          'This output may change soon.'
        )
      ),
      'etag',
      '"p' || v_project.id || '.' || v_project.version || '.' || translate(
        left(
          encode(
            sha256(convert_to(array_to_string(v_ids, ','), 'UTF8')),
            'base64'
          ),
          16
        ),
        '+/',
        '-_'
      ) || '"',
      'events',
      array_to_json(v_events)
    );
end
$$
