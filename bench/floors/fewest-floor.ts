/**
 * The fewest-statements floor: bare node:http + pg, prepared (named) statements, no framework,
 * ORM or validation library. It answers every benchmarked endpoint with byte-for-byte the
 * service's JSON, under the service's contract, in as few statements and round trips as a
 * correct implementation can: the reference the service's throughput, latency and memory are
 * held against (bench/README.md, "Writes as fast as reads"). It does not read the service's
 * SQL: the rules (task actions, project transitions, documents) are hard-coded from
 * src/tasks/task.lifecycle.ts, src/projects/project.lifecycle.ts and the views, and
 * bench/floors/floor-check.ts checks its answers, events and notifications against the service.
 *
 *   GET  /api/users/me/tasks?page=N      token; the page with its total              2 statements, 2 round trips
 *   GET  /api/users/me/projects?page=N   token; the page, total and task ids          2 statements, 2 round trips
 *   GET  /api/tasks/:id                  token; the task                              2 statements, 2 round trips
 *   PUT  /api/tasks/:id/state            token; one statement (below)                 2 statements, 2 round trips
 *   POST /api/users/me/tasks             token; begin, lock, write, commit pipelined  5 statements, 2 round trips
 *     (with project_id: the same, the write also reading the project and sending its document)
 *   PUT  /api/tasks/:id/order            token; begin, lock, write, commit pipelined  5 statements, 2 round trips
 *   PUT  /api/projects/:id/state         token; begin, lock, write, commit pipelined  5 statements, 2 round trips
 *
 * Every write appends its events (API-CONTRACT.md §10) in its own statement: the owner's
 * `last_event_seq` moves by the number of events under the owner's row lock, the events are
 * stored with their documents (the same JSON text as the response's `data`), and pg_notify
 * sends `<user>:<first>:<last>[:<events>]` (the events when they fit in 7,000 bytes), like
 * the service. A write that changes nothing appends nothing and takes no number.
 *
 * Why the state change is one statement and the others are four (in one round trip):
 * in READ COMMITTED a statement's snapshot is taken when it starts, before it waits for the
 * owner's lock. A state change touches only rows it updates by key (the task, the owner's
 * row): PostgreSQL re-reads a row that changed meanwhile before updating it, so one
 * statement that locks the owner first is correct. A create reads the highest order, a
 * reorder the span it shifts, a project start the count of started projects and the tasks it
 * starts: rows that a write committed while this one waited would be missing from its
 * snapshot (a duplicate order, a fourth started project). Those need a statement that starts
 * after the lock is held, so they are `begin; lock; write; commit`, sent at once in pg's
 * pipeline mode: one round trip, the lock held only while PostgreSQL runs them.
 *
 * Env: DATABASE_URL, PORT, HOST (127.0.0.1), POOL_SIZE (10, the service's default).
 * Runs with Node's own type stripping: `node bench/floors/fewest-floor.ts`.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import pg from 'pg';

// Ids are bigint (int8): read as numbers, as the service's pool reads them (src/db/orm-config.ts).
pg.types.setTypeParser(20, (value) => Number(value));
/** int8[] (PostgreSQL's type 1016, not in pg's list of builtins): a project's task ids. */
const INT8_ARRAY = 1016 as Parameters<typeof pg.types.getTypeParser>[0];
const parseInt8Array = pg.types.getTypeParser(INT8_ARRAY);
pg.types.setTypeParser(INT8_ARRAY, (value: string) => (parseInt8Array(value) as string[]).map(Number));

const pool = new pg.Pool({
  connectionString: process.env.DATABASE_URL,
  max: Number(process.env.POOL_SIZE ?? 10),
  // Pipeline mode: queries issued together go out together (the writes' begin … commit).
  ...({ pipeline: true } as object),
});
const TASK_PAGE = 50;
const PROJECT_PAGE = 25;
const DAY_MS = 86_400_000;
const META = { stability: 'unstable', notice: 'This output may change soon.' };
const META_JSON = JSON.stringify(META);
const PAYLOAD_BYTES = 7_000;
const MAX_STARTED_PROJECTS = 3;

// ---- rules (task.lifecycle.ts, hard-coded) ------------------------------------------------

type TaskState = 'newed' | 'started' | 'planned' | 'finished' | 'abandoned';
type DateColumn = 'started_at' | 'planned_at' | 'finished_at' | 'abandoned_at';
type Effect = 'now' | 'nowIfUnset' | 'unset';
interface Action {
  name: string;
  from: TaskState[];
  to: TaskState;
  dates: Partial<Record<DateColumn, Effect>>;
  counts?: true;
}
export const FLOOR_TASK_ACTIONS: Action[] = [
  { name: 'start', from: ['newed'], to: 'started', dates: { started_at: 'nowIfUnset' } },
  { name: 'plan', from: ['newed', 'started'], to: 'planned', dates: { started_at: 'nowIfUnset', planned_at: 'now' }, counts: true },
  { name: 'replan', from: ['planned', 'finished'], to: 'planned', dates: { planned_at: 'now', finished_at: 'unset' }, counts: true },
  { name: 'finish', from: ['planned'], to: 'finished', dates: { finished_at: 'now' } },
  { name: 'cancel', from: ['started', 'planned'], to: 'newed', dates: { started_at: 'unset', planned_at: 'unset' } },
  { name: 'abandon', from: ['newed', 'started', 'planned'], to: 'abandoned', dates: { abandoned_at: 'now' } },
];
const TASK_STATES: TaskState[] = ['newed', 'started', 'planned', 'finished', 'abandoned'];

// ---- SQL ------------------------------------------------------------------------------------

const secs = (column: string) => `coalesce(floor(extract(epoch from ${column})), 0)::bigint`;
const str = (states: readonly string[]) => states.map((s) => `'${s}'`).join(', ');

/** A task's document (task.view.ts presentTaskFields) as compact JSON text, member order kept. */
const taskDoc = (t: string) =>
  `'{"type":"task","id":' || ${t}.id || ',"attributes":{"label":' || to_json(${t}.label)::text || ',"order":' || ${t}."order"` +
  ` || ',"plannedCount":' || ${t}.planned_count || ',"state":"' || ${t}.state || '","startedAt":' || ${secs(`${t}.started_at`)}` +
  ` || ',"plannedAt":' || ${secs(`${t}.planned_at`)} || ',"finishedAt":' || ${secs(`${t}.finished_at`)} || ',"abandonedAt":' || ${secs(`${t}.abandoned_at`)}` +
  ` || '},"relationships":{"user":{"data":{"type":"user","id":' || ${t}.user_id || '}},"project":{"data":'` +
  ` || coalesce('{"type":"project","id":' || ${t}.project_id || '}', 'null') || '}}}'`;

/** A project's document (project.view.ts) as compact JSON text; `ids` is the task-id list's JSON members. */
const projectDoc = (p: string, ids: string) =>
  `'{"type":"project","id":' || ${p}.id || ',"attributes":{"name":' || to_json(${p}.name)::text || ',"slug":' || to_json(${p}.slug)::text` +
  ` || ',"description":' || to_json(${p}.description)::text || ',"state":"' || ${p}.state || '","startedAt":' || ${secs(`${p}.started_at`)}` +
  ` || ',"dueAt":' || ${secs(`${p}.due_at`)} || ',"pausedAt":' || ${secs(`${p}.paused_at`)} || ',"finishedAt":' || ${secs(`${p}.finished_at`)}` +
  ` || ',"isInProgress":' || (${p}.state = 'started')::text || '},"relationships":{"user":{"data":{"type":"user","id":' || ${p}.user_id` +
  ` || '}},"tasks":{"data":[' || coalesce(${ids}, '') || ']}}}'`;

/** The JSON members of a project's task list: its tasks that are not abandoned, by order. */
const taskRefs = (where: string, orderBy = 't."order", t.id', from = 'tasks t') =>
  `(select string_agg('{"type":"task","id":' || t.id || '}', ',' order by ${orderBy}) from ${from} where ${where})`;

/**
 * The change log's CTEs, after a CTE `evs(n, type, data)` (n = 1…count, in order): moves the
 * owner's mark by the count (only when there is an event), stores the events, notifies.
 * $U is the user's parameter, $NOW the timestamp, $AT its Unix seconds. The main query must
 * read `note` (a plain CTE runs only when read).
 */
const appendEvents = (U: string, NOW: string, AT: string) => `
  mark as (
    update users set last_event_seq = last_event_seq + (select count(*) from evs)
     where id = ${U} and exists (select 1 from evs)
    returning last_event_seq - (select count(*) from evs) as base
  ), stored as (
    insert into events (user_id, seq, type, data, at)
    select ${U}, mark.base + evs.n, evs.type, evs.data::json, ${NOW} from mark, evs
    returning seq, type, data
  ), note as (
    select pg_notify('user_events', case when octet_length(body) <= ${PAYLOAD_BYTES} then head || ':' || body else head end) as sent
      from (select ${U}::text || ':' || min(seq) || ':' || max(seq) as head,
                   '[' || string_agg('{"id":"' || seq || '","type":"' || type || '","data":' || data::text || ',"at":' || ${AT} || '}', ',' order by seq) || ']' as body
              from stored) x
     where head is not null
  )`;

const SQL = {
  token: `select u.id, u.last_event_seq::text as seq from access_tokens t join users u on u.id = t.user_id
           where t.token_hash = $1 and t.expires_at > $2`,
  listTasks: `select c.total, t.id, t.user_id, t.project_id, t.label, t."order", t.planned_count, t.state,
            ${secs('t.started_at')}::float8 as started_at, ${secs('t.planned_at')}::float8 as planned_at,
            ${secs('t.finished_at')}::float8 as finished_at, ${secs('t.abandoned_at')}::float8 as abandoned_at
       from (select ((select count(*) from tasks where user_id = $1 and state not in ('abandoned', 'finished'))
                  + (select count(*) from tasks where user_id = $1 and state = 'finished' and finished_at >= $2))::int as total) as c
       left join lateral (
         select tasks.* from (
           select user_id, id from tasks
            where user_id = $1 and state <> 'abandoned' and (state <> 'finished' or finished_at >= $2)
            order by "order", id limit ${TASK_PAGE} offset $3
         ) as page join tasks on tasks.user_id = page.user_id and tasks.id = page.id
       ) as t on true
      order by t."order", t.id`,
  listProjects: `select c.total, p.id, p.user_id, p.name, p.slug, p.description, p.state,
            ${secs('p.started_at')}::float8 as started_at, ${secs('p.due_at')}::float8 as due_at,
            ${secs('p.paused_at')}::float8 as paused_at, ${secs('p.finished_at')}::float8 as finished_at,
            array(select t.id from tasks t where t.user_id = p.user_id and t.project_id = p.id and t.state <> 'abandoned' order by t."order", t.id) as task_ids
       from (select count(*)::int as total from projects where user_id = $1) as c
       left join lateral (select * from projects where user_id = $1 order by id limit ${PROJECT_PAGE} offset $2) as p on true
      order by p.id`,
  getTask: `select t.version, ${taskDoc('t')} as doc from tasks t where t.id = $1 and t.user_id = $2`,
  lock: 'select id from users where id = $1 for no key update',
  // A create's lock moves the order counter on the user's row (the service's, src/tasks/create-task.ts):
  // the insert, a statement after it, reads the order it took.
  lockForCreate: 'update users set next_task_order = next_task_order + 1 where id = $1 returning id',
  lockForCreateIn: `update users set next_task_order = next_task_order + (exists (select 1 from projects p where p.user_id = $1 and p.id = $2))::int
                     where id = $1 returning id`,
  createTask: `with ins as (
       insert into tasks (user_id, project_id, label, "order", planned_count, state, started_at, planned_at, finished_at, abandoned_at, created_at)
       values ($1, null, $2, (select next_task_order - 1 from users where id = $1), 0, 'started', $3, null, null, null, $3)
       returning *
     ), doc as (
       select ins.id, ins.version, ${taskDoc('ins')} as data from ins
     ), evs as (
       select 1 as n, 'task.created' as type, doc.data from doc
     ), ${appendEvents('$1::int', '$3::timestamptz', '$4::bigint')}
     select doc.id, doc.version, doc.data, (select count(*) from note)::int as notified from doc`,
  // In a project of the user (else no row): the task takes the project's state (started if
  // the project is, else newed: SPEC.md 4.5, task.lifecycle.ts newTaskFields), and the
  // project's document, whose task list now ends with it, is the second event. This
  // statement's snapshot does not see the row it inserts, so the list is the project's other
  // tasks plus the new one: last, since its order is the user's highest.
  createTaskInProject: `with p as (
       select * from projects where id = $5 and user_id = $1
     ), ins as (
       insert into tasks (user_id, project_id, label, "order", planned_count, state, started_at, planned_at, finished_at, abandoned_at, created_at)
       select $1::int, p.id, $2::text, (select next_task_order - 1 from users where id = $1), 0,
              case when p.state = 'started' then 'started' else 'newed' end,
              case when p.state = 'started' then $3::timestamptz end, null, null, null, $3::timestamptz
         from p
       returning *
     ), doc as (
       select ins.id, ins.version, ${taskDoc('ins')} as data from ins
     ), pdoc as (
       select ${projectDoc('p', `coalesce(${taskRefs(`t.user_id = p.user_id and t.project_id = p.id and t.state <> 'abandoned'`)} || ',', '') || '{"type":"task","id":' || ins.id || '}'`)} as data
         from p, ins
     ), evs as (
       select 1 as n, 'task.created' as type, doc.data from doc
       union all
       select 2, 'project.updated', pdoc.data from pdoc
     ), ${appendEvents('$1::int', '$3::timestamptz', '$4::bigint')}
     select doc.id, doc.version, doc.data, (select count(*) from note)::int as notified from doc`,
  reorder: `with target as (
       select id, project_id, state, "order" as from_order, least($3::bigint, (select max("order") from tasks where user_id = $1))::int as to_order
         from tasks where id = $2 and user_id = $1
     ), moved as (
       update tasks set "order" = case when tasks.id = target.id then target.to_order
                                       when target.to_order < target.from_order then tasks."order" + 1
                                       else tasks."order" - 1 end
         from target
        where tasks.user_id = $1 and target.to_order <> target.from_order
          and tasks."order" between least(target.from_order, target.to_order) and greatest(target.from_order, target.to_order)
       returning tasks.*
     ), tev as (
       select m.*, row_number() over (order by m."order") as k,
              row_number() over (partition by m.project_id, m.state = 'abandoned' order by m."order") as nth_of_project,
              count(*) filter (where m.state <> 'abandoned') over (partition by m.project_id) as of_project
         from moved m
     ), refs as (
       -- The task lists of the moved tasks' projects, by the orders after the move (this
       -- statement still reads the old ones from the table).
       select t.project_id, string_agg('{"type":"task","id":' || t.id || '}', ',' order by coalesce(m2."order", t."order"), t.id) as list
         from tasks t left join moved m2 on m2.id = t.id
        where t.user_id = $1 and t.project_id = any (array(select distinct project_id from moved where project_id is not null)) and t.state <> 'abandoned'
        group by t.project_id
     ), evs as (
       select row_number() over (order by e.k, e.kind)::int as n, e.type, e.data from (
         select tev.k, 0 as kind, 'task.updated' as type, ${taskDoc('tev')} as data from tev
         union all
         select tev.k, 1, 'project.updated', ${projectDoc('p', 'refs.list')}
           from tev join projects p on p.user_id = tev.user_id and p.id = tev.project_id join refs on refs.project_id = p.id
          -- Only the task's project, and only when the task passed another of its tasks: no other list changes order.
          where tev.nth_of_project = 1 and tev.state <> 'abandoned' and tev.of_project > 1 and tev.project_id = (select project_id from target)
            and (select state from target) <> 'abandoned'
       ) e
     ), ${appendEvents('$1::int', '$4::timestamptz', '$5::bigint')}
     select 'moved' as kind, id, "order" from moved
     union all select 'target', id, from_order from target
     union all select 'note', count(*)::int, 0 from note`,
  projectState: `with p0 as (
       select * from projects where id = $2 and user_id = $1
     ), tr as (
       select p0.id, case when p0.state = 'newed' and $3::text = 'started' then 'start'
                          when p0.state = 'paused' and $3::text = 'started' then 'restart'
                          when p0.state = 'started' and $3::text = 'paused' then 'pause' end as action
         from p0
     ), started as (
       select count(*)::int as n from projects where user_id = $1 and state = 'started'
     ), ok as (
       select tr.* from tr, started
        where (tr.action = 'pause' and $5::timestamptz is null)
           or (tr.action = 'start' and $5::timestamptz is not null and started.n < ${MAX_STARTED_PROJECTS})
           or (tr.action = 'restart' and started.n < ${MAX_STARTED_PROJECTS})
     ), up as (
       update projects set
          state = case ok.action when 'pause' then 'paused' else 'started' end,
          started_at = case when ok.action = 'start' then $4::timestamptz else projects.started_at end,
          due_at = case ok.action when 'start' then $5::timestamptz when 'restart' then coalesce($5::timestamptz, projects.due_at) else projects.due_at end,
          paused_at = case ok.action when 'pause' then $4::timestamptz when 'restart' then null else projects.paused_at end
         from ok where projects.user_id = $1 and projects.id = ok.id
       returning projects.*
     ), tk as (
       update tasks set
          started_at = case when ok.action = 'pause' then null else coalesce(tasks.started_at, $4::timestamptz) end,
          planned_at = case when ok.action = 'pause' then null else tasks.planned_at end,
          state = case when ok.action = 'pause' then 'newed' else 'started' end
         from ok
        where tasks.user_id = $1 and tasks.project_id = ok.id and tasks.state = case when ok.action = 'pause' then 'started' else 'newed' end
       returning tasks.*
     ), pdoc as (
       select up.id, up.version, ${projectDoc('up', taskRefs(`t.user_id = up.user_id and t.project_id = up.id and t.state <> 'abandoned'`))} as data,
              array(select t.id from tasks t where t.user_id = up.user_id and t.project_id = up.id and t.state <> 'abandoned' order by t."order", t.id) as task_ids
         from up
     ), evs as (
       select row_number() over (order by e.k)::int as n, e.type, e.data from (
         select 0 as k, 'project.updated' as type, pdoc.data from pdoc
         union all
         select row_number() over () as k, 'task.updated', ${taskDoc('tk')} from tk
       ) e
     ), ${appendEvents('$1::int', '$4::timestamptz', '$6::bigint')}
     select (select state from p0) as state, (select action from tr) as action, (select n from started) as started,
            pdoc.id, pdoc.version, pdoc.data, pdoc.task_ids, (select count(*) from note)::int as notified
       from (select 1) one left join pdoc on true`,
};

/**
 * A state change in one statement: the owner's row is locked first (the `owner` CTE is read
 * before the task's row is updated), the task is updated only from the states the actions
 * reaching `to` leave, and only an updated task moves the owner's mark and stores its
 * event(s). Abandoning a task of a project also sends the project's document, without it.
 */
function changeStateSql(to: TaskState): string {
  const actions = FLOOR_TASK_ACTIONS.filter((a) => a.to === to);
  const columns = [...new Set(actions.flatMap((a) => Object.keys(a.dates) as DateColumn[]))];
  const set = columns.map((column) => {
    const cases = actions
      .filter((a) => a.dates[column])
      .map((a) => {
        const effect = a.dates[column]!;
        const value = effect === 'now' ? '$3::timestamptz' : effect === 'nowIfUnset' ? `coalesce(tasks.${column}, $3::timestamptz)` : 'null';
        return `when tasks.state in (${str(a.from)}) then ${value}`;
      });
    return `${column} = case ${cases.join(' ')} else tasks.${column} end`;
  });
  const counting = actions.filter((a) => a.counts);
  if (counting.length > 0) {
    set.push(`planned_count = case when tasks.state in (${str(counting.flatMap((a) => a.from))}) then tasks.planned_count + 1 else tasks.planned_count end`);
  }
  set.push(`state = '${to}'`);
  const from = actions.flatMap((a) => a.from);
  const projectEvent =
    to === 'abandoned'
      ? `union all select 2, 'project.updated', ${projectDoc('p', taskRefs(`t.user_id = p.user_id and t.project_id = p.id and t.state <> 'abandoned' and t.id <> doc.id`))}
           from doc join projects p on p.user_id = doc.user_id and p.id = doc.project_id`
      : '';
  return `with owner as (
       select id from users where id = $2 for no key update
     ), upd as (
       update tasks set ${set.join(', ')}
         from owner where tasks.id = $1 and tasks.user_id = owner.id and tasks.state in (${str(from)})
       returning tasks.*
     ), doc as (
       select upd.id, upd.version, upd.project_id, ${taskDoc('upd')} as data from upd
     ), evs as (
       select 1 as n, 'task.updated' as type, doc.data from doc
       ${projectEvent}
     ), ${appendEvents('$2::int', '$3::timestamptz', '$4::bigint')}
     select doc.id, doc.version, doc.data, (select count(*) from note)::int as notified from doc`;
}

export const CHANGE_STATE = Object.fromEntries(TASK_STATES.map((s) => [s, changeStateSql(s)])) as Record<TaskState, string>;

/** Prepared: the statement's name makes pg parse it once per connection. */
const prepared = (name: string, text: string, values: unknown[]) => ({ name, text, values });

// ---- HTTP -----------------------------------------------------------------------------------

const digest = (text: string) => createHash('sha256').update(text).digest('base64url').slice(0, 16);
const taskEtag = (id: number, version: number) => `"t${id}.${version}"`;
const projectEtag = (id: number, version: number, taskIds: readonly number[]) => `"p${id}.${version}.${digest(taskIds.join(','))}"`;
const listEtag = (parts: ReadonlyArray<string | number>) => `"l.${digest(parts.join('\n'))}"`;

/** The service's clock: whole seconds. */
const now = () => new Date(Math.floor(Date.now() / 1000) * 1000);
const toSeconds = (d: Date) => Math.floor(d.getTime() / 1000);

function sendText(res: ServerResponse, status: number, text: string, etag?: string) {
  const headers: Record<string, string | number> = { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text) };
  if (etag) headers.ETag = etag;
  res.writeHead(status, headers);
  res.end(text);
}
const send = (res: ServerResponse, status: number, body: unknown, etag?: string) => sendText(res, status, JSON.stringify(body), etag);

const TITLES: Record<string, [number, string]> = {
  invalid: [422, 'Resource validation failed'],
  parameter_missing: [422, 'Resource validation failed'],
  must_be_set: [422, 'State change refused'],
  cannot_be_set: [422, 'State change refused'],
  cannot_be_before_started_at: [422, 'State change refused'],
  reached_max_started: [422, 'State change refused'],
  invalid_transition: [422, 'State change refused'],
  record_not_found: [404, 'Record not found'],
  unauthorized: [401, 'Unauthorized'],
  missing_endpoint: [404, 'Endpoint not found'],
  internal_error: [500, 'Internal server error'],
};
function fail(res: ServerResponse, code: string, detail: string, pointer?: string) {
  const [status, title] = TITLES[code] ?? [500, 'Internal server error'];
  const error: Record<string, unknown> = { status: String(status), code, title, detail };
  if (pointer) error.source = { pointer };
  send(res, status, { errors: [error] });
}
const notFound = (res: ServerResponse, resource: 'task' | 'project') =>
  fail(res, 'record_not_found', `No ${resource} with this id exists for the current user.`, `/${resource}`);

interface User {
  id: number;
  seq: string;
}

async function authenticate(req: IncomingMessage): Promise<User | null> {
  const value = req.headers.authorization?.trim() ?? '';
  const token = /^bearer\s+(\S+)$/i.exec(value)?.[1] ?? value;
  if (!/^[A-Za-z0-9_-]{20,200}$/.test(token)) return null;
  const hash = createHash('sha256').update(token).digest('hex');
  const { rows } = await pool.query<{ id: number; seq: string }>(prepared('token', SQL.token, [hash, now()]));
  return rows[0] ?? null;
}

async function readJson(req: IncomingMessage): Promise<any> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return undefined;
  }
}

/** begin; lock the owner; the write; commit — sent together (pipeline mode), one round trip. */
async function lockedWrite<R extends pg.QueryResultRow>(
  userId: number,
  name: string,
  text: string,
  values: unknown[],
  lock: { name: string; text: string; values: unknown[] } = { name: 'lock', text: SQL.lock, values: [userId] },
): Promise<R[]> {
  const client = await pool.connect();
  try {
    const begin = client.query('begin');
    const locked = client.query(prepared(lock.name, lock.text, lock.values));
    const write = client.query<R>(prepared(name, text, values));
    const commit = client.query('commit');
    const settled = await Promise.allSettled([begin, locked, write, commit]);
    const failure = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failure) throw failure.reason;
    return (settled[2] as PromiseFulfilledResult<pg.QueryResult<R>>).value.rows;
  } finally {
    client.release();
  }
}

const present = (r: any) => ({
  type: 'task',
  id: r.id,
  attributes: {
    label: r.label,
    order: r.order,
    plannedCount: r.planned_count,
    state: r.state,
    startedAt: r.started_at,
    plannedAt: r.planned_at,
    finishedAt: r.finished_at,
    abandonedAt: r.abandoned_at,
  },
  relationships: {
    user: { data: { type: 'user', id: r.user_id } },
    project: { data: r.project_id === null ? null : { type: 'project', id: r.project_id } },
  },
});

function pageLinks(base: string, page: number, size: number, total: number) {
  const last = Math.max(1, Math.ceil(total / size));
  const links: Record<string, string> = { first: `${base}?page=1`, last: `${base}?page=${last}` };
  if (page > 1) links.prev = `${base}?page=${page - 1}`;
  if (page < last) links.next = `${base}?page=${page + 1}`;
  return links;
}

function pageParam(url: URL): number | null {
  const raw = url.searchParams.get('page');
  const page = raw === null ? 1 : Number(raw);
  return Number.isSafeInteger(page) && page >= 1 ? page : null;
}

async function listTasks(req: IncomingMessage, res: ServerResponse, user: User, url: URL) {
  const page = pageParam(url);
  if (page === null) return fail(res, 'invalid', 'page must be a positive integer.');
  const n = now();
  const cutoff = new Date(Math.floor(n.getTime() / DAY_MS) * DAY_MS - 14 * DAY_MS);
  const baseUrl = `http://${req.headers.host}`;
  const etag = listEtag(['tasks', user.id, user.seq, page, baseUrl, cutoff.toISOString()]);
  const { rows } = await pool.query(prepared('list_tasks', SQL.listTasks, [user.id, cutoff, (page - 1) * TASK_PAGE]));
  const total = Number(rows[0]?.total ?? 0);
  const data = rows.filter((r) => r.id !== null).map(present);
  send(res, 200, { data, links: pageLinks(`${baseUrl}/api/users/me/tasks`, page, TASK_PAGE, total), meta: META }, etag);
}

async function listProjects(req: IncomingMessage, res: ServerResponse, user: User, url: URL) {
  const page = pageParam(url);
  if (page === null) return fail(res, 'invalid', 'page must be a positive integer.');
  const baseUrl = `http://${req.headers.host}`;
  const etag = listEtag(['projects', user.id, user.seq, page, baseUrl]);
  const { rows } = await pool.query(prepared('list_projects', SQL.listProjects, [user.id, (page - 1) * PROJECT_PAGE]));
  const total = Number(rows[0]?.total ?? 0);
  const data = rows
    .filter((r) => r.id !== null)
    .map((p) => ({
      type: 'project',
      id: p.id,
      attributes: {
        name: p.name,
        slug: p.slug,
        description: p.description,
        state: p.state,
        startedAt: p.started_at,
        dueAt: p.due_at,
        pausedAt: p.paused_at,
        finishedAt: p.finished_at,
        isInProgress: p.state === 'started',
      },
      relationships: {
        user: { data: { type: 'user', id: p.user_id } },
        tasks: { data: (p.task_ids as number[]).map((id) => ({ type: 'task', id })) },
      },
    }));
  send(res, 200, { data, links: pageLinks(`${baseUrl}/api/users/me/projects`, page, PROJECT_PAGE, total), meta: META }, etag);
}

async function getTask(res: ServerResponse, user: User, id: number) {
  const { rows } = await pool.query<{ version: number; doc: string }>(prepared('get_task', SQL.getTask, [id, user.id]));
  const row = rows[0];
  if (!row) return notFound(res, 'task');
  sendText(res, 200, `{"data":${row.doc},"meta":${META_JSON}}`, taskEtag(id, row.version));
}

async function createTask(res: ServerResponse, user: User, body: any) {
  const task = body?.task;
  const label = task?.label;
  if (typeof label !== 'string' || label.length === 0 || label.length > 1000) {
    return fail(res, 'invalid', 'This value is not valid.', '/task/label');
  }
  // The bench creates with a label and at most a project; a planned date is the service's (not answered here).
  if (Object.keys(task).some((k) => k !== 'label' && k !== 'project_id')) return fail(res, 'invalid', 'The floor creates tasks with a label and a project only.', '/task');
  const projectId = task.project_id ?? null;
  if (projectId !== null && !(Number.isSafeInteger(projectId) && projectId >= 1)) return fail(res, 'invalid', 'This value is not valid.', '/task/project_id');
  const at = now();
  const [row] = projectId === null
    ? await lockedWrite<{ id: number; version: number; data: string }>(user.id, 'create_task', SQL.createTask, [user.id, label, at, toSeconds(at)],
      { name: 'lock_create', text: SQL.lockForCreate, values: [user.id] })
    : await lockedWrite<{ id: number; version: number; data: string }>(user.id, 'create_task_in_project', SQL.createTaskInProject, [user.id, label, at, toSeconds(at), projectId],
      { name: 'lock_create_in', text: SQL.lockForCreateIn, values: [user.id, projectId] });
  if (!row) {
    // No such project of the user: nothing inserted, no number taken (the service's 422 on the field).
    return send(res, 422, { errors: [{ status: '422', code: 'record_not_found', title: 'Record not found', detail: 'No project with this id exists for the current user.', source: { pointer: '/task/project_id' } }] });
  }
  sendText(res, 201, `{"data":${row.data},"meta":${META_JSON}}`, taskEtag(row.id, row.version));
}

async function changeTaskState(res: ServerResponse, user: User, id: number, body: any) {
  const task = body?.task;
  const to = task?.state;
  if (typeof to !== 'string' || !(TASK_STATES as string[]).includes(to)) return fail(res, 'invalid', 'This value is not valid.', '/task/state');
  const at = now();
  const { rows } = await pool.query<{ id: number; version: number; data: string }>(
    prepared(`change_state_${to}`, CHANGE_STATE[to as TaskState], [id, user.id, at, toSeconds(at)]),
  );
  const row = rows[0];
  if (!row) {
    // Nothing changed and no number was taken; tell why (not the benchmarked path).
    const { rows: found } = await pool.query<{ doc: string }>(prepared('get_task', SQL.getTask, [id, user.id]));
    if (!found[0]) return notFound(res, 'task');
    const state = JSON.parse(found[0].doc).attributes.state as string;
    return fail(res, 'invalid_transition', `A ${state} task cannot become ${to}.`, '/task/state');
  }
  if (Object.keys(task).some((k) => k !== 'state')) {
    // The service refuses other members after the transition check; the floor's bench never sends them.
    return fail(res, 'cannot_be_set', 'The floor answers state changes with `state` only.', '/task');
  }
  sendText(res, 200, `{"data":${row.data},"meta":${META_JSON}}`, taskEtag(row.id, row.version));
}

async function reorderTask(res: ServerResponse, user: User, id: number, body: any) {
  const order = body?.task?.order;
  if (!Number.isSafeInteger(order) || order < 1) return fail(res, 'invalid', 'This value is not valid.', '/task/order');
  const at = now();
  const rows = await lockedWrite<{ kind: string; id: number; order: number }>(user.id, 'reorder', SQL.reorder, [user.id, id, order, at, toSeconds(at)]);
  const moved = rows.filter((r) => r.kind === 'moved');
  const target = rows.find((r) => r.kind === 'target');
  if (!target) return notFound(res, 'task');
  const changed = (moved.length > 0 ? moved : [target]).sort((a, b) => a.order - b.order);
  send(res, 200, { data: changed.map((r) => ({ type: 'task', id: r.id, attributes: { order: r.order } })), meta: META });
}

async function changeProjectState(res: ServerResponse, user: User, id: number, body: any) {
  const project = body?.project;
  const to = project?.state;
  if (to !== 'started' && to !== 'paused') return fail(res, 'invalid', 'The floor answers start, restart and pause.', '/project/state');
  const at = now();
  let due: Date | null = null;
  if (project.due_at !== undefined) {
    if (!Number.isSafeInteger(project.due_at)) return fail(res, 'invalid', 'This value is not valid.', '/project/due_at');
    due = new Date(project.due_at * 1000);
    const tomorrow = Math.floor(at.getTime() / DAY_MS) * DAY_MS + DAY_MS;
    if (to === 'started' && due.getTime() < tomorrow) return fail(res, 'cannot_be_before_started_at', 'due_at must be after today.', '/project/due_at');
  }
  const [row] = await lockedWrite<{ state: string | null; action: string | null; started: number; id: number | null; version: number; data: string; task_ids: number[] }>(
    user.id, 'project_state', SQL.projectState, [user.id, id, to, at, due, toSeconds(at)],
  );
  if (row!.id === null) {
    if (row!.state === null) return notFound(res, 'project');
    if (row!.action === null) return fail(res, 'invalid_transition', `A ${row!.state} project cannot become ${to}.`, '/project/state');
    if (row!.action === 'start' && due === null) return fail(res, 'must_be_set', 'due_at must be set on start.', '/project/due_at');
    if (row!.action === 'pause' && due !== null) return fail(res, 'cannot_be_set', 'due_at cannot be set on pause.', '/project/due_at');
    return fail(res, 'reached_max_started', `At most ${MAX_STARTED_PROJECTS} projects can be started at the same time.`, '/project/state');
  }
  sendText(res, 200, `{"data":${row!.data},"meta":${META_JSON}}`, projectEtag(row!.id, row!.version, row!.task_ids));
}

const TASK_PATH = /^\/api\/tasks\/(\d{1,10})(\/state|\/order)?$/;
const PROJECT_STATE_PATH = /^\/api\/projects\/(\d{1,10})\/state$/;

async function route(req: IncomingMessage, res: ServerResponse) {
  const url = new URL(req.url ?? '/', 'http://x');
  const path = url.pathname;
  if (path === '/readyz') return send(res, 200, { status: 'ready' });
  const method = req.method ?? 'GET';
  // Like the service, the body is read before anything touches the database.
  const body = method === 'GET' ? undefined : await readJson(req);
  const task = TASK_PATH.exec(path);
  const project = PROJECT_STATE_PATH.exec(path);
  const known =
    ((path === '/api/users/me/tasks' && (method === 'GET' || method === 'POST')) ||
      (path === '/api/users/me/projects' && method === 'GET') ||
      (task && ((task[2] === undefined && method === 'GET') || (task[2] !== undefined && method === 'PUT'))) ||
      (project && method === 'PUT'));
  if (!known) return fail(res, 'missing_endpoint', 'No endpoint answers this method and path.');
  const user = await authenticate(req);
  if (!user) return fail(res, 'unauthorized', 'A valid access token is required in the Authorization header.');
  if (path === '/api/users/me/tasks') return method === 'GET' ? listTasks(req, res, user, url) : createTask(res, user, body);
  if (path === '/api/users/me/projects') return listProjects(req, res, user, url);
  if (task) {
    const id = Number(task[1]);
    if (task[2] === undefined) return getTask(res, user, id);
    return task[2] === '/state' ? changeTaskState(res, user, id, body) : reorderTask(res, user, id, body);
  }
  return changeProjectState(res, user, Number(project![1]), body);
}

// Run as a program it serves; imported (bench/scenarios/write-db.ts), it only lends its statements.
if (import.meta.main) {
  const server = createServer((req, res) => {
    route(req, res).catch((error: unknown) => {
      console.error(error);
      if (!res.headersSent) fail(res, 'internal_error', 'Something went wrong on our side; the request id identifies it in our logs.');
    });
  });
  server.keepAliveTimeout = 5_000;
  server.listen(Number(process.env.PORT ?? 3100), process.env.HOST ?? '127.0.0.1', () => {
    const { port } = server.address() as { port: number };
    console.log(JSON.stringify({ level: 'info', msg: 'fewest floor listening', url: `http://127.0.0.1:${port}` }));
  });
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      server.close();
      server.closeAllConnections();
      pool.end().finally(() => process.exit(0));
    });
  }
}
