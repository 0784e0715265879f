-- projects.create

create function w.projects_create (
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
  v_events json[];
begin
  if exists (select 1 from projects p where p.user_id = p_user and p.slug = lower(v_name)) then
    raise exception using errcode = 'PX000', message =
      json_build_object(
        'code',
        'taken',
        'validation',
        true,
        'pointer',
        '/project/name',
        'detail',
        'Project name already exists for this user.'
      )::text;
  end if;
  insert into
    "projects" (
      "user_id",
      "name",
      "slug",
      "description",
      "state",
      "created_at"
    )
  select
    p_user,
    v_name,
    lower(v_name),
    '',
    'newed',
    p_now
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
  v_events := array[json_build_object('type', 'project.created', 'data', v_document)];
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
