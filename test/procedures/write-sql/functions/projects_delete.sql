-- projects.delete

create function w.projects_delete (
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
  v_events json[];
  v_open int;
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
  -- The user's open tasks lose those the deletion closes (moved by apply with the events' number).
  select
    coalesce(
      sum(
        ('abandoned' not in ('finished', 'abandoned'))::int - (t.state not in ('finished', 'abandoned'))::int
      ),
      0
    ) into v_open
  from
    tasks t
  where
    t.user_id = p_user
    and t.project_id = v_project.id
    and t.state in ('newed', 'started', 'planned');
  with
    released as (
      update "tasks"
      set
        "started_at" = case case
            when state in ('newed', 'started', 'planned') then 'abandon'
          end
          when 'start' then coalesce(started_at, p_now)
          when 'plan' then coalesce(started_at, p_now)
          when 'cancel' then null
          else started_at
        end,
        "planned_at" = case case
            when state in ('newed', 'started', 'planned') then 'abandon'
          end
          when 'plan' then p_now
          when 'replan' then p_now
          when 'cancel' then null
          else planned_at
        end,
        "finished_at" = case case
            when state in ('newed', 'started', 'planned') then 'abandon'
          end
          when 'replan' then null
          when 'finish' then p_now
          else finished_at
        end,
        "abandoned_at" = case case
            when state in ('newed', 'started', 'planned') then 'abandon'
          end
          when 'abandon' then p_now
          else abandoned_at
        end,
        "planned_count" = case
          when case
            when state in ('newed', 'started', 'planned') then 'abandon'
          end in ('plan', 'replan') then planned_count + 1
          else planned_count
        end,
        "state" = case case
            when state in ('newed', 'started', 'planned') then 'abandon'
          end
          when 'start' then 'started'
          when 'plan' then 'planned'
          when 'replan' then 'planned'
          when 'finish' then 'finished'
          when 'cancel' then 'newed'
          when 'abandon' then 'abandoned'
          else state
        end,
        "project_id" = null,
        "version" = version + 1
      where
        "user_id" = p_user
        and "project_id" = v_project.id
      returning
        *
    )
  select
    array[
      json_build_object(
        'type',
        'project.deleted',
        'data',
        json_build_object('type', 'project', 'id', v_project.id)
      )
    ] || coalesce(
      array_agg(
        json_build_object(
          'type',
          'task.updated',
          'data',
          json_build_object(
            'type',
            'task',
            'id',
            released.id,
            'attributes',
            json_build_object(
              'label',
              released.label,
              'order',
              released."order",
              'plannedCount',
              released.planned_count,
              'state',
              released.state,
              'startedAt',
              coalesce(
                floor(
                  extract(
                    epoch
                    from
                      released.started_at
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
                      released.planned_at
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
                      released.finished_at
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
                      released.abandoned_at
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
                json_build_object('type', 'user', 'id', released.user_id)
              ),
              'project',
              json_build_object(
                'data',
                case
                  when released.project_id is null then null
                  else json_build_object('type', 'project', 'id', released.project_id)
                end
              )
            )
          )
        )
        order by
          released."order",
          released.id
      ),
      '{}'
    ) into v_events
  from
    released;
  delete from "projects" where "user_id" = p_user and "id" = v_project.id;
  return json_build_object('answer', null, 'etag', null, 'events', array_to_json(v_events), 'open', v_open);
end
$$
