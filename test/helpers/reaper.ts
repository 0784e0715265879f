/**
 * A child process that does not outlive the process that started it, however that one ends.
 * Node runs no 'exit' handler when a process is killed by a signal (a test worker that vitest
 * stops, or that the kernel kills), so a spawned service would go on running, holding its port,
 * its database connections and a share of the machine's CPU through the rest of the run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type net from 'node:net';

/**
 * Kills `child` when this process is gone (`whenThisProcessEnds`): SIGKILL to the child, or to
 * its whole process group when it leads one (`group`: spawned `detached`). The shell waiting
 * for that is killed itself as soon as the child exits, so it never signals a pid that has
 * since gone to another process.
 */
export function reapWithParent(child: ChildProcess, options: { group?: boolean } = {}): void {
  if (child.pid === undefined) return;
  const target = options.group ? `-${child.pid}` : String(child.pid);
  const shell = whenThisProcessEnds('kill -KILL "$1" 2>/dev/null', [target]);
  if (child.exitCode !== null || child.signalCode !== null) shell.kill('SIGKILL');
  else child.once('exit', () => shell.kill('SIGKILL'));
}

/**
 * Runs `script` (sh, its arguments `$1`…) once this process has ended, by any means: a shell
 * started now reads a pipe from this process until the kernel closes it, then runs it. The
 * shell and the pipe keep nothing of this process alive (both unreferenced).
 */
export function whenThisProcessEnds(script: string, args: string[]): ChildProcess {
  const shell = spawn('/bin/sh', ['-c', `while read -r _; do :; done\n${script}`, 'when-ended', ...args], {
    detached: true,
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  shell.on('error', () => undefined);
  shell.stdin!.on('error', () => undefined);
  (shell.stdin as unknown as net.Socket).unref?.();
  shell.unref();
  return shell;
}
