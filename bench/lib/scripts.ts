/** Request scripts more than one scenario sends (autocannon: a script gives each connection its requests). */
import type pg from 'pg';
import type { BenchRequest, Script } from './load.js';

/** Page 1 of the user's tasks, again and again. */
export const listFirstPage = (token: string): Script => () => () => ({ method: 'GET', path: '/api/users/me/tasks?page=1', token });

/**
 * Task creations with a label only; `label` gets the connection and its request's index,
 * `headers` (when given) each request's extra headers.
 */
export function createTask(token: string, label: (connection: number, k: number) => string, headers?: () => Record<string, string>): Script {
  return (connection) => {
    let k = 0;
    return (): BenchRequest => ({
      method: 'POST',
      path: '/api/users/me/tasks',
      token,
      body: { task: { label: label(connection, k++) } },
      ...(headers ? { headers: headers() } : {}),
    });
  };
}

/**
 * Flips tasks finished ⇄ planned (finish / replan). Connection c owns the tasks at indexes
 * ≡ c (mod connections), so no two requests race on a task; `states` holds each task's state.
 */
export function flipTaskStates(ids: readonly number[], states: Map<number, string>, token: string, connections: number): Script {
  return (connection) => {
    const own = ids.filter((_, i) => i % connections === connection);
    let k = 0;
    return (): BenchRequest => {
      const id = own[k++ % own.length]!;
      const next = states.get(id) === 'planned' ? 'finished' : 'planned';
      states.set(id, next);
      return { method: 'PUT', path: `/api/tasks/${id}/state`, token, body: { task: { state: next } } };
    };
  };
}

/** Reads the current states of these tasks or projects into `states` (before a script that flips them). */
export async function readStates(client: pg.Client, table: 'tasks' | 'projects', ids: readonly number[], states: Map<number, string>): Promise<void> {
  const { rows } = await client.query<{ id: number; state: string }>(`select id, state from ${table} where id = any($1::int[])`, [ids]);
  for (const row of rows) states.set(row.id, row.state);
}
