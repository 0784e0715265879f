/**
 * A Citus coordinator for a bench (`bench:citus`): checked before anything runs on it, laid out
 * by the project's own steps (`npm run migrate`, then `npm run citus:distribute`), and read for
 * what a request cost there: Citus's own counters of single-shard and multi-shard executions
 * (`citus_stat_counters`, Citus 13.1 and later; counted only by sessions that turn
 * `citus.enable_stat_counters` on) and, when the coordinator loads it, pg_stat_statements.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { ROOT } from './env.js';
import type { Session } from './session.js';

export interface CitusNode {
  host: string;
  port: number;
  groupId: number;
  role: string;
  active: boolean;
  shouldHaveShards: boolean;
}

export interface Coordinator {
  url: string;
  /** A client on the coordinator's database, closed at the end of the run. */
  admin: pg.Client;
  citusVersion: string;
  serverVersion: string;
  nodes: CitusNode[];
  /** The durability settings of the coordinator, to give the single-node reference the same. */
  durability: Record<string, string>;
}

/** A clear refusal: the scenario cannot run on what CITUS_DATABASE_URL names. */
export class NotACoordinator extends Error {}

/** Connects, and refuses a database without the citus extension or without workers. */
export async function openCoordinator(session: Session, url: string): Promise<Coordinator> {
  const admin = new pg.Client({ connectionString: url });
  try {
    await admin.connect();
  } catch (error) {
    throw new NotACoordinator(`cannot connect to CITUS_DATABASE_URL (${redact(url)}): ${(error as Error).message}`);
  }
  session.defer(() => admin.end());
  const citus = (await admin.query<{ v: string }>(`select extversion as v from pg_extension where extname = 'citus'`)).rows[0]?.v;
  if (!citus) {
    throw new NotACoordinator(
      `${redact(url)} has no citus extension: CITUS_DATABASE_URL must name a database of a Citus coordinator ` +
        '(`create extension citus` in that database on every node, workers added with citus_add_node).',
    );
  }
  const { rows } = await admin.query<{ nodename: string; nodeport: number; groupid: number; noderole: string; isactive: boolean; shouldhaveshards: boolean }>(
    'select nodename, nodeport, groupid, noderole::text as noderole, isactive, shouldhaveshards from pg_dist_node order by groupid, nodeid',
  );
  const nodes = rows.map((r) => ({ host: r.nodename, port: r.nodeport, groupId: r.groupid, role: r.noderole, active: r.isactive, shouldHaveShards: r.shouldhaveshards }));
  if (!nodes.some((n) => n.groupId !== 0 && n.active)) {
    throw new NotACoordinator(`${redact(url)} is not a coordinator with workers (pg_dist_node lists no active worker): add them with citus_add_node.`);
  }
  const setting = async (name: string) => (await admin.query<{ v: string }>('select current_setting($1) as v', [name])).rows[0]!.v;
  const durability: Record<string, string> = {};
  for (const name of ['fsync', 'synchronous_commit', 'full_page_writes']) durability[name] = await setting(name);
  return { url, admin, citusVersion: citus, serverVersion: await setting('server_version'), nodes, durability };
}

/** A URL without its password, for messages and reports. */
export function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(not a URL)';
  }
}

/** `npm run <script>` in this checkout with `env` over this process's environment; its output, or an error carrying it. */
export function npmRun(script: string, env: Record<string, string>): string {
  try {
    return execFileSync('npm', ['run', '--silent', script], { cwd: ROOT, env: { ...process.env, ...env }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`npm run ${script} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

/** How Citus holds each table of the schema: `distributed by user_id`, `reference`, or `local`. */
export async function tableLayout(admin: pg.Client): Promise<Array<{ table: string; layout: string; shards: number }>> {
  const { rows } = await admin.query<{ table: string; kind: string | null; column: string | null; shards: string | null }>(
    `select c.relname as table, t.citus_table_type as kind, t.distribution_column as column, t.shard_count::text as shards
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
       left join citus_tables t on t.table_name = c.oid
      where n.nspname = 'public' and c.relkind in ('r', 'p')
      order by 1`,
  );
  return rows.map((r) => ({
    table: r.table,
    layout: r.kind === null ? 'local' : r.kind === 'distributed' ? `distributed by ${r.column}` : r.kind,
    shards: Number(r.shards ?? 0),
  }));
}

/**
 * Whether this coordinator's sessions may turn `citus.enable_stat_counters` on (Citus 13.1 and
 * later, and the right to set it): tried in a transaction that is rolled back.
 */
export async function statCountersAvailable(admin: pg.Client): Promise<boolean> {
  try {
    await admin.query('begin');
    await admin.query(`set local citus.enable_stat_counters = on`);
    await admin.query('select query_execution_single_shard from citus_stat_counters limit 1');
    return true;
  } catch {
    return false;
  } finally {
    await admin.query('rollback').catch(() => undefined);
  }
}

/**
 * The environment that makes a child's PostgreSQL sessions count their executions (node-postgres
 * reads PGOPTIONS, as libpq does): only that process's statements are counted.
 */
export const STAT_COUNTERS_ENV = { PGOPTIONS: '-c citus.enable_stat_counters=on' };

export interface ShardExecutions {
  single: number;
  multi: number;
}

/** Citus's counters of the current database: statements run on one shard, and on several. */
export async function shardExecutions(admin: pg.Client): Promise<ShardExecutions> {
  const { rows } = await admin.query<{ single: string; multi: string }>(
    `select query_execution_single_shard::text as single, query_execution_multi_shard::text as multi
       from citus_stat_counters where name = current_database()`,
  );
  return { single: Number(rows[0]?.single ?? 0), multi: Number(rows[0]?.multi ?? 0) };
}

/** Whether pg_stat_statements can be read in this database (installed and loaded). */
export async function statementStatsReadable(admin: pg.Client): Promise<boolean> {
  try {
    await admin.query('select 1 from pg_stat_statements limit 1');
    return true;
  } catch {
    return false;
  }
}

/**
 * The pid of the PostgreSQL server behind a connection when it runs on this machine (its
 * backend's parent, from /proc), so that the bench counts its CPU as its own; undefined for
 * a server elsewhere or one /proc does not show.
 */
export async function localPostmasterPid(url: string): Promise<number | undefined> {
  const host = new URL(url).hostname;
  if (!['127.0.0.1', 'localhost', '::1', '[::1]'].includes(host)) return undefined;
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
    const backend = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
    if (!existsSync(`/proc/${backend}/stat`)) return undefined;
    const stat = readFileSync(`/proc/${backend}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The URL of a node of the cluster: the coordinator's URL with the node's host and port. */
export function nodeUrl(coordinatorUrl: string, node: CitusNode): string {
  const u = new URL(coordinatorUrl);
  u.hostname = node.host;
  u.port = String(node.port);
  return u.toString();
}
