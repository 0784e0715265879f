-- tasks.create

create function w.tasks_create (
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
  v_project projects%rowtype;
  v_project_id bigint := (p_input->'task'->>'project_id')::bigint;
  v_planned_at timestamptz := to_timestamp((p_input->'task'->>'planned_at')::float8);
  v_action text;
  v_events json[];
begin
  if v_project_id is not null then
    select p.* into v_project from projects p where p.user_id = p_user and p.id = v_project_id;
    if not found then
      raise exception using errcode = 'PX000', message =
        json_build_object(
          'code',
          'record_not_found',
          'validation',
          true,
          'status',
          422,
          'pointer',
          '/task/project_id',
          'detail',
          'No project with this id exists for the current user.'
        )::text;
    end if;
  end if;
  v_action :=
    case
      when v_planned_at is not null then 'plan'
      when (v_project.state = 'started') is not null
      and not (v_project.state = 'started') then null
      when true then 'start'
    end;
  insert into
    "tasks" (
      "user_id",
      "order",
      "project_id",
      "label",
      "planned_count",
      "state",
      "started_at",
      "planned_at",
      "finished_at",
      "abandoned_at",
      "created_at"
    )
  select
    p_user,
    p_next_order,
    v_project.id,
    p_input -> 'task' ->> 'label',
    case
      when v_action in ('plan', 'replan') then planned_count + 1
      else planned_count
    end,
    case v_action
      when 'start' then 'started'
      when 'plan' then 'planned'
      when 'replan' then 'planned'
      when 'finish' then 'finished'
      when 'cancel' then 'newed'
      when 'abandon' then 'abandoned'
      else state
    end,
    case v_action
      when 'start' then coalesce(started_at, p_now)
      when 'plan' then coalesce(started_at, p_now)
      when 'cancel' then null
      else started_at
    end,
    coalesce(
      v_planned_at,
      case v_action
        when 'plan' then p_now
        when 'replan' then p_now
        when 'cancel' then null
        else planned_at
      end
    ),
    case v_action
      when 'replan' then null
      when 'finish' then p_now
      else finished_at
    end,
    case v_action
      when 'abandon' then p_now
      else abandoned_at
    end,
    p_now
  from
    (
      select
        null::timestamptz as started_at,
        null::timestamptz as planned_at,
        null::timestamptz as finished_at,
        null::timestamptz as abandoned_at,
        0 as planned_count,
        'newed'::text as state
    ) as blank
  returning
    * into v_task;
  v_events :=
    array[
      json_build_object(
        'type',
        'task.created',
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
  if v_project.id is not null then
    v_events := v_events || json_build_object('type', 'project.updated', 'project', v_project.id);
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
      (v_task.state not in ('finished', 'abandoned'))::int,
      'orders',
      1
    );
end
$$
