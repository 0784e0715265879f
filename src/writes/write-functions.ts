/**
 * The write functions (docs/design/writes.md): every write of a user's projects and tasks is one
 * call of `apply`, which takes the user's lock, runs the operations' functions (each made by its
 * feature from its rule tables), appends their events and keeps the Idempotency-Key's record.
 * The set lives in a schema named by the hash of its text (`w_<hash>`): two versions of the
 * service can run against one database during a deploy.
 */
import { createHash } from 'node:crypto';
import type { Resource } from '../core/resource.js';

/** The arguments every operation's function takes, in this order. */
export const OPERATION_ARGUMENTS = 'p_user bigint, p_now timestamptz, p_day json, p_input json, p_if_match text[], p_if_none_match text[], p_next_order bigint';

/**
 * One write operation (a procedure of §8 that writes) as its function: `body` is the PL/pgSQL
 * from `declare` (or `begin`) to `end`, over OPERATION_ARGUMENTS: `p_day` the user's day
 * (`{"next", "end"}`, src/core/user-day.ts), `p_input` the input as zod parsed it, `p_if_match`
 * If-Match's strong tags and `p_if_none_match` If-None-Match's tags as strong ones (`{*}` for `*`,
 * null when absent), `p_next_order` the order the user's next task takes. It returns json
 * `{"answer", "etag", "events": [{"type", "data"}, …], "open", "orders"}` (`open`: the change of
 * the user's open tasks; `orders`: how many orders it took), or raises a refusal (`refusalSql`).
 */
export interface WriteOperation {
  /** The procedure's path (`tasks.changeState`). */
  op: string;
  /** The function's name in the set's schema. */
  fn: string;
  body: string;
  /** It deletes a project: the documents of the `project.updated` events named so far are written before it runs. */
  deletesProject?: true;
}

/** A write's NOTIFY carries its events when they fit in this many bytes (PostgreSQL's payload is under 8,000). */
const PAYLOAD_BYTES = 7_000;

/** The SQLSTATE of a refusal raised by an operation; its message is the refusal as JSON. */
export const REFUSAL_STATE = 'PX000';

/** What a refusal says: a code of the catalogue (src/core/errors.ts) and where; or several (`errors`). */
export interface Refusal {
  errors?: Refusal[];
  code?: string;
  /** Where one code has several statuses (`record_not_found` on a body member is 422). */
  status?: number;
  pointer?: string;
  parameter?: string;
  detail?: string;
  /** A rule of the input that needs the database (a name taken): kept under no key (API-CONTRACT.md §11). */
  validation?: boolean;
}

/** The statement that raises a refusal; each member is a SQL expression of text. */
export function refusalSql(refusal: RefusalSql): string {
  return `raise exception using errcode = '${REFUSAL_STATE}', message = ${refusalJsonSql(refusal)}::text;`;
}

export interface RefusalSql {
  code: string;
  validation?: true;
  status?: number;
  pointer?: string;
  parameter?: string;
  detail?: string;
}

/** A refusal as a SQL json expression (for `refusalSql`, or gathered with others: `refusalsSql`). */
export function refusalJsonSql(refusal: RefusalSql): string {
  const members = Object.entries(refusal).map(([name, expression]) => `'${name}', ${name === 'code' ? `'${expression}'` : String(expression)}`);
  return `json_build_object(${members.join(', ')})`;
}

/** Raises the refusals gathered in `errors` (a json[] variable) together, when there is one. */
export function refusalsSql(errors: string): string {
  return `if cardinality(${errors}) > 0 then
    raise exception using errcode = '${REFUSAL_STATE}', message = json_build_object('errors', array_to_json(${errors}))::text;
  end if;`;
}

/** A quoted SQL constant of text, for `refusalSql` (constants of the code, never a request's values). */
export const text = (value: string): string => `'${value.replace(/'/g, "''")}'`;

export interface WriteFunctions {
  schema: string;
  /** Every statement that creates the set, in order. */
  statements: string[];
  apply: string;
  /** The first step of every write of a user, and the keeping of its key's outcome (`keyFunctionsSql`). */
  keyOpen: string;
  keyKeep: string;
}

/**
 * `apply(p_user, p_now, p_day, p_ops, p_key, p_key_lock, p_fingerprint, p_key_since, p_batch)`:
 * - `p_ops`: `[{"op", "input", "if_match", "if_none_match", "status", "ref", "refs"}]` in order;
 *   `status` is the success status. In a batch, `ref` names the resource the operation creates
 *   and `refs` (`[{"at": [member, …], "ref"}]`) the ids of its input set to an earlier one's id;
 *   `{"op": "stop"}` ends the batch with the refusal `{"stop": true}` (the next input was refused).
 * - A batch's `project.updated` events of one project are folded into its last (API-CONTRACT.md §15).
 *   One named by its project (`projectUpdatedSql`) gets the project's document here, for all of
 *   them in one statement, after the operations (and before one that `deletesProject`).
 * - `p_key`…`p_key_since`: the Idempotency-Key, its 64-bit lock, the request's fingerprint and
 *   the instant before which a record is expired; all null without a key.
 * - `p_batch`: the answer is the batch's (`{"data": [{"status", "body"}, …]}`).
 *
 * Returns json: `{"replay": {"fingerprint", "status", "body", "etag"}}`; `{"refusal", "index"}`
 * (the operation at `index` refused; without `index`, the write's own: key in use, user gone); or
 * `{"body", "etag", "notify"}`, `notify` the NOTIFY's payload (src/writes/announcer.ts):
 * `<user>:<first>:<last>`, then `:` and the events as the log serves them when they fit in PAYLOAD_BYTES.
 */
/**
 * The stop of a batch (its next input refused): a `task` or `project` id in its input that names
 * no record of the user's, once the operations before it ran, is 404 as that operation alone
 * (src/core/procedures.ts); not kept under the key, like every refusal of an input.
 */
function stopSql(indent: string): string {
  const missing = (resource: Resource, table: string) =>
    `if v_input->>'${resource}' is not null and not exists (select 1 from ${table} r where r.user_id = p_user and r.id = (v_input->>'${resource}')::bigint) then
  ${refusalSql({ code: 'record_not_found', validation: true, pointer: text(`/${resource}`), detail: text(`No ${resource} with this id exists for the current user.`) })}
end if;`;
  return [missing('task', 'tasks'), missing('project', 'projects'), `raise exception using errcode = '${REFUSAL_STATE}', message = '{"stop": true}';`]
    .join('\n')
    .replaceAll('\n', `\n${indent}`);
}

function applySql(schema: string, operations: readonly WriteOperation[], projectDocument: (p: string) => string): string {
  // The documents of the projects the events name, all in one statement (a reorder names dozens).
  const documents = (indent: string) =>
    [
      'if cardinality(array_remove(v_ids, null)) > 0 then',
      `  for v_k, v_datum in select e.k, ${projectDocument('p')}`,
      '      from unnest(v_types, v_data, v_ids) with ordinality as e(type, data, id, k)',
      '      join projects p on p.user_id = p_user and p.id = e.id',
      '     where e.type is not null and e.data is null loop',
      '    v_data[v_k] := v_datum;',
      '  end loop;',
      'end if;',
    ].join(`\n${indent}`);
  const deleting = operations.filter((o) => o.deletesProject).map((o) => text(o.op));
  // A precondition's tags by a query only when there are any: the dispatch below stays an
  // expression, which PL/pgSQL evaluates without re-planning it at every call.
  const tags = (member: string) => `v_${member} := null;
      if json_typeof(v_op->'${member}') = 'array' then
        v_${member} := array(select json_array_elements_text(v_op->'${member}'));
      end if;`;
  const dispatch = operations
    .map((o) => `when ${text(o.op)} then ${schema}.${o.fn}(p_user, p_now, p_day, v_input, v_if_match, v_if_none_match, v_next_order)`)
    .join('\n        ');
  return `create function ${schema}.apply(
  p_user bigint, p_now timestamptz, p_day json, p_ops json, p_key text, p_key_lock bigint, p_fingerprint text, p_key_since timestamptz, p_batch boolean
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
    return ${schema}.key_busy(p_user, p_key, p_key_since);
  end if;
  -- The user's row locked and updated in one (sub)transaction: no MultiXact (docs/design/writes.md).
  begin
    v_opened := ${schema}.key_open(p_user, p_key, p_key_lock, p_key_since);
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
          v_input := ${schema}.json_put(v_input, array(select json_array_elements_text(v_at->'at')), (v_refs->(v_at->>'ref'))::json);
        end loop;
      end if;
      if v_op->>'op' = 'stop' then
        ${stopSql('        ')}
      end if;
      ${deleting.length ? `if v_op->>'op' in (${deleting.join(', ')}) then
        ${documents('        ')}
      end if;
      ` : ''}      ${tags('if_match')}
      ${tags('if_none_match')}
      v_result := case v_op->>'op'
        ${dispatch}
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
      for v_type, v_datum, v_id in select e.type, e.data, e.project from json_to_recordset(v_events) as e(type text, data json, project bigint) loop
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
    ${documents('    ')}
    -- The events numbered after the user's newest, and the counters, in one update of the user's row.
    v_last := (v_opened->>'last')::bigint;
    v_count := cardinality(array_remove(v_types, null));
    if v_count > 0 or v_open <> 0 or v_next_order <> v_first_order then
      update users u set last_event_seq = u.last_event_seq + v_count, open_tasks = u.open_tasks + v_open, next_task_order = v_next_order
       where u.id = p_user returning u.last_event_seq into v_last;
    end if;
    if v_count > 0 then
      insert into events (user_id, seq, type, data, at)
      select p_user, v_last - v_count + row_number() over (order by e.n), e.type, e.data, p_now
        from unnest(v_types, v_data) with ordinality as e(type, data, n)
       where e.type is not null;
    end if;
    -- Queries only where needed: a statement costs more than an expression, under the lock.
    if p_batch then
      v_body := json_build_object('data', (select coalesce(json_agg(json_build_object('status', v_statuses[a.n], 'body', a.answer) order by a.n), '[]'::json)
                                             from unnest(v_answers) with ordinality as a(answer, n)));
    else
      v_body := v_answers[1];
    end if;
    if p_key is not null then
      perform ${schema}.key_keep(p_user, p_key, p_fingerprint, case when p_batch then 200 else v_statuses[1] end, v_body, case when p_batch then null else v_etag end, p_now);
    end if;
    -- The NOTIFY's payload, its events written out only while they fit.
    if v_count > 0 then
      v_notify := p_user || ':' || (v_last - v_count + 1) || ':' || v_last;
      v_seq := v_last - v_count;
      for v_k in 1..cardinality(v_types) loop
        continue when v_types[v_k] is null;
        v_seq := v_seq + 1;
        if octet_length(v_data[v_k]::text) > ${PAYLOAD_BYTES} then
          v_text := null;
          exit;
        end if;
        v_text := v_text || case when v_text = '' then '' else ',' end
          || json_build_object('id', v_seq::text, 'type', v_types[v_k], 'data', v_data[v_k], 'at', floor(extract(epoch from p_now))::bigint)::text;
        exit when octet_length(v_text) > ${PAYLOAD_BYTES} - 2;
      end loop;
      if octet_length(v_text) <= ${PAYLOAD_BYTES} - 2 then
        v_notify := v_notify || ':[' || v_text || ']';
      end if;
    end if;
    return json_build_object('body', v_body, 'etag', case when p_batch then null else v_etag end, 'notify', v_notify);
  exception when sqlstate '${REFUSAL_STATE}' then
    -- The block undone; a refusal of work that ran is kept under the key, one of the input is not (§11).
    v_refusal := sqlerrm::json;
    if p_key is not null and v_refusal->>'stop' is null and v_refusal->>'validation' is null
       and not exists (select 1 from json_array_elements(coalesce(v_refusal->'errors', '[]')) as e where e->>'validation' is not null) then
      perform ${schema}.key_keep(p_user, p_key, p_fingerprint, 0, json_build_object('refusal', v_refusal, 'index', v_index), null, p_now);
    end if;
    return json_build_object('refusal', v_refusal, 'index', v_index);
  end;
end
$$`;
}

/**
 * The first step of every write of a user and the keeping of its key's outcome (API-CONTRACT.md
 * §11), for `apply` and for src/writes/user-write.ts `plainWrite` alike. `key_open`: the key's
 * advisory lock, never waited for (held: the kept outcome's replay if there is one — another replay holds it —,
 * else `request_in_progress`); the user's lock (no row: the
 * user was deleted meanwhile, `unauthorized`); the key's record younger than `p_key_since`
 * (`{"replay"}`); else `{"last", "next_order"}` from the user's row. `key_keep` stores an outcome.
 */
function keyFunctionsSql(schema: string): string[] {
  return [
    `create function ${schema}.key_open(p_user bigint, p_key text, p_key_lock bigint, p_key_since timestamptz) returns json language plpgsql volatile as $$
declare
  v_last bigint;
  v_next_order bigint;
  v_record json;
  v_setting text;
begin
  if p_key is not null and not pg_try_advisory_xact_lock(p_key_lock) then
    return ${schema}.key_busy(p_user, p_key, p_key_since);
  end if;
  v_setting := set_config('lock_timeout', '5000ms', true);
  select u.last_event_seq, u.next_task_order into v_last, v_next_order from users u where u.id = p_user for no key update;
  if not found then
    return json_build_object('refusal', json_build_object('code', 'unauthorized'));
  end if;
  if p_key is not null then
    v_record := ${schema}.key_replay(p_user, p_key, p_key_since);
    if v_record is not null then
      return v_record;
    end if;
  end if;
  return json_build_object('last', v_last, 'next_order', v_next_order);
end
$$`,
    // The key's outcome to replay, if one is kept (else null).
    `create function ${schema}.key_replay(p_user bigint, p_key text, p_key_since timestamptz) returns json language sql stable as $$
  select json_build_object('replay', json_build_object('fingerprint', k.fingerprint, 'status', k.status, 'body', k.body, 'etag', k.etag))
    from idempotency_keys k
   where k.user_id = p_user and k.key = p_key and k.created_at > p_key_since
$$`,
    // The key's lock is held by another request: a replay of a kept outcome (another replay holds it while it reads), else in progress.
    `create function ${schema}.key_busy(p_user bigint, p_key text, p_key_since timestamptz) returns json language sql stable as $$
  select coalesce(${schema}.key_replay(p_user, p_key, p_key_since), json_build_object('refusal', json_build_object('code', 'request_in_progress')))
$$`,
    `create function ${schema}.key_keep(p_user bigint, p_key text, p_fingerprint text, p_status int, p_body json, p_etag text, p_now timestamptz) returns void language sql volatile as $$
  insert into idempotency_keys as k (user_id, key, fingerprint, status, body, etag, created_at)
  values (p_user, p_key, p_fingerprint, p_status, p_body, p_etag, p_now)
  on conflict (user_id, key) do update
    set fingerprint = excluded.fingerprint, status = excluded.status, body = excluded.body, etag = excluded.etag, created_at = excluded.created_at
$$`,
  ];
}

/** `json_put(object, path, value)`: the object with the member at `path` set to `value`, its members in their order (a batch's refs). */
function jsonPutSql(schema: string): string {
  return `create function ${schema}.json_put(p_object json, p_path text[], p_value json) returns json language plpgsql immutable as $$
begin
  if cardinality(p_path) = 0 then
    return p_value;
  end if;
  return (select json_object_agg(e.key, case when e.key = p_path[1] then ${schema}.json_put(e.value, p_path[2:], p_value) else e.value end order by e.n)
            from json_each(p_object) with ordinality as e(key, value, n));
end
$$`;
}

/** The whole set for these operations. */
export function writeFunctions(operations: readonly WriteOperation[], projectDocument: (p: string) => string): WriteFunctions {
  const body = (schema: string) => [
    jsonPutSql(schema),
    ...keyFunctionsSql(schema),
    ...operations.map((o) => `create function ${schema}.${o.fn}(${OPERATION_ARGUMENTS}) returns json language plpgsql volatile as $$\n${o.body}\n$$`),
    applySql(schema, operations, projectDocument),
  ];
  // The name is the hash of the text with a placeholder for itself.
  const schema = `w_${createHash('sha256').update(body('w').join(';\n')).digest('hex').slice(0, 16)}`;
  return { schema, statements: [`create schema ${schema}`, ...body(schema)], apply: `${schema}.apply`, keyOpen: `${schema}.key_open`, keyKeep: `${schema}.key_keep` };
}

/**
 * Installs the set unless its schema exists, through `run` (a connection holding the migration
 * lock, in a transaction). On Citus, `apply` is distributed by the user's id, co-located with
 * `users`, so a call is delegated whole to the user's node (designed for; CI has no Citus).
 */
export async function installWriteFunctions(run: (sql: string) => Promise<Array<Record<string, unknown>>>, functions: WriteFunctions): Promise<boolean> {
  const found = await run(`select 1 from pg_namespace where nspname = '${functions.schema}'`);
  if (found.length > 0) return false;
  for (const statement of functions.statements) await run(statement);
  const citus = await run(`select 1 from pg_extension where extname = 'citus'`);
  if (citus.length > 0) {
    await run(`select create_distributed_function('${functions.apply}(bigint, timestamptz, json, json, text, bigint, text, timestamptz, boolean)', '$1', colocate_with := 'users')`);
  }
  return true;
}
