/**
 * test/helpers/reaper.ts: a process the tests spawn (a service) does not outlive the test's
 * process, also when that one is killed by a signal and runs none of its 'exit' handlers.
 * Here a stand-in for a test's process (node, loading the helper through tsx) spawns a stand-in
 * for a service and is then killed with SIGKILL.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** Whether `pid` runs: it exists and is no zombie (one that exited and that no parent has reaped yet). */
const alive = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
};

/** The pids of `pid`'s children, from /proc. */
const childrenOf = (pid: number) =>
  readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(/\s+/).filter(Boolean).map(Number);

async function until(what: string, check: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const started: ChildProcess[] = [];
const strays: number[] = [];
afterEach(() => {
  for (const child of started.splice(0)) child.kill('SIGKILL');
  for (const pid of strays.splice(0)) if (alive(pid)) process.kill(pid, 'SIGKILL');
});

/**
 * A stand-in for a test's process: spawns `service` (node source, run with -e), hands it to
 * reapWithParent (`group`: spawned detached, its group killed), writes `<pid>` of the service
 * and then every line the service writes, and waits.
 */
async function parentOf(service: string, options: { group?: boolean } = {}) {
  const script = `
    import { spawn } from 'node:child_process';
    import { reapWithParent } from ${JSON.stringify(path.join(ROOT, 'test/helpers/reaper.ts'))};
    const child = spawn(process.execPath, ['-e', ${JSON.stringify(service)}], { detached: ${Boolean(options.group)}, stdio: ['ignore', 'pipe', 'inherit'] });
    reapWithParent(child, { group: ${Boolean(options.group)} });
    console.log('service ' + child.pid);
    child.stdout.pipe(process.stdout);
    setInterval(() => undefined, 60_000);
  `;
  const parent = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  started.push(parent);
  let out = '';
  parent.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  await until('the stand-in parent says which pid its service has', () => /^service \d+$/m.test(out), 20_000);
  const pid = Number(/^service (\d+)$/m.exec(out)![1]);
  strays.push(pid);
  return { parent, pid, output: () => out };
}

describe('a spawned process and the process that spawned it (reapWithParent)', () => {
  it('is killed when its parent is killed with SIGKILL, which runs no exit handler', async () => {
    const { parent, pid } = await parentOf('setInterval(() => undefined, 60_000)');
    expect(alive(pid)).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(alive(pid), 'the service runs while its parent does').toBe(true);
    parent.kill('SIGKILL');
    await until(`service ${pid} gone after its parent was killed`, () => !alive(pid));
  });

  it('takes the whole process group of a service spawned detached (a cluster primary and its workers)', async () => {
    const service = `
      const { spawn } = require('node:child_process');
      const worker = spawn(process.execPath, ['-e', 'setInterval(() => undefined, 60_000)'], { stdio: 'ignore' });
      console.log('worker ' + worker.pid);
      setInterval(() => undefined, 60_000);
    `;
    const { parent, pid, output } = await parentOf(service, { group: true });
    await until('the service says which pid its worker has', () => /^worker \d+$/m.test(output()), 20_000);
    const worker = Number(/^worker (\d+)$/m.exec(output())![1]);
    strays.push(worker);
    expect([alive(pid), alive(worker)]).toEqual([true, true]);
    parent.kill('SIGKILL');
    await until(`service ${pid} and its worker ${worker} gone`, () => !alive(pid) && !alive(worker));
  });

  it('leaves nothing behind when the service exits first: the reaper goes at once, and signals no later process', async () => {
    const { parent, pid } = await parentOf('setTimeout(() => process.exit(0), 200)');
    const reaper = childrenOf(parent.pid!).filter((child) => child !== pid);
    expect(reaper).toHaveLength(1);
    await until(`service ${pid} exited`, () => !alive(pid));
    await until(`the reaper ${reaper[0]} gone once the service exited`, () => !childrenOf(parent.pid!).includes(reaper[0]!));
    // The stand-in parent lives on, with no child left.
    expect(alive(parent.pid!)).toBe(true);
    expect(childrenOf(parent.pid!)).toEqual([]);
  });
});
