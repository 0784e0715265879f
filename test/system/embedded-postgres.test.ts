/**
 * The service's own PostgreSQL as an operator meets it: a failed start says PostgreSQL's
 * reason; a postmaster that dies is logged at error with its last lines, /healthz fails
 * while it is down, and it is restarted; a Ctrl-C in a terminal (SIGINT to the whole
 * foreground process group) lets in-flight requests finish; and a service killed with
 * SIGKILL does not leave its PostgreSQL running.
 */
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startService } from '../../src/server.js';
import { eventually } from '../helpers/eventually.js';
import { tempDataDirs } from '../helpers/own-database.js';
import { spawnService, stopServices } from '../helpers/spawn-service.js';

const tempDataDir = tempDataDirs('planning-embedded-', afterAll);

function postmasterPid(dataDir: string): number | null {
  try {
    return Number(readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return null;
  }
}

/** Running, and not a zombie its parent has yet to reap. */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}

async function status(url: string): Promise<number> {
  return fetch(url).then(
    (r) => r.status,
    () => 0,
  );
}

function configFor(dataDir: string) {
  return { ...loadConfig({}), dataDir, port: 0, host: '127.0.0.1', databaseUrl: undefined, passwordHashCost: 1024, rateLimitAuthPerMinute: 0 };
}

/** A setting PostgreSQL refuses at start, as an operator's typo in the configuration would be. */
const BROKEN_SETTING = "work_mem = 'plenty'\n";

describe('the embedded PostgreSQL', () => {
  it("prints PostgreSQL's own reason when it cannot start", async () => {
    // A data folder a service started on and stopped (test/helpers/own-database.ts).
    const dataDir = await tempDataDir();
    await fs.appendFile(path.join(dataDir, 'pg', 'postgresql.auto.conf'), BROKEN_SETTING);

    const failed = await spawnService({ DATA_DIR: dataDir }).then(
      () => 'started',
      (error: Error) => error.message,
    );
    expect(failed).toMatch(/service exited with 1 before listening/);
    expect(failed).toContain('invalid value for parameter "work_mem"');
  }, 60_000);

  it.each(['/proc/planning-nowhere', '/proc/planning-nowhere/deeper'])('refuses a DATA_DIR it cannot make (%s) at once, saying so in one line', async (dataDir) => {
    // Node's recursive mkdir spun there for ever, the service neither listening nor exiting.
    const started = performance.now();
    const failed = await spawnService({ DATA_DIR: dataDir }).then(
      () => 'started',
      (error: Error) => error.message,
    );
    expect(failed).toMatch(/service exited with 1 before listening/);
    expect(failed).toContain("Could not start: ENOENT: no such file or directory, mkdir '/proc/planning-nowhere'");
    expect(failed).not.toMatch(/\n\s+at /);
    expect(performance.now() - started).toBeLessThan(15_000);
  }, 30_000);

  it('is watched: its death is logged at error with its last lines, /healthz fails while it is down, and it is restarted', async () => {
    const dataDir = await tempDataDir();
    const lines: Array<Record<string, any>> = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    // Restarts a tenth as far apart as by default (1 s, 2 s, …): what is checked is that they
    // are tried, fail with PostgreSQL's reason and succeed once it is mended, not their pace.
    const service = await startService({ config: configFor(dataDir), logger, embeddedRestartDelaysMs: [100, 200, 400, 800, 1_600, 3_000] });
    try {
      expect(await status(`${service.url}/healthz`)).toBe(200);
      // The restarts fail until the configuration is mended, so "down" lasts.
      const conf = path.join(dataDir, 'pg', 'postgresql.auto.conf');
      const good = await fs.readFile(conf, 'utf8');
      await fs.appendFile(conf, BROKEN_SETTING);
      const pid = postmasterPid(dataDir)!;
      process.kill(pid, 'SIGKILL');

      await eventually(async () => (await status(`${service.url}/healthz`)) === 503, { message: '/healthz answered 503 while PostgreSQL was down', timeout: 30_000 });
      const health = await fetch(`${service.url}/healthz`);
      expect(health.headers.get('retry-after')).toBe('5');
      expect(((await health.json()) as any).errors[0].code).toBe('unavailable');

      const died = lines.find((l) => /embedded PostgreSQL exited/.test(l.msg));
      expect(died, 'no line says PostgreSQL exited').toBeDefined();
      expect(died!.level).toBe(50);
      expect(died!.signal).toBe('SIGKILL');
      expect(died!.lastLines.length).toBeGreaterThan(0);
      await eventually(
        () => lines.some((l) => l.level === 50 && /failed to restart/.test(l.msg) && /invalid value for parameter "work_mem"/.test(l.reason)),
        { message: 'a failed restart was logged with its reason', timeout: 30_000 },
      );

      await fs.writeFile(conf, good);
      await eventually(async () => (await status(`${service.url}/healthz`)) === 200, { message: 'PostgreSQL was restarted and /healthz answered 200 again', timeout: 60_000 });
      expect(lines.some((l) => l.level === 40 && /embedded PostgreSQL restarted/.test(l.msg))).toBe(true);
      expect(postmasterPid(dataDir)).not.toBe(pid);
      // The pool reconnects: the service works again without a restart of its own.
      await eventually(async () => {
        const res = await fetch(`${service.url}/api/users`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ user: { username: `back${Date.now()}`, password: 'password1' } }),
        });
        return res.status === 201;
      }, { message: 'a registration succeeded after the restart', timeout: 30_000 });
    } finally {
      await service.stop();
    }
  }, 90_000);

  it("fails /healthz on every worker while the primary's PostgreSQL is down (WEB_CONCURRENCY=2)", async () => {
    const dataDir = await tempDataDir();
    const service = await spawnService({ DATA_DIR: dataDir, WEB_CONCURRENCY: '2' });
    try {
      expect(await status(`${service.url}/healthz`)).toBe(200);
      const conf = path.join(dataDir, 'pg', 'postgresql.auto.conf');
      const good = await fs.readFile(conf, 'utf8');
      await fs.appendFile(conf, BROKEN_SETTING);
      process.kill(postmasterPid(dataDir)!, 'SIGKILL');
      // Connections are spread over both workers: eight 503s in a row means both say so.
      await eventually(async () => {
        const answers = await Promise.all(Array.from({ length: 8 }, () => fetch(`${service.url}/healthz`, { headers: { Connection: 'close' } }).then((r) => r.status)));
        return answers.every((s) => s === 503);
      }, { message: 'eight /healthz in a row answered 503', timeout: 30_000 });
      await fs.writeFile(conf, good);
      await eventually(async () => {
        const answers = await Promise.all(Array.from({ length: 8 }, () => fetch(`${service.url}/healthz`, { headers: { Connection: 'close' } }).then((r) => r.status)));
        return answers.every((s) => s === 200);
      }, { message: '/healthz answered 200 again on every worker', timeout: 60_000 });
      expect(service.output()).toMatch(/embedded PostgreSQL exited; restarting it/);
    } finally {
      service.child.kill('SIGTERM');
      expect(await service.exited).toBe(0);
    }
    expect(postmasterPid(dataDir), 'PostgreSQL was left running').toBeNull();
  }, 90_000);

  it('keeps running through a Ctrl-C to the terminal until in-flight requests have finished', async () => {
    const dataDir = await tempDataDir();
    const service = await spawnService({ DATA_DIR: dataDir, RATE_LIMIT_AUTH_PER_MINUTE: '0' }, { detached: true });
    const port = Number(/127\.0\.0\.1:(\d+)\)/.exec(service.output())![1]);
    const password = readFileSync(path.join(dataDir, 'pg-password'), 'utf8').trim();
    const admin = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password, database: 'planning' });
    await admin.connect();
    admin.on('error', () => undefined);
    try {
      // Requests held in flight by a lock an operator holds.
      await admin.query('begin');
      await admin.query('lock table users in access exclusive mode');
      const inFlight = Array.from({ length: 4 }, (_, i) =>
        fetch(`${service.url}/api/users`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Connection: 'close' },
          body: JSON.stringify({ user: { username: `ctrl_c${i}`, password: 'password1' } }),
        }).then((r) => r.status),
      );
      await eventually(async () => {
        const { rows } = await admin.query("select count(*)::int as n from pg_locks where relation = 'users'::regclass and not granted");
        return rows[0].n >= 4;
      }, { message: '4 requests waited on the lock', timeout: 30_000 });

      // What a terminal does on Ctrl-C: SIGINT to every process of the foreground group.
      process.kill(-service.child.pid!, 'SIGINT');
      await eventually(() => /shutting down/.test(service.output()), { message: 'the service logged that it is shutting down', timeout: 30_000 });
      await admin.query('commit');
      expect(await Promise.all(inFlight)).toEqual([201, 201, 201, 201]);
      expect(await service.exited).toBe(0);
      expect(postmasterPid(dataDir), 'PostgreSQL was left running').toBeNull();
    } finally {
      await admin.end().catch(() => undefined);
      service.child.kill('SIGKILL');
    }
  }, 60_000);

  it('does not stay running when the service is killed with SIGKILL', async () => {
    const dataDir = await tempDataDir();
    const service = await spawnService({ DATA_DIR: dataDir });
    const pid = postmasterPid(dataDir)!;
    expect(isRunning(pid)).toBe(true);
    service.child.kill('SIGKILL');
    await service.exited;
    await eventually(() => !isRunning(pid), { message: `the orphaned PostgreSQL (pid ${pid}) stopped`, timeout: 20_000 });
    // It stopped cleanly: its pid file is gone, and the next start reuses the data at once.
    expect(postmasterPid(dataDir)).toBeNull();
  }, 60_000);

  it('refuses a second service on a data folder another one runs on, and leaves the first one\'s database alone', async () => {
    const dataDir = await tempDataDir();
    const first = await spawnService({ DATA_DIR: dataDir });
    try {
      const pid = postmasterPid(dataDir)!;
      const second = await spawnService({ DATA_DIR: dataDir }).then(
        (service) => `started: ${service.url}`,
        (error: Error) => error.message,
      );
      expect(second).toMatch(/service exited with 1 before listening/);
      expect(second).toContain(`Another process of the service (pid ${first.child.pid}) runs on the data folder`);
      // The first one's PostgreSQL is the one it started, and it serves on.
      expect(postmasterPid(dataDir)).toBe(pid);
      expect(isRunning(pid)).toBe(true);
      expect((await fetch(`${first.url}/healthz`)).status).toBe(200);
    } finally {
      await stopServices([first]);
    }
    // Once the first has stopped, the folder is free.
    const third = await spawnService({ DATA_DIR: dataDir });
    await stopServices([third]);
  }, 90_000);
});
