/**
 * A PostgreSQL 15 and a PgBouncer in transaction mode in front of it, as a deployment behind a
 * pooler has them: both from the system's packages (Debian: `postgresql-15`, `pgbouncer`;
 * `.ci/run` installs them), started by the test on free loopback ports in a temporary folder,
 * and stopped by it. Tests point the service's DATABASE_URL at `pooledUrl` and its
 * DATABASE_DIRECT_URL at `directUrl`. A test of faults may stop and start either of them
 * (`stopPostgres`/`startPostgres`, `stopBouncer`/`startBouncer`): each comes back on the same
 * port, PostgreSQL with the same data.
 *
 * As root, both run as the `postgres` system user (initdb refuses root, and so does
 * PgBouncer); otherwise as the current user. Nothing outside the temporary folder changes.
 * A watchdog stops both, and removes the folder, when the process that started them dies
 * without stopping them.
 *
 * Missing binaries: `pooledTierSkip` (and `skipWithout('haproxy', ...)` for tests that also
 * need HAProxy) says whether a test may skip: on a developer's machine without the packages;
 * in CI (`CI` set) it never skips, and the start fails saying what to install.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { freePort } from './net.js';
import { whenThisProcessEnds } from './reaper.js';

export const POSTGRES_BIN_DIR = '/usr/lib/postgresql/15/bin';
export const PGBOUNCER_BIN = '/usr/sbin/pgbouncer';
export const HAPROXY_BIN = '/usr/sbin/haproxy';
export const INSTALL_LINE = 'apt-get install -y postgresql-15 pgbouncer haproxy';

/** The binaries of each component the tests start (Debian's paths). */
const BINARIES = {
  postgres: [path.join(POSTGRES_BIN_DIR, 'initdb'), path.join(POSTGRES_BIN_DIR, 'postgres')],
  pgbouncer: [PGBOUNCER_BIN],
  haproxy: [HAPROXY_BIN],
};
type Component = keyof typeof BINARIES;

/** The binaries of these components that this machine lacks. */
export function missingBinaries(...components: Component[]): string[] {
  return components.flatMap((c) => BINARIES[c]).filter((bin) => !existsSync(bin));
}

/**
 * Whether a test that needs these components skips: only when one is missing and this is not
 * CI. In CI a missing binary is a failure (the start throws), never a silent skip.
 */
export function skipWithout(...components: Component[]): boolean {
  return missingBinaries(...components).length > 0 && !process.env.CI;
}

/** Whether tests of PostgreSQL behind PgBouncer skip (see `skipWithout`). */
export const pooledTierSkip = skipWithout('postgres', 'pgbouncer');

export interface PooledDatabaseOptions {
  /** Settings of pgbouncer.ini's [pgbouncer] section, over the defaults below. */
  bouncer?: Record<string, string | number>;
  /** `postgres -c` settings, over the defaults below. */
  postgres?: Record<string, string | number>;
}

export interface PooledDatabase {
  readonly postgresPort: number;
  readonly bouncerPort: number;
  /** PostgreSQL itself (for LISTEN, the migration lock, and the test's own checks). */
  directUrl(database?: string): string;
  /** The same database through PgBouncer (transaction mode). */
  pooledUrl(database?: string): string;
  /** A new database, created on PostgreSQL directly; both its URLs. */
  createDatabase(name?: string): Promise<{ name: string; pooledUrl: string; directUrl: string }>;
  /** What PgBouncer logged so far (since its last start). */
  bouncerLog(): string;
  /** Stops PostgreSQL (a fast shutdown: SIGINT) and waits for it to exit; PgBouncer keeps running. */
  stopPostgres(): Promise<void>;
  /** Starts PostgreSQL again on its port and data; resolves once it accepts connections. */
  startPostgres(): Promise<void>;
  /** Stops PgBouncer (an immediate shutdown: SIGTERM, every client connection cut) and waits for it to exit. */
  stopBouncer(): Promise<void>;
  /** Starts PgBouncer again on its port with the same settings; resolves once it listens. */
  startBouncer(): Promise<void>;
  stop(): Promise<void>;
}

/** A daemon the helper started, as it runs now. */
export interface Daemon {
  child: ChildProcess;
  output: () => string;
  exited: Promise<void>;
}

const USER = 'postgres';

/** Defaults: a pool smaller than the clients' so that clients share server connections. */
const BOUNCER_DEFAULTS: Record<string, string | number> = {
  pool_mode: 'transaction',
  auth_type: 'trust',
  max_client_conn: 500,
  default_pool_size: 4,
  min_pool_size: 0,
  reserve_pool_size: 0,
  max_db_connections: 0,
  server_lifetime: 3600,
  server_idle_timeout: 60,
  query_wait_timeout: 30,
  // No ignore_startup_parameters: a start-up parameter PgBouncer does not know fails the connection, as in production.
  log_connections: 0,
  log_disconnections: 0,
  log_pooler_errors: 1,
  stats_period: 3600,
};

const POSTGRES_DEFAULTS: Record<string, string | number> = {
  listen_addresses: '127.0.0.1',
  unix_socket_directories: '',
  max_connections: 200,
  // Durability is not under test here.
  fsync: 'off',
  synchronous_commit: 'off',
  full_page_writes: 'off',
  shared_buffers: '32MB',
};

export interface RunAs {
  uid: number;
  gid: number;
}

export function runAs(): RunAs | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, USER], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    throw new Error(`As root, PostgreSQL and PgBouncer run as the "${USER}" user, which does not exist (the postgresql-15 package creates it).`);
  }
}

/** Runs a program to its end; rejects with its output when it fails. */
function run(command: string, args: string[], options: { cwd: string; user?: RunAs }): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' }, ...options.user });
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${path.basename(command)} exited with ${code}:\n${out}`))));
  });
}

/** Starts a long-running program and resolves once a line of its output matches `ready`. */
export function startDaemon(
  command: string,
  args: string[],
  options: { cwd: string; user?: RunAs; ready: RegExp; what: string },
): Promise<Daemon> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      env: { ...process.env, LC_ALL: 'C' },
      ...options.user,
    });
    let out = '';
    let ready = false;
    const exited = new Promise<void>((done) => child.once('exit', () => done()));
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      if (out.length > 200_000) out = out.slice(-100_000);
      if (!ready && options.ready.test(out)) {
        ready = true;
        resolve({ child, output: () => out, exited });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('error', (error) => reject(new Error(`${options.what} could not be run: ${error.message}`)));
    child.once('exit', (code, signal) => {
      if (!ready) reject(new Error(`${options.what} exited (${signal ?? `code ${code}`}) before it was ready:\n${out.slice(-3000)}`));
    });
  });
}

/**
 * Stops the daemons of a folder when this process dies without stopping them, and then
 * removes the folder (`whenThisProcessEnds`): signals each pid written in the folder's
 * `.watch.<SIGNAL>.<name>` files (rewritten by each restart), waits (at most 10 s) for them to
 * exit, and removes `dir`.
 */
export function startWatchdog(dir: string): ChildProcess {
  const script = [
    'pids=""',
    'for f in "$1"/.watch.*; do [ -f "$f" ] || continue; sig=${f#"$1"/.watch.}; sig=${sig%%.*}; pid=$(cat "$f"); kill -"$sig" "$pid" 2>/dev/null; pids="$pids $pid"; done',
    'i=0; while [ $i -lt 100 ]; do alive=0; for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done; [ $alive = 0 ] && break; sleep 0.1; i=$((i+1)); done',
    'rm -rf -- "$1"; exit 0',
  ].join('\n');
  return whenThisProcessEnds(script, [dir]);
}

/** Tells the folder's watchdog which process `name` is now, and the signal that stops it. */
export async function watchPid(dir: string, name: string, signal: 'INT' | 'TERM', pid: number): Promise<void> {
  await fs.writeFile(path.join(dir, `.watch.${signal}.${name}`), `${pid}\n`);
}

export async function stopChild(child: ChildProcess, exited: Promise<void>, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill(signal);
  const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(force);
}

const iniValue = (value: string | number) => String(value);

/**
 * A folder made once per process and copied into each empty folder asked for: `make` fills a
 * new temporary folder and returns the path to copy from (in it). A copy of a data folder takes
 * a few hundredths of a second of CPU, where making one (initdb, migrations) takes seconds.
 * The copy keeps each file's owner (the postgres user, as root) and mode (`cp -a`). The
 * template goes when the process does (a watchdog); a failed one is not kept, and the next
 * folder asked for makes it again.
 */
export function folderTemplate(prefix: string, make: (dir: string) => Promise<string>): (into: string) => Promise<void> {
  let made: Promise<string> | undefined;
  const makeOnce = async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
    const watchdog = startWatchdog(dir);
    try {
      return await make(dir);
    } catch (error) {
      watchdog.kill('SIGKILL');
      await fs.rm(dir, { recursive: true, force: true });
      throw error;
    }
  };
  return async (into) => {
    made ??= makeOnce();
    const source = await made.catch((error: unknown) => {
      made = undefined;
      throw error;
    });
    await run('cp', ['-a', `${source}/.`, into], { cwd: path.dirname(into) });
  };
}

/**
 * Fills the empty `dataDir` with a new cluster: a copy of the one initdb made in this process
 * (the suite starts a dozen of these servers), initdb's output byte for byte, nothing run on it.
 */
let newClusterIn: ((dataDir: string) => Promise<void>) | undefined;
function newCluster(dataDir: string, user: RunAs | undefined): Promise<void> {
  newClusterIn ??= folderTemplate('planning-initdb-', async (dir) => {
    if (user) await fs.chown(dir, user.uid, user.gid);
    const clusterDir = path.join(dir, 'pg');
    await run(path.join(POSTGRES_BIN_DIR, 'initdb'), ['-D', clusterDir, '--auth=trust', `--username=${USER}`, '--encoding=UTF8', '--no-locale', '--no-sync'], {
      cwd: dir,
      user,
    });
    return clusterDir;
  });
  return newClusterIn(dataDir);
}

/** Starts PostgreSQL 15 and PgBouncer (transaction mode) in front of it. */
export async function startPooledDatabase(options: PooledDatabaseOptions = {}): Promise<PooledDatabase> {
  const missing = missingBinaries('postgres', 'pgbouncer');
  if (missing.length > 0) {
    throw new Error(`The pooled setup needs ${missing.join(', ')}: install them with \`${INSTALL_LINE}\` (as root, after apt-get update).`);
  }
  const user = runAs();
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'planning-pooled-'));
  const dataDir = path.join(dir, 'pg');
  await fs.mkdir(dataDir, { mode: 0o700 });
  if (user) {
    await fs.chown(dir, user.uid, user.gid);
    await fs.chown(dataDir, user.uid, user.gid);
  }
  const cleanups: Array<() => Promise<void>> = [() => fs.rm(dir, { recursive: true, force: true })];
  const cleanup = async () => {
    for (const step of cleanups.reverse()) await step().catch(() => undefined);
  };
  // The daemons as they run now (a restart replaces one), stopped at the end and on exit.
  let postgres: Daemon | undefined;
  let bouncer: Daemon | undefined;
  const watchdog = startWatchdog(dir);
  cleanups.push(async () => void watchdog.kill('SIGKILL'));
  const stopOnExit = () => {
    bouncer?.child.kill('SIGTERM');
    postgres?.child.kill('SIGINT');
  };
  process.once('exit', stopOnExit);
  cleanups.push(async () => void process.off('exit', stopOnExit));
  cleanups.push(async () => {
    if (postgres) await stopChild(postgres.child, postgres.exited, 'SIGINT');
  });
  cleanups.push(async () => {
    if (bouncer) await stopChild(bouncer.child, bouncer.exited, 'SIGTERM');
  });
  try {
    await newCluster(dataDir, user);
    const postgresPort = await freePort();
    const settings = { ...POSTGRES_DEFAULTS, ...options.postgres };
    const startPostgres = async () => {
      postgres = await startDaemon(
        path.join(POSTGRES_BIN_DIR, 'postgres'),
        ['-D', dataDir, '-p', String(postgresPort), ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])],
        { cwd: dir, user, ready: /database system is ready to accept connections/, what: 'PostgreSQL 15' },
      );
      await watchPid(dir, 'postgres', 'INT', postgres.child.pid!);
    };
    await startPostgres();
    const bouncerPort = await freePort(); // taken once PostgreSQL listens, so never the same port

    const userlist = path.join(dir, 'userlist.txt');
    await fs.writeFile(userlist, `"${USER}" ""\n`, { mode: 0o600 });
    const bouncerSettings: Record<string, string | number> = {
      listen_addr: '127.0.0.1',
      listen_port: bouncerPort,
      unix_socket_dir: '',
      auth_file: userlist,
      admin_users: USER,
      ...BOUNCER_DEFAULTS,
      ...options.bouncer,
    };
    const ini = [
      '[databases]',
      // Every database of the server, by its own name (an "auto-database" per name).
      `* = host=127.0.0.1 port=${postgresPort}`,
      '',
      '[pgbouncer]',
      ...Object.entries(bouncerSettings).map(([k, v]) => `${k} = ${iniValue(v)}`),
      '',
    ].join('\n');
    const iniFile = path.join(dir, 'pgbouncer.ini');
    await fs.writeFile(iniFile, ini, { mode: 0o600 });
    if (user) {
      await fs.chown(userlist, user.uid, user.gid);
      await fs.chown(iniFile, user.uid, user.gid);
    }
    const startBouncer = async () => {
      bouncer = await startDaemon(PGBOUNCER_BIN, [iniFile], { cwd: dir, user, ready: /process up/, what: 'PgBouncer' });
      await watchPid(dir, 'bouncer', 'TERM', bouncer.child.pid!);
    };
    await startBouncer();

    const url = (port: number, database: string) => `postgresql://${USER}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
    const directUrl = (database = 'postgres') => url(postgresPort, database);
    const pooledUrl = (database = 'postgres') => url(bouncerPort, database);
    let stopping: Promise<void> | undefined;
    return {
      postgresPort,
      bouncerPort,
      directUrl,
      pooledUrl,
      async createDatabase(name = `p_${process.pid}_${randomBytes(4).toString('hex')}`) {
        const client = new pg.Client({ connectionString: directUrl() });
        await client.connect();
        try {
          await client.query(`create database "${name.replaceAll('"', '""')}"`);
        } finally {
          await client.end();
        }
        return { name, pooledUrl: pooledUrl(name), directUrl: directUrl(name) };
      },
      bouncerLog: () => bouncer?.output() ?? '',
      async stopPostgres() {
        if (postgres) await stopChild(postgres.child, postgres.exited, 'SIGINT');
      },
      startPostgres,
      async stopBouncer() {
        if (bouncer) await stopChild(bouncer.child, bouncer.exited, 'SIGTERM');
      },
      startBouncer,
      stop: () => (stopping ??= cleanup()),
    };
  } catch (error) {
    await cleanup();
    throw error;
  }
}
