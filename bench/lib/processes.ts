/**
 * The processes under test: the service (built, or from its sources through tsx) and the
 * floors, each a child of the bench on a free port of the loopback, ready once `/readyz`
 * answers 200 (at LOG_LEVEL=warn the service does not log its "listening" line). Their output
 * is counted, and its first 20 lines are shown, prefixed with the target's name.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { freePort } from '../../test/helpers/net.js';
import { ROOT, sleep } from './env.js';
import { memory } from './proc.js';
import { SERVICE_NODE_FLAGS } from './service-flags.js';
import type { Session } from './session.js';

export interface Target {
  name: string;
  url: string;
  pid: number;
  child: ChildProcess;
  /** The PostgreSQL role it connects as ('' when it has none of its own). */
  role: string;
  /** Lines the child wrote (the service logs only warnings and errors at LOG_LEVEL=warn). */
  logLines: number;
  /** Highest VmHWM seen, across resets. */
  peakMb: number;
  /** RSS once ready, before any load. */
  readyMb: number;
  /** Highest PSS of the process tree seen during rows. */
  pssPeakMb: number;
}

/** The built service (`npm run build`), with the Node flags `npm start` uses, and `nodeFlags` after them. */
export const builtServiceArgs = (nodeFlags: string[] = []) => [...SERVICE_NODE_FLAGS, ...nodeFlags, 'dist/src/main.js'];

/** The service from its sources, no build step (tsx as a loader). */
export const SOURCE_SERVICE_ARGS = ['--import', 'tsx', 'src/main.ts'];

/**
 * The service as the bench runs it: production, warnings and errors only, rate limits off
 * (the default 1,200 a minute per token would answer 429 within a second at this load).
 */
export const SERVICE_ENV: Record<string, string> = {
  NODE_ENV: 'production',
  LOG_LEVEL: 'warn',
  RATE_LIMIT_PER_MINUTE: '0',
  RATE_LIMIT_AUTH_PER_MINUTE: '0',
};

/** `npm run build` of the checkout in `cwd` (tsc -p tsconfig.build.json), with this checkout's TypeScript. */
export function buildService(cwd = ROOT): void {
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd, stdio: ['ignore', 'inherit', 'inherit'] });
}

/**
 * Starts `node <args>` in `cwd` (this checkout) with `env` over this process's environment,
 * PORT a free port and HOST the loopback; resolves once it is ready (60 s at most). Stopped
 * at the end of the run.
 */
export async function startTarget(
  session: Session,
  options: {
    name: string;
    args: string[];
    env: Record<string, string>;
    role?: string;
    cwd?: string;
    /** Every line the child writes (for scenarios that read the service's log). */
    onLine?: (line: string) => void;
    /** How many of its first lines are shown (20). */
    echoLines?: number;
  },
): Promise<Target> {
  const { name } = options;
  const port = await freePort();
  const child = spawn(process.execPath, options.args, {
    cwd: options.cwd ?? ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...options.env, PORT: String(port), HOST: '127.0.0.1' },
  });
  session.defer(() => stopChild(child));
  const target: Target = { name, url: `http://127.0.0.1:${port}`, pid: child.pid!, child, role: options.role ?? '', logLines: 0, peakMb: 0, readyMb: 0, pssPeakMb: 0 };
  for (const stream of [child.stdout!, child.stderr!]) {
    readline.createInterface({ input: stream }).on('line', (line) => {
      target.logLines += 1;
      options.onLine?.(line);
      if (target.logLines <= (options.echoLines ?? 20)) process.stderr.write(`[${name}] ${line.slice(0, 500)}\n`);
    });
  }
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}`);
    try {
      if ((await fetch(target.url + '/readyz')).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${name} did not become ready`);
    await sleep(100);
  }
  target.readyMb = memory(target.pid).rssMb;
  return target;
}

/**
 * The built service (`npm start`'s flags, production, warnings only, rate limits off unless
 * `env` says otherwise), connecting as its own role through `roleUrl`.
 */
export function startBuiltService(
  session: Session,
  options: { name: string; role: string; roleUrl: (role: string) => string; env?: Record<string, string>; nodeFlags?: string[] },
): Promise<Target> {
  return startTarget(session, {
    name: options.name,
    role: options.role,
    args: builtServiceArgs(options.nodeFlags),
    env: { ...SERVICE_ENV, DATABASE_URL: options.roleUrl(options.role), ...options.env },
  });
}

/** A floor (`bench/floors/<file>`, Node's own type stripping, production), connecting as its own role. */
export function startFloor(
  session: Session,
  options: { name: string; role: string; file: string; roleUrl: (role: string) => string; nodeFlags?: string[] },
): Promise<Target> {
  return startTarget(session, {
    name: options.name,
    role: options.role,
    args: [...(options.nodeFlags ?? []), `bench/floors/${options.file}`],
    env: { NODE_ENV: 'production', DATABASE_URL: options.roleUrl(options.role) },
  });
}

/** Sends `signal` and waits for the exit, `graceMs` at most; then SIGKILL. */
export async function stopChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM', graceMs = 15_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  await Promise.race([exited, sleep(graceMs)]);
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}
