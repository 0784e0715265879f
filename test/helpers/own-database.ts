/**
 * A PostgreSQL of the test's own, not the run's shared one: a test may stop it (an outage)
 * and start it again on the same port and data, while its app keeps running.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedDatabase } from '../../src/db/embedded.js';
import { freePort } from './net.js';

export async function startOwnDatabase(prefix: string) {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  const port = await freePort();
  let db = await startEmbeddedDatabase({ dataDir, port });
  await db.ensureDatabase('own');
  return {
    url: db.urlFor('own'),
    stop: () => db.stop(),
    async restart() {
      db = await startEmbeddedDatabase({ dataDir, port });
    },
    async remove() {
      await db.stop();
      await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Temporary data folders for services a test starts itself, removed after the file's tests. */
export function tempDataDirs(prefix: string, onDone: (cleanup: () => Promise<void>) => void): () => Promise<string> {
  const dirs: string[] = [];
  onDone(async () => {
    for (const dir of dirs) await fs.rm(dir, { recursive: true, force: true });
  });
  return async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
    dirs.push(dir);
    return dir;
  };
}
