/**
 * SIGKILL in the middle of a load of writes: after a restart every write that was
 * acknowledged with a 2xx is there, and no transaction is half-applied (task orders are
 * still a permutation, no more than 3 projects started).
 */
import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { eventually } from '../helpers/eventually.js';
import { call, registerUser } from '../helpers/http.js';
import { spawnService } from '../helpers/spawn-service.js';
import { createTestDatabase } from '../helpers/test-app.js';

const DUE = Math.floor(Date.now() / 1000) + 30 * 86_400;

describe('a server killed during writes', () => {
  it('keeps every acknowledged write and no half-applied one', async () => {
    const databaseUrl = await createTestDatabase();
    const env = { DATABASE_URL: databaseUrl, RATE_LIMIT_PER_MINUTE: '0', RATE_LIMIT_AUTH_PER_MINUTE: '0' };
    const first = await spawnService(env);
    const { id: userId, token } = await registerUser(first.url, 'crash');
    const projectIds: number[] = [];
    for (let i = 0; i < 6; i++) {
      projectIds.push((await call(first.url, 'POST', '/api/users/me/projects', { token, body: { project: { name: `c${i}` } } })).body.data.id);
    }

    const acknowledgedTasks: number[] = [];
    const acknowledgedLabels = new Map<number, string>();
    let killed = false;
    let writes = 0;
    let running = 8;
    const failures: string[] = [];
    const worker = async (n: number) => {
      for (let i = 0; !killed; i++) {
        try {
          const label = `w${n}-${i}`;
          const created = await call(first.url, 'POST', '/api/users/me/tasks', {
            token,
            body: { task: { label, project_id: projectIds[i % projectIds.length] } },
          });
          if (created.status === 201) {
            acknowledgedTasks.push(created.body.data.id);
            acknowledgedLabels.set(created.body.data.id, label);
          }
          await call(first.url, 'PUT', `/api/tasks/${created.body.data.id}/order`, { token, body: { task: { order: 1 + (i % 5) } } });
          const project = projectIds[(n + i) % projectIds.length]!;
          await call(first.url, 'PUT', `/api/projects/${project}/state`, { token, body: { project: { state: 'started', due_at: DUE } } });
          await call(first.url, 'PUT', `/api/projects/${project}/state`, { token, body: { project: { state: 'paused' } } });
          writes += 4;
        } catch (error) {
          if (!killed) failures.push(String(error));
          return; // the server is gone
        }
      }
    };
    const load = Promise.all(Array.from({ length: 8 }, (_, n) => worker(n).finally(() => (running -= 1))));
    // Kill once a good number of writes went through, while the load is still running.
    await eventually(() => writes >= 120 || running === 0, { message: '120 writes went through', timeout: 30_000, interval: 5 });
    expect(failures).toEqual([]);
    first.child.kill('SIGKILL');
    killed = true;
    await first.exited;
    await load;
    expect(acknowledgedTasks.length).toBeGreaterThan(20);

    const second = await spawnService(env);
    try {
      const login = await call(second.url, 'POST', '/api/users/authorizations', { body: { username: 'crash', password: 'password1' } });
      for (const id of acknowledgedTasks) {
        const task = await call(second.url, 'GET', `/api/tasks/${id}`, { token: login.body.meta.token });
        expect(task.status, `task ${id}`).toBe(200);
        expect(task.body.data.attributes.label).toBe(acknowledgedLabels.get(id));
      }
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      try {
        const orders = (await client.query(`select "order" from tasks where user_id = $1 order by "order"`, [userId])).rows.map((r) => r.order);
        expect(orders).toEqual(Array.from({ length: orders.length }, (_, i) => i + 1));
        const started = (await client.query(`select count(*)::int as n from projects where user_id = $1 and state = 'started'`, [userId])).rows[0].n;
        expect(started).toBeLessThanOrEqual(3);
        // A project's tasks follow its state: none newed under a started project, none started under a paused one.
        const mismatched = await client.query(
          `select t.id from tasks t join projects p on p.id = t.project_id
            where (p.state = 'started' and t.state = 'newed') or (p.state = 'paused' and t.state = 'started')`,
        );
        expect(mismatched.rows).toEqual([]);
      } finally {
        await client.end();
      }
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  }, 90_000);
});
