/**
 * Log lines an operator acts on: a request that timed out waiting for a database connection
 * says why (every connection of the process was busy), at warn, without a stack; and the
 * primary's "worker died" line names the dead worker without a second `pid` key (every line
 * already carries the primary's own `pid`, and JSON readers keep only one of two).
 */
import pg from 'pg';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startService } from '../../src/server.js';
import { eventually } from '../helpers/eventually.js';
import { call, registerUser } from '../helpers/http.js';
import { spawnService } from '../helpers/spawn-service.js';
import { createTestDatabase } from '../helpers/test-app.js';

describe('operator logs', () => {
  it('says that a pool-wait timeout came from a full pool, at warn', async () => {
    const databaseUrl = await createTestDatabase();
    const lines: Array<Record<string, any>> = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const config = { ...loadConfig({}), databaseUrl, port: 0, host: '127.0.0.1', passwordHashCost: 1024, rateLimitAuthPerMinute: 0, databasePoolSize: 1 };
    // A request gives up on the pool after 2 s instead of 5 s: the line is checked, not the wait
    // (2 s, not less: the requests before the lock, and the webhook deliverer's rounds, share
    // the one connection, and must not time out on a loaded machine).
    const service = await startService({ config, logger, poolWaitMs: 2_000 });
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    try {
      const { token } = await registerUser(service.url, 'waiter');
      // An operator's lock holds the one connection of the pool inside a request.
      await admin.query('begin');
      await admin.query('lock table access_tokens in access exclusive mode');
      const holder = call(service.url, 'GET', '/api/users/me', { token });
      await eventually(async () => {
        const { rows } = await admin.query("select count(*)::int as n from pg_locks where relation = 'access_tokens'::regclass and not granted");
        return rows[0].n >= 1;
      }, { message: 'a request waited on the lock', timeout: 30_000 });
      const starved = await call(service.url, 'GET', '/api/users/me', { token });
      expect(starved.status).toBe(503);
      await admin.query('commit');
      expect((await holder).status).toBe(200);

      const line = lines.find((l) => l.msg === 'database unavailable: answered 503');
      expect(line, JSON.stringify(lines.filter((l) => l.msg !== 'request'))).toBeDefined();
      expect(line!.level).toBe(40);
      expect(line!.reason).toMatch(/all 1 of this process's pool were busy/);
      expect(JSON.stringify(line)).not.toMatch(/"stack"/);
      expect(lines.filter((l) => l.level >= 50)).toEqual([]);
    } finally {
      await admin.end();
      await service.stop();
    }
  }, 60_000);

  it('logs a dead worker once by its own key, not as a second pid', async () => {
    const databaseUrl = await createTestDatabase();
    const service = await spawnService({ DATABASE_URL: databaseUrl, WEB_CONCURRENCY: '2' });
    try {
      expect((await call(service.url, 'GET', '/healthz')).status).toBe(200);
      let workerPid = 0;
      await eventually(() => {
        const line = service.output().split('\n').find((l) => l.includes('"msg":"request"'));
        workerPid = line ? JSON.parse(line).pid : 0;
        return workerPid > 0;
      }, { message: 'a worker logged a request', timeout: 30_000 });
      process.kill(workerPid, 'SIGKILL');
      let died = '';
      await eventually(() => {
        died = service.output().split('\n').find((l) => l.includes('worker died')) ?? '';
        return died !== '';
      }, { message: 'the primary logged the dead worker', timeout: 30_000 });
      expect(died.match(/"pid":/g), died).toHaveLength(1);
      expect(JSON.parse(died)).toMatchObject({ level: 50, workerPid, signal: 'SIGKILL' });
      expect(JSON.parse(died).pid).not.toBe(workerPid);
    } finally {
      service.child.kill('SIGTERM');
      await service.exited;
    }
  }, 60_000);
});
