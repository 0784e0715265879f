/**
 * The floor: bare node:http + pg, no framework, answering the two hottest endpoints with
 * the same SQL as the service and the same JSON shape. What the service is compared with.
 *
 *   GET  /api/users/me/tasks?page=N
 *   POST /api/users/me/tasks   {"task":{"label":"..."}}
 *
 * Env: DATABASE_URL, PORT, HOST (127.0.0.1), POOL_SIZE (10).
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import pg from 'pg';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.POOL_SIZE ?? 10) });
const PAGE = 50;
const META = { stability: 'unstable', notice: 'This output may change soon.' };
const LIST_PATH = '/api/users/me/tasks';

interface TaskRow {
  id: number;
  user_id: number;
  project_id: number | null;
  label: string;
  order: number;
  planned_count: number;
  state: string;
  started_at: Date | null;
  planned_at: Date | null;
  finished_at: Date | null;
  abandoned_at: Date | null;
}

const sec = (d: Date | null) => (d ? Math.floor(d.getTime() / 1000) : 0);
const present = (t: TaskRow) => ({
  type: 'task',
  id: t.id,
  attributes: {
    label: t.label,
    order: t.order,
    plannedCount: t.planned_count,
    state: t.state,
    startedAt: sec(t.started_at),
    plannedAt: sec(t.planned_at),
    finishedAt: sec(t.finished_at),
    abandonedAt: sec(t.abandoned_at),
  },
  relationships: {
    user: { data: { type: 'user', id: t.user_id } },
    project: { data: t.project_id === null ? null : { type: 'project', id: t.project_id } },
  },
});

function send(res: ServerResponse, status: number, body: unknown) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

async function authenticate(req: IncomingMessage): Promise<number | null> {
  const header = req.headers.authorization?.trim() ?? '';
  const token = header.replace(/^bearer\s+/i, '');
  if (!/^[A-Za-z0-9_-]{20,200}$/.test(token)) return null;
  const hash = createHash('sha256').update(token).digest('hex');
  const { rows } = await pool.query(
    `select u.id, u.username from access_tokens t join users u on u.id = t.user_id
      where t.token_hash = $1 and t.expires_at > $2`,
    [hash, new Date()],
  );
  return rows[0]?.id ?? null;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function list(req: IncomingMessage, res: ServerResponse, userId: number, url: URL) {
  const page = Math.max(1, Number(url.searchParams.get('page') ?? 1) || 1);
  const cutoff = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate()) - 14 * 86_400_000);
  const where = `user_id = $1 and state <> 'abandoned' and (finished_at is null or finished_at >= $2)`;
  const [rows, count] = await Promise.all([
    pool.query<TaskRow>(`select * from tasks where ${where} order by "order" asc, id asc limit $3 offset $4`, [
      userId,
      cutoff,
      PAGE,
      (page - 1) * PAGE,
    ]),
    pool.query<{ count: string }>(`select count(*) as count from tasks where ${where}`, [userId, cutoff]),
  ]);
  const total = Number(count.rows[0]!.count);
  const base = `http://${req.headers.host}${LIST_PATH}`;
  const last = Math.max(1, Math.ceil(total / PAGE));
  const links: Record<string, string> = { first: `${base}?page=1`, last: `${base}?page=${last}` };
  if (page > 1) links.prev = `${base}?page=${page - 1}`;
  if (page < last) links.next = `${base}?page=${page + 1}`;
  send(res, 200, { data: rows.rows.map(present), links, meta: META });
}

async function create(req: IncomingMessage, res: ServerResponse, userId: number) {
  let label: unknown;
  try {
    label = JSON.parse(await readBody(req))?.task?.label;
  } catch {
    label = undefined;
  }
  if (typeof label !== 'string' || label.trim() === '') {
    send(res, 422, { errors: [{ status: 422, code: 'invalid' }] });
    return;
  }
  const client = await pool.connect();
  try {
    await client.query('begin');
    await client.query('select id from users where id = $1 for update', [userId]);
    const { rows } = await client.query<{ next: number }>(
      'select coalesce(max("order"), 0) + 1 as next from tasks where user_id = $1',
      [userId],
    );
    const now = new Date();
    const inserted = await client.query<TaskRow>(
      `insert into tasks (user_id, project_id, label, "order", planned_count, state, started_at, created_at)
       values ($1, null, $2, $3, 0, 'started', $4, $4) returning *`,
      [userId, label, rows[0]!.next, now],
    );
    await client.query('commit');
    send(res, 201, { data: present(inserted.rows[0]!), meta: META });
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
    if (url.pathname !== LIST_PATH) return send(res, 404, { errors: [{ status: 404 }] });
    const userId = await authenticate(req);
    if (userId === null) return send(res, 401, { errors: [{ status: 401 }] });
    if (req.method === 'GET') return list(req, res, userId, url);
    if (req.method === 'POST') return create(req, res, userId);
    return send(res, 405, { errors: [{ status: 405 }] });
  })().catch((error: unknown) => {
    console.error(error);
    if (!res.headersSent) send(res, 500, { errors: [{ status: 500 }] });
  });
});
server.keepAliveTimeout = 5_000;
server.listen(Number(process.env.PORT ?? 3100), process.env.HOST ?? '127.0.0.1');
