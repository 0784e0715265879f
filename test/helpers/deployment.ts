/**
 * The deployment docs/operations.md describes under "Several instances behind HAProxy", read
 * from that file and run here: its pgbouncer.ini settings (on the pooled test database of
 * pooled-database.ts), its instances' environment, its haproxy.cfg and HAProxy's error file,
 * with only the ports, the files' paths and the database changed. A change to one of those
 * blocks is a change to what the tests run; a block that no longer has what this file
 * substitutes fails the start, naming it.
 *
 * `startDeployment` starts PostgreSQL and PgBouncer, the page's first instances (in
 * parallel) and HAProxy (Debian's, `-db`: in the foreground, stopped by the test, and by the
 * watchdog when the test's process dies first). Instances are slots, one per `server` line of
 * haproxy.cfg: a test kills one (SIGKILL) and starts it again on its port, or starts a slot
 * no instance ran in yet.
 */
import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { eventually } from './eventually.js';
import { freePort } from './net.js';
import {
  HAPROXY_BIN,
  INSTALL_LINE,
  missingBinaries,
  startPooledDatabase,
  startWatchdog,
  stopChild,
  watchPid,
  type PooledDatabase,
} from './pooled-database.js';
import { prepareService, spawnService, type PreparedService, type SpawnedService } from './spawn-service.js';

/** The page that describes the deployment, and its section. */
export const DEPLOYMENT_DOC = 'docs/operations.md';
export const DEPLOYMENT_HEADING = '## Several instances behind HAProxy';

/** The fenced blocks of the deployment section, by their language. */
export interface DocumentedDeployment {
  /** pgbouncer.ini */
  ini: string;
  /** haproxy.cfg */
  haproxy: string;
  /** HAProxy's error file (a whole HTTP response). */
  http: string;
  /** The commands that start the instances. */
  sh: string;
}

export function readDeployment(page = readFileSync(new URL(`../../${DEPLOYMENT_DOC}`, import.meta.url), 'utf8')): DocumentedDeployment {
  const start = page.indexOf(DEPLOYMENT_HEADING);
  if (start < 0) throw new Error(`${DEPLOYMENT_DOC} has no "${DEPLOYMENT_HEADING}" section`);
  // The section ends at the next heading of its level or above.
  const next = page.slice(start + DEPLOYMENT_HEADING.length).search(/\n#{1,2} /);
  const section = page.slice(start, next < 0 ? undefined : start + DEPLOYMENT_HEADING.length + next);
  const block = (language: string) => {
    const found = [...section.matchAll(/```(\w*)\n([\s\S]*?)\n```/g)].filter((m) => m[1] === language);
    if (found.length !== 1) throw new Error(`${DEPLOYMENT_DOC} "${DEPLOYMENT_HEADING}": expected one \`\`\`${language} block, found ${found.length}`);
    return found[0]![2]!;
  };
  return { ini: block('ini'), haproxy: block('haproxy'), http: block('http'), sh: block('sh') };
}

/** Settings of the ini's [pgbouncer] section that say where and how to log in: this machine's, not the page's. */
const MACHINE_SETTINGS = new Set(['listen_addr', 'listen_port', 'auth_type', 'auth_file', 'logfile', 'pidfile', 'unix_socket_dir']);

/** The [pgbouncer] settings of the page's pgbouncer.ini, but for those of the machine. */
export function bouncerSettings(ini: string): Record<string, string> {
  const section = ini.slice(ini.indexOf('[pgbouncer]'));
  const settings: Record<string, string> = {};
  for (const line of section.split('\n').slice(1)) {
    const m = /^\s*(\w+)\s*=\s*(.*?)\s*$/.exec(line);
    if (m && !MACHINE_SETTINGS.has(m[1]!)) settings[m[1]!] = m[2]!;
  }
  if (settings.pool_mode !== 'transaction') throw new Error(`${DEPLOYMENT_DOC} pgbouncer.ini: pool_mode is not transaction`);
  return settings;
}

/** Where the page's instances listen (their PORT), in the order of its lines. */
export function instancePorts(sh: string): number[] {
  return [...sh.matchAll(/\bPORT=(\d+)/g)].map((m) => Number(m[1]));
}

/**
 * The environment the page gives every instance (the variables on each instance's line, but
 * PORT), checked to be the same on every line; DATABASE_URL and DATABASE_DIRECT_URL are the
 * test's (the page's lead to PgBouncer's port and PostgreSQL's, which is checked).
 */
export function instanceEnv(sh: string): Record<string, string> {
  const exported = Object.fromEntries([...sh.matchAll(/^export (\w+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
  if (!/:6432\//.test(exported.DATABASE_URL ?? '') || !/:5432\//.test(exported.DATABASE_DIRECT_URL ?? '')) {
    throw new Error(`${DEPLOYMENT_DOC}: the instances no longer take DATABASE_URL from PgBouncer (:6432) and DATABASE_DIRECT_URL from PostgreSQL (:5432)`);
  }
  const lines = sh.split('\n').filter((l) => /\bPORT=\d+/.test(l));
  const envs = lines.map((line) => {
    const env: Record<string, string> = {};
    for (const m of line.matchAll(/(?:^|\s)([A-Z_]+)=(\S+)/g)) if (m[1] !== 'PORT') env[m[1]!] = m[2]!;
    return JSON.stringify(env);
  });
  if (envs.length === 0 || new Set(envs).size !== 1) throw new Error(`${DEPLOYMENT_DOC}: the instances' lines do not all set the same environment`);
  return JSON.parse(envs[0]!) as Record<string, string>;
}

/**
 * The page's haproxy.cfg with this machine's ports and error file: its `bind` address, each
 * `server` line's address (the instances' ports, in order) and every `errorfile` path.
 */
export function haproxyConfig(cfg: string, options: { frontendPort: number; serverPorts: number[]; errorFile: string }): string {
  let servers = 0;
  const out = cfg
    .replace(/^(\s*bind\s+)\S+/m, `$1127.0.0.1:${options.frontendPort}`)
    .replace(/^(\s*server\s+\S+\s+)127\.0\.0\.1:\d+/gm, (_, head: string) => `${head}127.0.0.1:${options.serverPorts[servers++]}`)
    .replace(/^(\s*errorfile\s+\d+\s+)\S+/gm, `$1${options.errorFile}`);
  if (servers !== options.serverPorts.length) throw new Error(`${DEPLOYMENT_DOC} haproxy.cfg: ${servers} server lines, ${options.serverPorts.length} expected`);
  if (!/^\s*bind\s/m.test(cfg) || !/^\s*errorfile\s/m.test(cfg)) throw new Error(`${DEPLOYMENT_DOC} haproxy.cfg: no bind line or no errorfile`);
  return `${out}\n`;
}

/** A timeout of haproxy.cfg's `defaults`, in milliseconds. */
export function haproxyTimeoutMs(cfg: string, name: string): number {
  const m = new RegExp(`^\\s*timeout\\s+${name}\\s+(\\d+)(ms|s|m|h)?\\s*$`, 'm').exec(cfg);
  if (!m) throw new Error(`haproxy.cfg has no timeout ${name}`);
  return Number(m[1]) * { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }[(m[2] ?? 'ms') as 'ms'];
}

export interface Haproxy {
  /** http://127.0.0.1:<frontend port> */
  url: string;
  /** The configuration it runs. */
  config: string;
  output(): string;
  stop(): Promise<void>;
}

/** Whether a TCP connection to the port is accepted now. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Checks the configuration (`haproxy -c`), then runs HAProxy on it until `stop`. */
export async function startHaproxy(config: (errorFile: string) => string, errorResponse: string, frontendPort: number): Promise<Haproxy> {
  const missing = missingBinaries('haproxy');
  if (missing.length > 0) throw new Error(`This test needs ${missing.join(', ')}: install it with \`${INSTALL_LINE}\` (as root, after apt-get update).`);
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'planning-haproxy-'));
  const errorFile = path.join(dir, 'planning-503.http');
  await fs.writeFile(errorFile, errorResponse.endsWith('\n') ? errorResponse : `${errorResponse}\n`);
  const text = config(errorFile);
  const cfgFile = path.join(dir, 'haproxy.cfg');
  await fs.writeFile(cfgFile, text);
  const watchdog = startWatchdog(dir);
  try {
    await promisify(execFile)(HAPROXY_BIN, ['-c', '-f', cfgFile]).catch((error: { stdout?: string; stderr?: string }) => {
      throw new Error(`haproxy -c refused the configuration:\n${error.stderr ?? ''}${error.stdout ?? ''}\n${text}`);
    });
    const child = spawn(HAPROXY_BIN, ['-db', '-f', cfgFile], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    await watchPid(dir, 'haproxy', 'TERM', child.pid!);
    const reap = () => child.kill('SIGKILL');
    process.once('exit', reap);
    await eventually(async () => child.exitCode !== null || (await accepts(frontendPort)), { message: 'HAProxy listens', timeout: 10_000 });
    if (child.exitCode !== null) throw new Error(`HAProxy exited with ${child.exitCode}:\n${out}`);
    let stopping: Promise<void> | undefined;
    return {
      url: `http://127.0.0.1:${frontendPort}`,
      config: text,
      output: () => out,
      stop: () =>
        (stopping ??= (async () => {
          process.off('exit', reap);
          await stopChild(child, exited, 'SIGTERM');
          watchdog.kill('SIGKILL');
          await fs.rm(dir, { recursive: true, force: true });
        })()),
    };
  } catch (error) {
    watchdog.kill('SIGKILL');
    await fs.rm(dir, { recursive: true, force: true });
    throw error;
  }
}

export interface Deployment {
  documented: DocumentedDeployment;
  pooled: PooledDatabase;
  database: { pooledUrl: string; directUrl: string };
  haproxy: Haproxy;
  /** The instance of each slot (haproxy.cfg's server lines, in order), while one runs there. */
  instances: Array<SpawnedService | undefined>;
  /** Starts an instance in slot `i`, on its port (again, after a kill). */
  startInstance(i: number): Promise<SpawnedService>;
  /**
   * A process for slot `i` that loads the service's code now and waits (spawn-service.ts
   * `prepareService`): its `start()` runs the service on the slot's port, as `startInstance`
   * does. Stopped with the deployment when it was never started.
   */
  prepareInstance(i: number): { start(): Promise<SpawnedService> };
  /**
   * Resolves once HAProxy sends slot `i`'s instance requests: once it answered one of HAProxy's
   * health checks with 200 (`rise 1`: one is enough to be up).
   */
  joined(i: number): Promise<void>;
  /** SIGKILL to slot `i`'s instance; resolves once it is gone. */
  killInstance(i: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The deployment of docs/operations.md: PostgreSQL, PgBouncer with its settings, the instances
 * of its start commands (with `env` over the page's environment) and HAProxy, whose
 * configuration has one slot per `server` line.
 */
export async function startDeployment(options: { env?: Record<string, string> } = {}): Promise<Deployment> {
  const documented = readDeployment();
  const running = instancePorts(documented.sh);
  const slots = [...documented.haproxy.matchAll(/^\s*server\s/gm)].length;
  const ports = await Promise.all(Array.from({ length: slots }, () => freePort()));
  const pooled = await startPooledDatabase({ bouncer: bouncerSettings(documented.ini) });
  const instances: Array<SpawnedService | undefined> = Array.from({ length: slots });
  const prepared = new Set<PreparedService>();
  let haproxy: Haproxy | undefined;
  const stop = async () => {
    await haproxy?.stop();
    await Promise.all(
      [...prepared].map(async ({ child }) => {
        if (child.exitCode === null && child.signalCode === null) {
          const exited = new Promise((resolve) => child.once('exit', resolve));
          child.kill('SIGKILL');
          await exited;
        }
      }),
    );
    await Promise.all(
      instances.map(async (instance) => {
        if (instance && instance.child.exitCode === null && instance.child.signalCode === null) {
          instance.child.kill('SIGTERM');
          await instance.exited;
        }
      }),
    );
    await pooled.stop();
  };
  try {
    const database = await pooled.createDatabase();
    const env = { ...instanceEnv(documented.sh), DATABASE_URL: database.pooledUrl, DATABASE_DIRECT_URL: database.directUrl, ...options.env };
    const startInstance = async (i: number) => {
      const instance = await spawnService({ ...env, PORT: String(ports[i]) });
      instances[i] = instance;
      return instance;
    };
    const frontendPort = await freePort();
    [haproxy] = await Promise.all([
      startHaproxy((errorFile) => haproxyConfig(documented.haproxy, { frontendPort, serverPorts: ports, errorFile }), documented.http, frontendPort),
      ...running.map((_, i) => startInstance(i)),
    ]);
    const joined = async (i: number) => {
      await eventually(
        () => instances[i]?.output().split('\n').some((line) => line.includes('"path":"/readyz"') && line.includes('"statusCode":200')),
        { message: `HAProxy's health check found the instance of slot ${i} ready`, timeout: 10_000 },
      );
    };
    await Promise.all(running.map((_, i) => joined(i)));
    return {
      documented,
      pooled,
      joined,
      database,
      haproxy: haproxy!,
      instances,
      startInstance,
      prepareInstance(i) {
        const instance = prepareService({ ...env, PORT: String(ports[i]) });
        prepared.add(instance);
        return {
          async start() {
            const started = await instance.start();
            prepared.delete(instance);
            instances[i] = started;
            return started;
          },
        };
      },
      async killInstance(i) {
        const instance = instances[i];
        if (!instance) return;
        instance.child.kill('SIGKILL');
        await instance.exited;
        instances[i] = undefined;
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
