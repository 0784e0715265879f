/**
 * A fast webhook receiver for the bench (`bench/scenarios/webhooks.ts`): a child process
 * (`bench/lib/receiver-child.ts`, Node's type stripping) on a free loopback port that answers
 * every delivery 204 at once. Its own process, so that its CPU is measured apart from the
 * service's and the bench's, and its arrival times are taken on an event loop that does
 * nothing else. Paths under `/trace/` report each arrival to `onArrival`; other paths are
 * counted, and `stats(prefix)` sums them. Stopped at the end of the run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { ROOT } from './env.js';
import type { Session } from './session.js';
import { stopChild } from './processes.js';

export interface Arrival {
  path: string;
  /** The `webhook-id` header (the event id). */
  id: string;
  /** The body's `type`. */
  type: string;
  /** The body's `data.id`. */
  dataId: unknown;
  /** process.hrtime.bigint() of the receiver when the request's headers were parsed (CLOCK_MONOTONIC, comparable across processes). */
  ns: bigint;
  /** The system clock's epoch milliseconds (with a fraction) at the same moment. */
  wall: number;
}

export interface ReceiverStats {
  requests: number;
  /** Distinct webhook-ids, summed over the paths. */
  unique: number;
  paths: number;
  firstNs: bigint | null;
  /** The latest arrival that brought an id new to its path. */
  lastNewNs: bigint | null;
}

export interface BenchReceiver {
  /** http://127.0.0.1:<port> */
  base: string;
  pid: number;
  child: ChildProcess;
  /** Called with every arrival on a `/trace/` path. */
  onArrival(listener: (arrival: Arrival) => void): void;
  stats(prefix: string): Promise<ReceiverStats>;
  reset(prefix: string): Promise<void>;
}

export async function startReceiver(session: Session): Promise<BenchReceiver> {
  const child = spawn(process.execPath, [path.join(ROOT, 'bench/lib/receiver-child.ts')], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, NODE_ENV: 'production' },
  });
  session.defer(() => stopChild(child, 'SIGTERM', 2_000));
  const listeners: Array<(arrival: Arrival) => void> = [];
  const pending = new Map<number, (reply: Record<string, unknown>) => void>();
  let seq = 0;
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the webhook receiver exited with ${code}`)));
    child.on('message', (message: Record<string, unknown>) => {
      if (message.kind === 'listening') resolve(message.port as number);
      else if (message.kind === 'arrival') {
        const arrival: Arrival = {
          path: message.path as string,
          id: message.id as string,
          type: message.type as string,
          dataId: message.dataId,
          ns: BigInt(message.ns as string),
          wall: message.wall as number,
        };
        for (const listener of listeners) listener(arrival);
      } else if (message.kind === 'reply') {
        const done = pending.get(message.seq as number);
        pending.delete(message.seq as number);
        done?.(message);
      }
    });
  });
  const call = (message: Record<string, unknown>) =>
    new Promise<Record<string, unknown>>((resolve) => {
      const n = ++seq;
      pending.set(n, resolve);
      child.send({ ...message, seq: n });
    });
  const big = (value: unknown) => (value === null || value === undefined ? null : BigInt(value as string));
  return {
    base: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    child,
    onArrival: (listener) => void listeners.push(listener),
    async stats(prefix) {
      const r = await call({ cmd: 'stats', prefix });
      return {
        requests: r.requests as number,
        unique: r.unique as number,
        paths: r.paths as number,
        firstNs: big(r.firstNs),
        lastNewNs: big(r.lastNewNs),
      };
    },
    async reset(prefix) {
      await call({ cmd: 'reset', prefix });
    },
  };
}
