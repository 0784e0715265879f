/**
 * The write functions (docs/design/writes.md): every write of a user's projects and tasks is
 * one call of `apply`, a PL/pgSQL function that takes the user's lock, runs the operations'
 * functions in order, appends their events, keeps the Idempotency-Key's record and answers,
 * all in one statement's transaction. Each operation's function is made by its feature from
 * its rule tables (`WriteOperation`); this file makes `apply` around them and installs the set.
 *
 * The set is installed under a schema named by the hash of its text (`w_<hash>`), once, under
 * the migration lock: a service of another version finds its own schema, so two versions can
 * run against one database during a deploy, and nothing is replaced under a running one.
 */
import { createHash } from 'node:crypto';

/** The arguments every operation's function takes, in this order. */
export const OPERATION_ARGUMENTS = 'p_user bigint, p_now timestamptz, p_day json, p_input json, p_if_match text[], p_if_none_match text[], p_next_order bigint';

/**
 * One write operation (a procedure of §8 that writes), as its function: `body` is the PL/pgSQL
 * from `declare` (or `begin`) to `end`, over OPERATION_ARGUMENTS: `p_day` the user's day in
 * their time zone (`{"next": <the first instant of tomorrow>, "end": <the last of today>}`,
 * src/core/user-day.ts, as the rules of "today" read it), `p_input` the procedure's
 * input as zod parsed it, `p_if_match` the strong tags of If-Match (`{*}` for `*`, null when
 * absent), `p_if_none_match` the tags of If-None-Match, weak ones as their strong form (the
 * weak comparison; `{*}`, null), `p_next_order` the order the user's next task takes (the
 * counter on the user's row as the operations before have moved it). It returns json `{"answer": <the procedure's output>, "etag": <text or null>,
 * "events": [{"type", "data"}, …], "open": <the change of the user's open tasks>, "orders": <the
 * orders it took from p_next_order>}` (the last two when any) and raises a refusal (`refusalSql`)
 * when a rule says no. The user's counters are moved by `apply`, in the one update of the
 * user's row that numbers the events.
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

/** What a refusal says: a code of the catalogue (src/core/errors.ts) and where; or several (`errors`), reported together. */
export interface Refusal {
  errors?: Refusal[];
  code?: string;
  /** Where one code answers with several statuses (`record_not_found` on a body member is 422). */
  status?: number;
  pointer?: string;
  parameter?: string;
  detail?: string;
  /** A rule of the input (`RefusalSql.validation`): nothing is kept under the key. */
  validation?: boolean;
}

/**
 * The statement that raises a refusal. Each member is a SQL expression of text (a quoted
 * constant or an expression over the function's variables).
 */
export function refusalSql(refusal: RefusalSql): string {
  return `raise exception using errcode = '${REFUSAL_STATE}', message = ${refusalJsonSql(refusal)}::text;`;
}

export interface RefusalSql {
  code: string;
  /**
   * A rule of the input that needs the database (a name taken, a project that is not the
   * user's): the request is refused as one whose input is invalid, and its key keeps nothing
   * (API-CONTRACT.md §11: a validation 422 stores nothing).
   */
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
  /** The function that takes the user's id (`create_distributed_function` on Citus). */
  apply: string;
  /** The first step of every write of a user, and the keeping of its key's outcome (`keyFunctionsSql`). */
  keyOpen: string;
  keyKeep: string;
}

/**
 * `apply(p_user, p_now, p_day, p_ops, p_key, p_key_lock, p_fingerprint, p_key_since, p_batch)`:
 * - `p_ops`: `[{"op", "input", "if_match", "if_none_match", "status", "ref", "refs"}]`, the operations in order
 *   (a single request is one); `status` is its success status, for the batch's answer and the
 *   key's record. In a batch, `ref` names the resource the operation creates, and `refs`
 *   (`[{"at": [member, …], "ref"}]`) the ids of its input that stand for a resource an earlier
 *   operation created: each is set to that resource's id before the operation runs. An
 *   operation `{"op": "stop"}` ends the batch there with the refusal `{"stop": true}`, kept
 *   under no key: the batch's next operation was refused before it ran (its input).
 * - A batch's `project.updated` events of one project are folded into its last (API-CONTRACT.md
 *   §15): a client applying the log in order ends in the same state, and 100 creates in a
 *   project append one copy of its task list, not 100 copies growing by one.
 * - A `project.updated` event an operation names by its project (`{"type", "project"}`,
 *   `projectUpdatedSql`) gets the project's document here, written once after the operations
 *   (and before one that deletes a project: `deletesProject`), with `projectDocument`, in one statement for all of them.
 * - `p_key`…`p_key_since`: the Idempotency-Key, the 64-bit lock of its user and key, the
 *   request's fingerprint, and the instant before which a record is expired; all null without one.
 * - `p_batch`: the answer is the batch's (`{"data": [{"status", "body"}, …]}`), else the one
 *   operation's.
 *
 * Returns json, one of: `{"replay": {"fingerprint", "status", "body", "etag"}}`;
 * `{"refusal": {…}, "index": n}`, the refusal of the operation at `index` (nothing kept but
 * the key's record of it), or `{"refusal": {…}}` without one, the write's own before any
 * operation ran (its key in use, its user gone: no operation of a batch is at fault);
 * `{"body", "etag", "notify"}`, `notify` the payload of the NOTIFY that wakes the listeners of
 * the user's change log once the write committed (none when it appended no event):
 * `<user>:<first>:<last>`, the numbers of its events, then `:` and the events as the log serves
 * them (`[{"id", "type", "data", "at"}, …]`, src/changes/event.store.ts reads either) when
 * they fit in PAYLOAD_BYTES; the service sends it after the commit (src/writes/announcer.ts).
 */
function applySql(schema: string, operations: readonly WriteOperation[], projectDocument: (p: string) => string): string {
  // The project documents the events name (`projectUpdatedSql`, src/writes/operation-sql.ts), as
  // the projects are now: in one statement (a reorder names dozens of projects; a statement
  // each cost about 0.1 ms apiece under the lock).
  const documents = (indent: string) =>
    [
      // Only when an event names a project: a statement costs a write more than this test.
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
  // A precondition's tags as text[], by a query only when there are any: the dispatch below stays
  // an expression, which PL/pgSQL evaluates without the planner (with these queries in it, it was
  // planned again at every call: a custom plan, cheaper than the generic one with every branch's).
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
  -- The key is claimed by the transaction, outside the block below: a refusal undoes the block,
  -- and the claim holds until the refusal is kept and committed (key_open claims it again, in
  -- the block: an advisory lock held twice is released once).
  if p_key is not null and not pg_try_advisory_xact_lock(p_key_lock) then
    return json_build_object('refusal', json_build_object('code', 'request_in_progress'));
  end if;
  -- The user's row is locked and its counters updated in this one block (a subtransaction): a
  -- row locked by the transaction and then updated by a subtransaction of it gets a MultiXact
  -- for its xmax, which every later reader of the row resolves: with the lock taken before the
  -- block, 8 connections of one user wrote at half the rate.
  begin
    -- The key, the user's lock and the key's record, as every write of the user takes them.
    v_opened := ${schema}.key_open(p_user, p_key, p_key_lock, p_key_since);
    if v_opened->'refusal' is not null then
      return json_build_object('refusal', v_opened->'refusal');
    elsif v_opened->'replay' is not null then
      return v_opened;
    end if;
    v_next_order := (v_opened->>'next_order')::bigint;
    v_first_order := v_next_order;
    for v_op in select value from json_array_elements(p_ops) loop
      if v_op->>'op' = 'stop' then
        raise exception using errcode = '${REFUSAL_STATE}', message = '{"stop": true}';
      end if;
      ${deleting.length ? `if v_op->>'op' in (${deleting.join(', ')}) then
        ${documents('        ')}
      end if;
      ` : ''}v_input := v_op->'input';
      if v_op->'refs' is not null then
        for v_at in select value from json_array_elements(v_op->'refs') loop
          v_input := ${schema}.json_put(v_input, array(select json_array_elements_text(v_at->'at')), (v_refs->(v_at->>'ref'))::json);
        end loop;
      end if;
      ${tags('if_match')}
      ${tags('if_none_match')}
      v_result := case v_op->>'op'
        ${dispatch}
      end;
      if v_result is null then
        raise exception 'unknown operation %', v_op->>'op';
      end if;
      -- The result's members read in one pass (each -> would parse the whole text again), the
      -- events in another; arrays set by subscript, in place (|| would copy them every time).
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
    -- The events, numbered after the user's newest (the dropped ones left out), the user's open
    -- tasks and next order, in one update of the user's row.
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
    -- Queries only where they are needed: each statement of a function costs more than an
    -- expression (which PL/pgSQL evaluates without the executor), and all of it runs under the lock.
    if p_batch then
      v_body := json_build_object('data', (select coalesce(json_agg(json_build_object('status', v_statuses[a.n], 'body', a.answer) order by a.n), '[]'::json)
                                             from unnest(v_answers) with ordinality as a(answer, n)));
    else
      v_body := v_answers[1];
    end if;
    if p_key is not null then
      perform ${schema}.key_keep(p_user, p_key, p_fingerprint, case when p_batch then 200 else v_statuses[1] end, v_body, case when p_batch then null else v_etag end, p_now);
    end if;
    -- The NOTIFY's payload, its events written out only until they no longer fit (a reorder's
    -- dozens of documents are not written only to be dropped).
    if v_count > 0 then
      v_notify := p_user || ':' || (v_last - v_count + 1) || ':' || v_last;
      v_seq := v_last - v_count;
      for v_k in 1..cardinality(v_types) loop
        continue when v_types[v_k] is null;
        v_seq := v_seq + 1;
        -- A document longer than the payload (a project's of hundreds of tasks) is not copied into an event first.
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
    -- Everything the block did is undone; a refusal of work that ran is kept under the key
    -- (API-CONTRACT.md §11), by the transaction, which still holds the key's claim; one of the
    -- input (marked validation, alone or among several) is not.
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
 * What every write of a user does first, and how it keeps its Idempotency-Key's outcome
 * (API-CONTRACT.md §11): the writes of projects and tasks (`apply`) and those that run in
 * TypeScript (src/writes/user-write.ts `plainWrite`) call the same two functions.
 *
 * `key_open(p_user, p_key, p_key_lock, p_key_since)`, first in the write's transaction:
 * - the key, never waited for (`p_key_lock`, its 64-bit advisory lock): a request with the
 *   same key running is `{"refusal": {"code": "request_in_progress"}}` at once;
 * - the user's lock, taken first by every write of the user and held until the commit; no
 *   user (deleted since its token was read: a deletion holds this lock while it runs, and a
 *   write that waited for it finds no row) is refused as its token now is, `unauthorized`;
 * - the key's record younger than `p_key_since`: `{"replay": {"fingerprint", "status", "body", "etag"}}`;
 * - else `{"last": <the user's newest event number>, "next_order": <the order of its next task>}`.
 * `key_keep(…)` stores an outcome under the key; an expired record of it is replaced.
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
    return json_build_object('refusal', json_build_object('code', 'request_in_progress'));
  end if;
  v_setting := set_config('lock_timeout', '5000ms', true);
  select u.last_event_seq, u.next_task_order into v_last, v_next_order from users u where u.id = p_user for no key update;
  if not found then
    return json_build_object('refusal', json_build_object('code', 'unauthorized'));
  end if;
  if p_key is not null then
    select json_build_object('fingerprint', k.fingerprint, 'status', k.status, 'body', k.body, 'etag', k.etag) into v_record
      from idempotency_keys k
     where k.user_id = p_user and k.key = p_key and k.created_at > p_key_since;
    if v_record is not null then
      return json_build_object('replay', v_record);
    end if;
  end if;
  return json_build_object('last', v_last, 'next_order', v_next_order);
end
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

/** The whole set for these operations: its schema, the statements that create it, and `apply`. */
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
 * lock, in a transaction: the schema and its functions appear together). On Citus, `apply` is
 * then distributed by the user's id, co-located with `users`, so a call is delegated whole to
 * the user's node (designed for; not run in CI, which has no Citus).
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
