/**
 * Bulk seeding with plain SQL (generate_series), not through HTTP: a user with its
 * projects and tasks in three statements, plus a known access token stored as its SHA-256
 * with a far expiry, and a real scrypt password hash (so `authorize` works too).
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { hashAccessToken, hashPassword } from '../../src/users/credentials.js';
import { loadConfig } from '../../src/config.js';
import { recountUserCountersSql } from '../../src/tasks/task.sql.js';

export const BENCH_PASSWORD = 'bench-password';

export interface SeededUser {
  id: number;
  username: string;
  /** The token handed to clients; only its SHA-256 is in the database. */
  token: string;
  tasks: number;
  projects: number[];
}

export interface TaskMix {
  /** Orders 1..planned are `planned` (plannedCount 1, startedAt and plannedAt set). */
  planned?: number;
  /** The next `finishedOld` orders were finished 30 days ago (left out of the list). */
  finishedOld?: number;
  /** The next `abandoned` orders are abandoned (left out of the list). */
  abandoned?: number;
}

/** One hash for every seeded user: computed once, with the production scrypt cost. */
let passwordHash: Promise<string> | undefined;

/** The access token of a seeded user, the same in every run for the same user and name. */
export function knownToken(userId: number, username: string): string {
  // The form the service issues (src/users/credentials.ts): the user's id, then 32 bytes (here
  // derived from the name, so that a run can rebuild it).
  const bytes = Buffer.alloc(40);
  bytes.writeBigUInt64BE(BigInt(userId), 0);
  createHash('sha256').update(`bench-access-token-for-${username}`).digest().copy(bytes, 8);
  return bytes.toString('base64url');
}

export async function seedUser(
  client: pg.Client,
  username: string,
  taskCount: number,
  projectCount: number,
  mix: TaskMix = {},
): Promise<SeededUser> {
  passwordHash ??= hashPassword(BENCH_PASSWORD, loadConfig({}).passwordHashCost);
  const { rows: users } = await client.query<{ id: number }>(
    `with u as (insert into users (username, password_hash, created_at) values ($1, $2, now()) returning id, username),
          n as (insert into usernames (username, user_id) select username, id from u)
     select id from u`,
    [username, await passwordHash],
  );
  // ids are bigint: pg hands them over as text, and the API takes numbers.
  const id = Number(users[0]!.id);
  const { rows: projects } = await client.query<{ id: number }>(
    `insert into projects (user_id, name, slug, created_at)
     select $1, 'Project-' || g, 'project-' || g, now() from generate_series(1, $2::int) g
     returning id`,
    [id, projectCount],
  );
  const projectIds = projects.map((p) => Number(p.id)).sort((a, b) => a - b);
  const planned = mix.planned ?? 0;
  const finishedTo = planned + (mix.finishedOld ?? 0);
  const abandonedTo = finishedTo + (mix.abandoned ?? 0);
  await client.query(
    `insert into tasks (user_id, project_id, label, "order", planned_count, state,
                        started_at, planned_at, finished_at, abandoned_at, created_at)
     select $1,
            case when cardinality($3::int[]) = 0 then null else ($3::int[])[1 + (g % cardinality($3::int[]))] end,
            'Task ' || g, g,
            case when g <= $5 then 1 else 0 end,
            case when g <= $4 then 'planned' when g <= $5 then 'finished' when g <= $6 then 'abandoned' else 'newed' end,
            case when g <= $5 then now() - interval '40 days' else null end,
            case when g <= $5 then now() - interval '35 days' else null end,
            case when g > $4 and g <= $5 then now() - interval '30 days' else null end,
            case when g > $5 and g <= $6 then now() - interval '20 days' else null end,
            now() - interval '40 days'
     from generate_series(1, $2::int) g`,
    [id, taskCount, `{${projectIds.join(',')}}`, planned, finishedTo, abandonedTo],
  );
  // The counters on the user's row a write moves (the next order, the open tasks: docs/design/writes.md).
  await client.query(recountUserCountersSql('$1'), [id]);
  const token = knownToken(id, username);
  await client.query(
    `insert into access_tokens (user_id, token_hash, created_at, expires_at)
     values ($1, $2, now(), now() + interval '10 years')`,
    [id, hashAccessToken(token)],
  );
  return { id, username, token, tasks: taskCount, projects: projectIds };
}

/** Task ids of a user with orders in [from, to], by order. */
export async function taskIdsByOrder(client: pg.Client, userId: number, from: number, to: number): Promise<number[]> {
  const { rows } = await client.query<{ id: number }>(
    'select id from tasks where user_id = $1 and "order" between $2 and $3 order by "order"',
    [userId, from, to],
  );
  return rows.map((r) => r.id);
}

/**
 * bench_main, the user most scenarios load: 10,000 tasks over 200 projects, orders 1–3,000
 * planned, the next 300 finished 30 days ago and 200 abandoned (left out of the list), the
 * rest newed.
 */
export function seedMainUser(client: pg.Client): Promise<SeededUser> {
  return seedUser(client, 'bench_main', 10_000, 200, { planned: 3_000, finishedOld: 300, abandoned: 200 });
}
