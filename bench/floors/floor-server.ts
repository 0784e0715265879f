/**
 * The floor: bare node:http + pg, no framework, no ORM, no validation library. It answers
 * the two scenarios the service is compared on, with the statements the service sends
 * and byte-for-byte the same JSON; bench/scenarios/throughput.ts checks both (the
 * statements through pg_stat_statements query ids).
 *
 * MikroORM 7 does not send bind parameters: it writes the values into the SQL text as
 * literals and sends it with the simple query protocol. The floor does the same (`inline`),
 * so PostgreSQL parses and plans exactly what it does for the service.
 *
 *   GET  /api/users/me/tasks?page=N   token lookup; the page with its total (one statement)
 *   POST /api/users/me/tasks          token lookup; begin, lock user row, insert (with
 *                                     the next order), commit
 *
 * Env: DATABASE_URL, PORT, HOST (127.0.0.1), POOL_SIZE (10, the service's default).
 * Runs with Node's own type stripping: `node bench/floors/floor-server.ts`.
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

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.POOL_SIZE ?? 10) });
const PAGE = 50;
const DAY_MS = 86_400_000;
const META = { stability: 'unstable', notice: 'This output may change soon.' };
const LIST_PATH = '/api/users/me/tasks';

// The service's statements, as its ORM logs them (test/http/query-count.test.ts, bench/README.md).
const SQL = {
  token: `select u.id, u.username from access_tokens t join users u on u.id = t.user_id
      where t.token_hash = $1 and t.expires_at > $2`,
  // src/tasks/task.store.ts listTasks: the page with its total, one statement.
  list: `select c.total, t.id, t.user_id, t.project_id, t.label, t."order", t.planned_count, t.state,
            coalesce(floor(extract(epoch from t.started_at)), 0)::float8 as started_at, coalesce(floor(extract(epoch from t.planned_at)), 0)::float8 as planned_at,
            coalesce(floor(extract(epoch from t.finished_at)), 0)::float8 as finished_at, coalesce(floor(extract(epoch from t.abandoned_at)), 0)::float8 as abandoned_at
       from (select ((select count(*) from tasks where user_id = $1 and state not in ('abandoned', 'finished'))
                  + (select count(*) from tasks where user_id = $2 and state = 'finished' and finished_at >= $3))::int as total) as c
       left join lateral (
         select tasks.* from (
           select user_id, id from tasks
            where user_id = $4 and state <> 'abandoned' and (state <> 'finished' or finished_at >= $5)
            order by "order", id
            limit $6 offset $7
         ) as page join tasks on tasks.user_id = page.user_id and tasks.id = page.id
       ) as t on true
      order by t."order", t.id`,
  lock: 'select id from users where id = $1 for no key update',
  // The order from the counter on the user's row, as the service's create takes it.
  insert: `with next_order as (update users set next_task_order = next_task_order + 1 where id = $4 returning next_task_order - 1 as next)
     insert into tasks (user_id, project_id, label, "order", planned_count, state, started_at, planned_at, created_at)
     values ($1, $2, $3, (select next from next_order), $5, $6, $7, $8, $9)
     returning id, "order"`,
};

interface TaskRow {
  id: number;
  user_id: number;
  project_id: number | null;
  label: string;
  order: number;
  planned_count: number;
  state: string;
  started_at: number;
  planned_at: number;
  finished_at: number;
  abandoned_at: number;
}

/** A row of the list statement: a task with the total, or only the total on an empty page. */
type ListedRow = TaskRow & { total: number };

/** `$n` → the literal value, as MikroORM's platform.formatQuery writes it. */
function literal(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'number') return String(value);
  if (value instanceof Date) return `'${value.toISOString()}'`;
  return pg.escapeLiteral(String(value));
}
const inline = (text: string, params: unknown[]) => text.replace(/\$(\d+)/g, (_, n: string) => literal(params[Number(n) - 1]));

const sec = (d: Date | null) => (d ? Math.floor(d.getTime() / 1000) : 0);
/** A task as the service presents it, from a row whose timestamps are whole seconds. */
const present = (t: TaskRow) => ({
  type: 'task',
  id: t.id,
  attributes: {
    label: t.label,
    order: t.order,
    plannedCount: t.planned_count,
    state: t.state,
    startedAt: t.started_at,
    plannedAt: t.planned_at,
    finishedAt: t.finished_at,
    abandonedAt: t.abandoned_at,
  },
  relationships: {
    user: { data: { type: 'user', id: t.user_id } },
    project: { data: t.project_id === null ? null : { type: 'project', id: t.project_id } },
  },
});

/** The service's clock: whole seconds. */
const now = () => new Date(Math.floor(Date.now() / 1000) * 1000);

function send(res: ServerResponse, status: number, body: unknown) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

async function authenticate(req: IncomingMessage): Promise<number | null> {
  const value = req.headers.authorization?.trim() ?? '';
  const token = /^bearer\s+(\S+)$/i.exec(value)?.[1] ?? value;
  if (!/^[A-Za-z0-9_-]{20,200}$/.test(token)) return null;
  const hash = createHash('sha256').update(token).digest('hex');
  const { rows } = await pool.query<{ id: number; username: string }>(inline(SQL.token, [hash, now()]));
  return rows[0]?.id ?? null;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function list(req: IncomingMessage, res: ServerResponse, userId: number, url: URL) {
  const raw = url.searchParams.get('page');
  const page = raw === null ? 1 : Number(raw);
  if (!Number.isSafeInteger(page) || page < 1) return send(res, 400, { errors: [{ status: '400', code: 'invalid' }] });
  const n = now();
  const cutoff = new Date(Math.floor(n.getTime() / DAY_MS) * DAY_MS - 14 * DAY_MS);
  const { rows } = await pool.query<ListedRow>(inline(SQL.list, [userId, userId, cutoff, userId, cutoff, PAGE, (page - 1) * PAGE]));
  const total = Number(rows[0]?.total ?? 0);
  const data = rows.filter((r) => r.id !== null).map(present);
  const base = `http://${req.headers.host}${LIST_PATH}`;
  const last = Math.max(1, Math.ceil(total / PAGE));
  const links: Record<string, string> = { first: `${base}?page=1`, last: `${base}?page=${last}` };
  if (page > 1) links.prev = `${base}?page=${page - 1}`;
  if (page < last) links.next = `${base}?page=${page + 1}`;
  send(res, 200, { data, links, meta: META });
}

async function create(res: ServerResponse, userId: number, body: string) {
  let label: unknown;
  try {
    label = JSON.parse(body)?.task?.label;
  } catch {
    label = undefined;
  }
  if (typeof label !== 'string' || label.length === 0 || label.length > 1000) {
    return send(res, 422, { errors: [{ status: '422', code: 'invalid' }] });
  }
  const client = await pool.connect();
  try {
    await client.query('begin');
    await client.query(inline(SQL.lock, [userId]));
    const at = now();
    const inserted = await client.query<{ id: number; order: number }>(inline(SQL.insert, [userId, null, label, userId, 0, 'started', at, null, at]));
    const order = inserted.rows[0]!.order;
    await client.query('commit');
    const task: TaskRow = {
      id: inserted.rows[0]!.id,
      user_id: userId,
      project_id: null,
      label,
      order,
      planned_count: 0,
      state: 'started',
      started_at: sec(at),
      planned_at: 0,
      finished_at: 0,
      abandoned_at: 0,
    };
    send(res, 201, { data: present(task), meta: META });
  } catch (error) {
    await client.query('rollback').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://x');
  (async () => {
    if (url.pathname === '/readyz') return send(res, 200, { status: 'ready' });
    if (url.pathname !== LIST_PATH) return send(res, 404, { errors: [{ status: '404', code: 'missing_endpoint' }] });
    // Like the service, the body is read before anything touches the database.
    const body = req.method === 'POST' ? await readBody(req) : '';
    const userId = await authenticate(req);
    if (userId === null) return send(res, 401, { errors: [{ status: '401', code: 'unauthorized' }] });
    if (req.method === 'GET') return list(req, res, userId, url);
    if (req.method === 'POST') return create(res, userId, body);
    return send(res, 404, { errors: [{ status: '404', code: 'missing_endpoint' }] });
  })().catch((error: unknown) => {
    console.error(error);
    if (!res.headersSent) send(res, 500, { errors: [{ status: '500', code: 'internal_error' }] });
  });
});
server.keepAliveTimeout = 5_000;
server.listen(Number(process.env.PORT ?? 3100), process.env.HOST ?? '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  console.log(JSON.stringify({ level: 'info', msg: 'floor listening', url: `http://127.0.0.1:${port}` }));
});
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    server.close();
    server.closeAllConnections();
    pool.end().finally(() => process.exit(0));
  });
}
