-- tasks.changeState

create function w.tasks_change_state (
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
  v_to text := p_input->'task'->>'state';
  v_action text;
  v_from text;
  v_member text;
  v_events json[];
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
  v_action :=
    case
      when v_to = 'started'
      and v_task.state in ('newed') then 'start'
      when v_to = 'planned'
      and v_task.state in ('newed', 'started') then 'plan'
      when v_to = 'planned'
      and v_task.state in ('planned', 'finished') then 'replan'
      when v_to = 'finished'
      and v_task.state in ('planned') then 'finish'
      when v_to = 'newed'
      and v_task.state in ('started', 'planned') then 'cancel'
      when v_to = 'abandoned'
      and v_task.state in ('newed', 'started', 'planned') then 'abandon'
    end;
  if v_action is null then
    raise exception using errcode = 'PX000', message =
      json_build_object(
        'code',
        'invalid_transition',
        'pointer',
        '/task/state',
        'detail',
        case
          when v_task.state = 'abandoned' then 'An '
          else 'A '
        end || v_task.state || ' task cannot become ' || v_to || '.'
      )::text;
  end if;
  -- A plain expression, not a query, on the path every write takes; the member is named on refusal.
  if (p_input->'task')::jsonb - 'state' <> '{}'::jsonb then
    select m into v_member from json_object_keys(p_input->'task') as m where m <> 'state' limit 1;
    raise exception using errcode = 'PX000', message =
      json_build_object(
        'code',
        'cannot_be_set',
        'pointer',
        '/task/' || replace(replace(v_member, '~', '~0'), '/', '~1'),
        'detail',
        v_member || ' cannot be set when changing the state.'
      )::text;
  end if;
  v_from := v_task.state;
  update "tasks"
  set
    "started_at" = case v_action
      when 'start' then coalesce(started_at, p_now)
      when 'plan' then coalesce(started_at, p_now)
      when 'cancel' then null
      else started_at
    end,
    "planned_at" = case v_action
      when 'plan' then p_now
      when 'replan' then p_now
      when 'cancel' then null
      else planned_at
    end,
    "finished_at" = case v_action
      when 'replan' then null
      when 'finish' then p_now
      else finished_at
    end,
    "abandoned_at" = case v_action
      when 'abandon' then p_now
      else abandoned_at
    end,
    "planned_count" = case
      when v_action in ('plan', 'replan') then planned_count + 1
      else planned_count
    end,
    "state" = case v_action
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
    and "id" = v_task.id
  returning
    * into v_task;
  v_events :=
    array[
      json_build_object(
        'type',
        'task.updated',
        'data',
        json_build_object(
          'type',
          'task',
          'id',
          v_task.id,
          'attributes',
          json_build_object(
            'label',
            v_task.label,
            'order',
            v_task."order",
            'plannedCount',
            v_task.planned_count,
            'state',
            v_task.state,
            'startedAt',
            coalesce(
              floor(
                extract(
                  epoch
                  from
                    v_task.started_at
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
                    v_task.planned_at
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
                    v_task.finished_at
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
                    v_task.abandoned_at
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
              json_build_object('type', 'user', 'id', v_task.user_id)
            ),
            'project',
            json_build_object(
              'data',
              case
                when v_task.project_id is null then null
                else json_build_object('type', 'project', 'id', v_task.project_id)
              end
            )
          )
        )
      )
    ];
  if v_task.state = 'abandoned' and v_task.project_id is not null then
    v_events := v_events || array(
      select json_build_object('type', 'project.updated', 'project', p.id)
        from projects p where p.user_id = p_user and p.id = v_task.project_id);
  end if;
  return
    json_build_object(
      'answer',
      json_build_object(
        'data',
        v_events[1] -> 'data',
        'meta',
        json_build_object(
          'stability',
          'unstable',
          'notice',
          'This output may change soon.'
        )
      ),
      'etag',
      '"t' || v_task.id || '.' || v_task.version || '"',
      'events',
      array_to_json(v_events),
      'open',
      (v_task.state not in ('finished', 'abandoned'))::int - (v_from not in ('finished', 'abandoned'))::int
    );
end
$$
