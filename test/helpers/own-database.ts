/**
 * A PostgreSQL of the test's own, not the run's shared one: a test may stop it (an outage)
 * and start it again on the same port and data, while its app keeps running.
 *
 * Its data folder, and those `tempDataDirs` gives the services a test starts, begin as a copy
 * of one the embedded PostgreSQL initialised (src/db/embedded.ts: initdb, its password), on
 * which the service's database was created and migrated as a service's start does
 * (src/db/database.ts, openDatabase), and then stopped, made once per process: what a service
 * finds on its data folder after its first start. A copy costs a few hundredths of a second of
 * CPU; initdb two or three seconds and a sync of every file, the migrations one or two more.
 * The first start on an empty folder is what the template's making runs, in every process
 * that needs one, and what system/private-folder.test.ts tests.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { openOrm } from '../../src/app/orm.js';
import { createLogger } from '../../src/core/logger.js';
import { openDatabase } from '../../src/db/database.js';
import { startEmbeddedDatabase } from '../../src/db/embedded.js';
import { freePort } from './net.js';
import { folderTemplate } from './pooled-database.js';

/** Copies this process's template into the empty folder it is given: a cluster, its password and the service's database, as after a first start. */
const seedDataDir = folderTemplate('planning-seed-', async (dir) => {
  const db = await openDatabase({ dataDir: dir, logger: createLogger('silent') });
  try {
    const orm = await openOrm(db.url, { migrate: true, poolSize: 1 });
    await orm.close(true);
  } finally {
    await db.stop();
  }
  return dir;
});

export async function startOwnDatabase(prefix: string) {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  await seedDataDir(dataDir);
  const port = await freePort();
  let db = await startEmbeddedDatabase({ dataDir, port });
  await db.ensureDatabase('own');
  return {
    url: db.urlFor('own'),
    stop: () => db.stop(),
    async restart() {
      db = await startEmbeddedDatabase({ dataDir, port });
    },
    /** Stops every process of the server where it is (SIGSTOP), as a frozen host or a cut network leaves it: nothing answers, nothing is refused. */
    freeze: () => signalServer(dataDir, 'SIGSTOP'),
    /** Lets them run again (SIGCONT). */
    thaw: () => signalServer(dataDir, 'SIGCONT'),
    async remove() {
      await db.stop();
      await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Sends `signal` to the server's postmaster, then to each of its children (read from /proc)
 * until no new one appears: a child forked meanwhile gets it too. One that ended is skipped.
 */
async function signalServer(dataDir: string, signal: NodeJS.Signals): Promise<void> {
  const postmaster = Number((await fs.readFile(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8')).split('\n', 1)[0]);
  const send = (pid: number) => {
    try {
      process.kill(pid, signal);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
  };
  send(postmaster);
  const signalled = new Set<number>();
  for (;;) {
    const children: number[] = [];
    for (const entry of await fs.readdir('/proc')) {
      if (!/^\d+$/.test(entry) || signalled.has(Number(entry))) continue;
      const stat = await fs.readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
      // pid (comm) state ppid …: the command may hold spaces and parentheses, so read after the last ')'.
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster) children.push(Number(entry));
    }
    if (children.length === 0) return;
    for (const pid of children) {
      send(pid);
      signalled.add(pid);
    }
  }
}

/**
 * Temporary data folders for services a test starts itself, each holding what a service's
 * first start leaves there, stopped (see above), removed after the file's tests.
 */
export function tempDataDirs(prefix: string, onDone: (cleanup: () => Promise<void>) => void): () => Promise<string> {
  const dirs: string[] = [];
  onDone(async () => {
    for (const dir of dirs) await fs.rm(dir, { recursive: true, force: true });
  });
  return async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
    dirs.push(dir);
    await seedDataDir(dir);
    return dir;
  };
}
