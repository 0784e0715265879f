-- tasks.update

create function w.tasks_update (
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
  v_left bigint;
  v_joined projects%rowtype;
  v_label text := p_input->'task'->>'label';
  v_moving boolean := (p_input->'task'->'project_id') is not null;
  v_target bigint := (p_input->'task'->>'project_id')::bigint;
  v_action text;
  v_version int;
  v_document json;
  v_events json[] := '{}';
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
  v_version := v_task.version;
  if v_target is not null then
    select p.* into v_joined from projects p where p.user_id = p_user and p.id = v_target;
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
  v_left := v_task.project_id;
  if v_moving then
    v_action :=
      case
        when v_task.state = 'newed'
        and (
          v_target is null
          or v_joined.state = 'started'
        ) then 'start'
        when v_task.state = 'started'
        and not (
          v_target is null
          or v_joined.state = 'started'
        ) then 'cancel'
      end;
  end if;
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
    "label" = coalesce(v_label, label),
    "project_id" = case
      when v_moving then v_target
      else project_id
    end,
    "version" = version + case
      when (
        v_label is not null
        and label is distinct from v_label
      )
      or (
        v_moving
        and project_id is distinct from v_target
      )
      or v_action is not null then 1
      else 0
    end
  where
    "user_id" = p_user
    and "id" = v_task.id
  returning
    * into v_task;
  -- The projects' documents list their tasks that are not abandoned: an abandoned task's move changes neither.
  if v_left is distinct from v_task.project_id and v_task.state <> 'abandoned' then
    v_events :=
      array(
        select
          json_build_object('type', 'project.updated', 'project', p.id)
        from
          projects p
        where
          p.user_id = p_user
          and p.id in (v_left, v_task.project_id)
        order by
          p.id = v_task.project_id
      );
  end if;
  v_document :=
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
    );
  -- An edit that changes nothing (the version stays) appends nothing.
  if v_task.version <> v_version then
    v_events := v_events || json_build_object('type', 'task.updated', 'data', v_document);
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
      '"t' || v_task.id || '.' || v_task.version || '"',
      'events',
      array_to_json(v_events)
    );
end
$$
