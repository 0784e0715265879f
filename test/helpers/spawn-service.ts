/**
 * Runs the service as a separate process, as a user would, for restart/crash/cluster tests:
 * src/main.ts as the global setup compiled it (as `npm start` runs the build), or, in another
 * checkout (`cwd`), that checkout's `entry` (its build), else its src/main.ts through tsx.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { inject } from 'vitest';

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
  const args = options.cwd ? (options.entry ? [options.entry] : ['--import', 'tsx', 'src/main.ts']) : [inject('serviceEntry')];
  // The shell lowers the limit and then becomes the service (exec), keeping its pid.
  const [command, argv] = options.fdLimit
    ? ['/bin/sh', ['-c', `ulimit -n ${options.fdLimit} && exec "$0" "$@"`, process.execPath, ...args]]
    : [process.execPath, args];
  const child = spawn(command, argv, {
    cwd: options.cwd ?? path.resolve(import.meta.dirname, '../..'),
    // Its own process group, as a terminal's foreground job is: a test can signal all of it.
    detached: options.detached ?? false,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', DATABASE_URL: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
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
  return new Promise((resolve, reject) => {
    const check = () => {
      for (const line of out.split('\n')) {
        if (!line.startsWith('{')) continue;
        const entry = JSON.parse(line) as { url?: string; database?: string };
        if (entry.url && entry.database) {
          child.stdout!.off('data', check);
          resolve({ child, url: entry.url, output: () => out, exited });
          return;
        }
      }
    };
    child.stdout!.on('data', check);
    void exited.then((code) => reject(new Error(`service exited with ${code} before listening:\n${out}`)));
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
