-- projects.update

create function w.projects_update (
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
  v_name text := p_input->'project'->>'name';
  v_description text := p_input->'project'->>'description';
  v_due_seconds bigint := (p_input->'project'->>'due_at')::bigint;
  v_due timestamptz := to_timestamp(v_due_seconds::float8);
  v_due_changes boolean := false;
  v_errors json[] := '{}';
  v_events json[];
  v_version int;
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
  v_version := v_project.version;
  -- Two conditions, not one joined by "and": a query behind a test of the input is planned again at
  -- every call (its custom plan, the test folded away, beats the generic one).
  if v_name is not null then
    if
      exists (
        select
          1
        from
          projects p
        where
          p.user_id = p_user
          and p.slug = lower(v_name)
          and p.id <> v_project.id
      )
    then
      v_errors :=
        v_errors || json_build_object(
          'code',
          'taken',
          'validation',
          true,
          'pointer',
          '/project/name',
          'detail',
          'Project name already exists for this user.'
        );
    end if;
  end if;
  if
    v_due_seconds is not null
    and v_due_seconds <> coalesce(
      floor(
        extract(
          epoch
          from
            v_project.due_at
        )
      )::bigint,
      0
    )
  then
    if v_project.state not in ('started') or v_project.started_at is null then
      v_errors :=
        v_errors || json_build_object(
          'code',
          'cannot_be_set',
          'pointer',
          '/project/due_at',
          'detail',
          'due_at can only be changed while the project is started.'
        );
    elsif v_due < v_project.started_at then
      v_errors :=
        v_errors || json_build_object(
          'code',
          'cannot_be_before_started_at',
          'pointer',
          '/project/due_at',
          'detail',
          'due_at cannot be before the project started.'
        );
    else
      v_due_changes := true;
    end if;
  end if;
  if cardinality(v_errors) > 0 then
    raise exception using errcode = 'PX000', message = json_build_object('errors', array_to_json(v_errors))::text;
  end if;
  update "projects"
  set
    "name" = coalesce(v_name, name),
    "slug" = coalesce(lower(v_name), slug),
    "description" = coalesce(v_description, description),
    "due_at" = case
      when v_due_changes then v_due
      else due_at
    end,
    "version" = version + case
      when (
        v_name is not null
        and name is distinct from v_name
      )
      or (
        v_description is not null
        and description is distinct from v_description
      )
      or v_due_changes then 1
      else 0
    end
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
  -- An edit that changes nothing (the version stays) appends nothing.
  if v_project.version = v_version then
    v_events := '{}';
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
