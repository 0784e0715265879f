/**
 * The webhook receiver of `bench/scenarios/webhooks.ts`, run as a child of the bench with Node's
 * own type stripping (`node bench/lib/receiver-child.ts`: erasable syntax only, no import that
 * needs tsx) and driven over its IPC channel by `bench/lib/receiver.ts`.
 *
 * It listens on a free loopback port and answers every request 204 as soon as its body is
 * read. The path says what it keeps:
 *
 * - `/trace/…`: each arrival is sent to the parent at once, with its `webhook-id`, the event's
 *   type and `data.id` from the body, and the arrival time (when the request's headers were
 *   parsed) both as `process.hrtime` (CLOCK_MONOTONIC, the same clock in every process of the
 *   machine) and as the system clock's epoch milliseconds with a fraction (PostgreSQL's
 *   timestamps are on that clock).
 * - anything else: counted per path, requests and distinct `webhook-id`s, with the monotonic
 *   time of the first arrival and of the last arrival that brought a new id. The parent asks
 *   for the sums over the paths that start with a prefix, and resets them.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

interface PathCount {
  requests: number;
  ids: Set<string>;
  firstNs: bigint;
  lastNewNs: bigint;
}

const counts = new Map<string, PathCount>();

type Command = { seq: number; cmd: 'stats'; prefix: string } | { seq: number; cmd: 'reset'; prefix: string };

const send = (message: unknown) => process.send!(message);

/**
 * CLOCK_REALTIME − (performance.timeOrigin + performance.now()), to a few microseconds: the
 * moment Date.now() moves to its next millisecond is a whole millisecond of the system clock.
 * performance's wall time follows the monotonic clock from the process's start, which drifts
 * from the system clock (NTP) by up to milliseconds over a run; PostgreSQL's timestamps are the
 * system clock's. Spins up to a millisecond: only for traced arrivals, after their answer.
 */
function realtimeOffset(): number {
  const start = Date.now();
  let now = start;
  while (now === start) now = Date.now();
  return now - (performance.timeOrigin + performance.now());
}

const server = http.createServer((req, res) => {
  const ns = process.hrtime.bigint();
  const wall = performance.timeOrigin + performance.now();
  const path = req.url ?? '/';
  const id = String(req.headers['webhook-id'] ?? '');
  const trace = path.startsWith('/trace/');
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => {
    if (trace) chunks.push(chunk);
  });
  req.on('end', () => {
    res.writeHead(204).end();
    if (trace) {
      let type = '';
      let dataId: unknown = null;
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { type?: string; data?: { id?: unknown } };
        type = body.type ?? '';
        dataId = body.data?.id ?? null;
      } catch {
        // not JSON: kept with an empty type
      }
      send({ kind: 'arrival', path, id, type, dataId, ns: String(ns), wall: wall + realtimeOffset() });
      return;
    }
    let count = counts.get(path);
    if (!count) {
      count = { requests: 0, ids: new Set(), firstNs: ns, lastNewNs: ns };
      counts.set(path, count);
    }
    count.requests++;
    if (!count.ids.has(id)) {
      count.ids.add(id);
      count.lastNewNs = ns;
    }
  });
});
server.keepAliveTimeout = 5_000;

process.on('message', (message: Command) => {
  if (message.cmd === 'stats') {
    let requests = 0;
    let unique = 0;
    let paths = 0;
    let firstNs: bigint | null = null;
    let lastNewNs: bigint | null = null;
    for (const [path, c] of counts) {
      if (!path.startsWith(message.prefix)) continue;
      paths++;
      requests += c.requests;
      unique += c.ids.size;
      if (firstNs === null || c.firstNs < firstNs) firstNs = c.firstNs;
      if (lastNewNs === null || c.lastNewNs > lastNewNs) lastNewNs = c.lastNewNs;
    }
    send({ kind: 'reply', seq: message.seq, requests, unique, paths, firstNs: firstNs?.toString() ?? null, lastNewNs: lastNewNs?.toString() ?? null });
  } else if (message.cmd === 'reset') {
    for (const path of [...counts.keys()]) if (path.startsWith(message.prefix)) counts.delete(path);
    send({ kind: 'reply', seq: message.seq });
  }
});
// The parent gone: so is the receiver.
process.on('disconnect', () => process.exit(0));

server.listen(0, '127.0.0.1', () => {
  send({ kind: 'listening', port: (server.address() as AddressInfo).port });
});
