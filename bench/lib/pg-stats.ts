/**
 * What pg_stat_statements holds for one PostgreSQL role: each process under test connects as
 * its own role (createRoles), so its statements, their calls and their time are its own. Every
 * request starts with the token's lookup, so that statement's calls count the requests served.
 */
import type pg from 'pg';
import { sleep } from './env.js';

export interface StatementStat {
  queryid: string;
  calls: number;
  totalMs: number;
  meanMs: number;
  query: string;
}

/**
 * The statements of `role` (by default the client's own, minus its queries of the view) on
 * the client's database since the last reset, most called first.
 */
export async function statementStats(client: pg.Client, role?: string): Promise<StatementStat[]> {
  const { rows } = await client.query<{ queryid: string; calls: string; total: number; mean: number; query: string }>(
    `select s.queryid::text as queryid, s.calls, s.total_exec_time as total, s.mean_exec_time as mean, s.query
       from pg_stat_statements s join pg_roles r on r.oid = s.userid
      where r.rolname = coalesce($1::name, current_user)
        and s.dbid = (select oid from pg_database where datname = current_database())
        and s.query not ilike '%pg_stat_statements%'
      order by s.calls desc`,
    [role ?? null],
  );
  return rows.map((r) => ({ queryid: r.queryid, calls: Number(r.calls), totalMs: r.total, meanMs: r.mean, query: r.query }));
}

/** The token's lookup, the first statement of every authenticated request. */
export const isTokenLookup = (s: StatementStat) => /from access_tokens t join users u/.test(s.query);

/** Statement calls, requests (token lookups), execution time (ms) and query ids, summed. */
export function totals(stats: StatementStat[]): { calls: number; requests: number; ms: number; ids: Set<string> } {
  return {
    calls: stats.reduce((a, s) => a + s.calls, 0),
    requests: stats.filter(isTokenLookup).reduce((a, s) => a + s.calls, 0),
    ms: stats.reduce((a, s) => a + s.totalMs, 0),
    ids: new Set(stats.map((s) => s.queryid)),
  };
}

export async function resetStatementStats(client: pg.Client): Promise<void> {
  await client.query('select pg_stat_statements_reset()');
}

/** Waits (10 s at most) until the role has no statement running: requests in flight when a load stopped. */
export async function quiesce(client: pg.Client, role: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const { rows } = await client.query<{ n: string }>(`select count(*) as n from pg_stat_activity where usename = $1 and state <> 'idle'`, [role]);
    if (Number(rows[0]!.n) === 0) return;
    await sleep(100);
  }
}
