/**
 * Runs the service as a separate process, as a user would, for restart/crash/cluster tests:
 * src/main.ts as the global setup compiled it (as `npm start` runs the build), or, in another
 * checkout (`cwd`), that checkout's `entry` (its build), else its src/main.ts through tsx.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { inject } from 'vitest';
import { reapWithParent } from './reaper.js';

export interface SpawnedService {
  child: ChildProcess;
  url: string;
  /** Everything the process wrote so far (JSON log lines). */
  output(): string;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
}

export function spawnService(
  env: Record<string, string>,
  options: {
    detached?: boolean;
    cwd?: string;
    /** With `cwd`: the module to run, relative to it (a build); src/main.ts through tsx unless given. */
    entry?: string;
    /** Soft and hard limit on open files. */ fdLimit?: number;
  } = {},
): Promise<SpawnedService> {
  const child = spawnNode(env, options, [], 'ignore');
  const output = collect(child);
  return listening(child, output.text, output.exited);
}

/**
 * A service's process that has loaded its code (the modules src/main.ts imports, in its
 * order) and waits to run it: `start()` runs src/main.ts as `spawnService` does, and resolves
 * once it listens. Until then it has no port, no connection and no configuration read (its
 * modules read the environment when main runs, not when they load): to the database and to
 * clients there is no instance yet. A test that starts an instance while something else goes
 * on (an instance killed under load) prepares it beforehand, so that the start is the
 * service's own start and not the loading of its modules, which on a busy machine takes
 * seconds. A cluster's workers (WEB_CONCURRENCY) load and run at once, as they do anyway.
 */
export interface PreparedService {
  child: ChildProcess;
  /** Runs src/main.ts once the modules are loaded; resolves once it listens. */
  start(): Promise<SpawnedService>;
}

/**
 * The module given to `node --import` by `prepareService`: it imports src/main.ts's own
 * imports (the process's main module, `process.argv[1]`), those it awaits where a server
 * starts (server.js) included, says `held` on stdout and waits
 * for a line on stdin before node runs the main module; when stdin closes first (the test's
 * process died), it exits.
 */
const HOLD = `
import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
if (!cluster.isWorker) {
  const main = process.argv[1];
  const imports = /^import [^;]*? from '([.][^']+)';$|await import\\('([.][^']+)'\\)/gm;
  for (const [, from, later] of readFileSync(main, 'utf8').matchAll(imports)) await import(new URL(from ?? later, pathToFileURL(main)).href);
  const stdin = process.stdin;
  await new Promise((resolve) => {
    const gone = () => process.exit(1);
    stdin.once('end', gone);
    stdin.once('data', () => {
      stdin.off('end', gone);
      stdin.destroy();
      resolve();
    });
    process.stdout.write('held\\n');
  });
}
`;

export function prepareService(env: Record<string, string>): PreparedService {
  const child = spawnNode(env, {}, ['--import', `data:text/javascript,${encodeURIComponent(HOLD)}`], 'pipe');
  const output = collect(child);
  const loaded = new Promise<void>((resolve, reject) => {
    const held = () => {
      if (!/^held$/m.test(output.text())) return;
      child.stdout!.off('data', held);
      resolve();
    };
    child.stdout!.on('data', held);
    void output.exited.then((code) => reject(new Error(`service exited with ${code} before it had loaded:\n${output.text()}`)));
  });
  // A process stopped before it was started is no failure of the test's.
  loaded.catch(() => undefined);
  return {
    child,
    async start() {
      await loaded;
      const started = listening(child, output.text, output.exited);
      child.stdin!.end('go\n');
      return started;
    },
  };
}

function spawnNode(
  env: Record<string, string>,
  options: { detached?: boolean; cwd?: string; entry?: string; fdLimit?: number },
  nodeOptions: string[],
  stdin: 'ignore' | 'pipe',
): ChildProcess {
  const entry = options.cwd ? (options.entry ? [options.entry] : ['--import', 'tsx', 'src/main.ts']) : [inject('serviceEntry')];
  const args = [...nodeOptions, ...entry];
  // The shell lowers the limit and then becomes the service (exec), keeping its pid.
  const [command, argv] = options.fdLimit
    ? ['/bin/sh', ['-c', `ulimit -n ${options.fdLimit} && exec "$0" "$@"`, process.execPath, ...args]]
    : [process.execPath, args];
  const child = spawn(command, argv, {
    cwd: options.cwd ?? path.resolve(import.meta.dirname, '../..'),
    // Its own process group, as a terminal's foreground job is: a test can signal all of it.
    detached: options.detached ?? false,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', DATABASE_URL: '', ...env },
    stdio: [stdin, 'pipe', 'pipe'],
  });
  // Gone with the test's process also when that one is killed (collect's 'exit' handler then never runs).
  reapWithParent(child, { group: options.detached });
  return child;
}

/** What the process writes, and its exit code; it is killed when the test's process exits first. */
function collect(child: ChildProcess): { text: () => string; exited: Promise<number | null> } {
  // Never outlive the test run, even when a test times out before stopping the service.
  const reap = () => child.kill('SIGKILL');
  process.once('exit', reap);
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      process.off('exit', reap);
      resolve(code);
    }),
  );
  return { text: () => out, exited };
}

/** Resolves once the service says where it listens (its first log line with `url` and `database`). */
function listening(child: ChildProcess, output: () => string, exited: Promise<number | null>): Promise<SpawnedService> {
  return new Promise((resolve, reject) => {
    const check = () => {
      for (const line of output().split('\n')) {
        if (!line.startsWith('{')) continue;
        const entry = JSON.parse(line) as { url?: string; database?: string };
        if (entry.url && entry.database) {
          child.stdout!.off('data', check);
          resolve({ child, url: entry.url, output, exited });
          return;
        }
      }
    };
    child.stdout!.on('data', check);
    void exited.then((code) => reject(new Error(`service exited with ${code} before listening:\n${output()}`)));
  });
}

/** Stops each of `services` still running with SIGTERM (a graceful stop) and waits for it to exit. */
export async function stopServices(services: ReadonlyArray<SpawnedService | undefined>): Promise<void> {
  for (const service of services) {
    if (service && service.child.exitCode === null && service.child.signalCode === null) {
      service.child.kill('SIGTERM');
      await service.exited;
    }
  }
}
