/**
 * The whole service as a user runs it: its own embedded PostgreSQL under a data folder,
 * restarts on the same data, graceful stop on SIGTERM, and recovery after SIGKILL.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/core/logger.js';
import { startService } from '../../src/server.js';
import { tempDataDirs } from '../helpers/own-database.js';
import { spawnService } from '../helpers/spawn-service.js';

const tempDataDir = tempDataDirs('planning-data-', afterAll);

function postmasterPid(dataDir: string): number | null {
  const file = path.join(dataDir, 'pg', 'postmaster.pid');
  return existsSync(file) ? Number(readFileSync(file, 'utf8').split('\n')[0]) : null;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // An exited process not yet reaped (a zombie, as an orphan under an init that does not
  // reap stays) is not running.
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}

async function json(url: string, init: RequestInit & { body?: string } = {}) {
  const res = await fetch(url, { ...init, headers: { 'Content-Type': 'application/json', ...init.headers } });
  return { status: res.status, body: (await res.json().catch(() => undefined)) as any };
}

async function registerAndCreate(url: string, name: string) {
  const user = await json(`${url}/api/users`, { method: 'POST', body: JSON.stringify({ user: { username: 'keeper', password: 'password1' } }) });
  expect(user.status).toBe(201);
  const project = await json(`${url}/api/users/me/projects`, {
    method: 'POST',
    headers: { Authorization: user.body.meta.token },
    body: JSON.stringify({ project: { name } }),
  });
  expect(project.status).toBe(201);
  return user.body.meta.token as string;
}

async function readBack(url: string) {
  const login = await json(`${url}/api/users/authorizations`, { method: 'POST', body: JSON.stringify({ username: 'keeper', password: 'password1' }) });
  expect(login.status).toBe(201);
  const list = await json(`${url}/api/users/me/projects`, { headers: { Authorization: login.body.meta.token } });
  return list.body.data.map((p: any) => p.attributes.name);
}

describe('the service on its embedded PostgreSQL', () => {
  it('keeps its data across a stop and a start on the same data folder', async () => {
    const dataDir = await tempDataDir();
    const config = { ...loadConfig({}), dataDir, port: 0, host: '127.0.0.1', databaseUrl: undefined, passwordHashCost: 1024 };
    const logger = createLogger('silent');

    const first = await startService({ config, logger });
    await registerAndCreate(first.url, 'Survivor');
    const pid = postmasterPid(dataDir)!;
    expect(isAlive(pid)).toBe(true);
    await first.stop();
    expect(isAlive(pid)).toBe(false);
    expect(postmasterPid(dataDir)).toBeNull();

    const second = await startService({ config, logger });
    try {
      expect(await readBack(second.url)).toEqual(['Survivor']);
    } finally {
      await second.stop();
    }
  });

  it('stops on SIGTERM with no PostgreSQL left behind, and recovers after SIGKILL', async () => {
    const dataDir = await tempDataDir();
    const first = await spawnService({ DATA_DIR: dataDir });
    await registerAndCreate(first.url, 'BeforeKill');
    const orphan = postmasterPid(dataDir)!;
    expect(isAlive(orphan)).toBe(true);

    // A killed service's watchdog stops its PostgreSQL soon (test/system/embedded-postgres.test.ts);
    // whether or not it has yet, the next start must take over cleanly.
    first.child.kill('SIGKILL');
    await first.exited;

    const second = await spawnService({ DATA_DIR: dataDir });
    expect(isAlive(orphan)).toBe(false);
    expect(await readBack(second.url)).toEqual(['BeforeKill']);
    const pid = postmasterPid(dataDir)!;

    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
    expect(isAlive(pid)).toBe(false);
    expect(postmasterPid(dataDir)).toBeNull();
  }, 60_000);
});
