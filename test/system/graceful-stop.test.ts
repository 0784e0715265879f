/** Stopping under load: requests in flight complete, nothing new is accepted. */
import type { Server } from 'node:http';
import net from 'node:net';
import pg from 'pg';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/core/logger.js';
import { startService } from '../../src/server.js';
import { eventually } from '../helpers/eventually.js';
import { createTestDatabase } from '../helpers/test-app.js';

/**
 * Waits until the server has accepted `n` connections. A client's `connect` only says the kernel
 * completed the handshake: a connection the server has not yet taken from its backlog when it
 * stops listening is reset, unanswered, which is no graceful stop's to prevent.
 */
async function acceptedAll(server: Server, n: number): Promise<void> {
  const connections = () => new Promise<number>((resolve, reject) => server.getConnections((e, count) => (e ? reject(e) : resolve(count))));
  await eventually(async () => (await connections()) === n, { message: `the server accepted ${n} connections`, interval: 1 });
}

describe('graceful stop', () => {
  it('finishes in-flight requests and refuses new connections', async () => {
    const databaseUrl = await createTestDatabase();
    const config = { ...loadConfig({}), databaseUrl, port: 0, host: '127.0.0.1', rateLimitAuthPerMinute: 0 };
    const service = await startService({ config, logger: createLogger('silent') });

    // Registrations hash passwords with the production cost, so they are still running
    // when the stop begins.
    let arrived = 0;
    service.server.on('connection', () => (arrived += 1));
    const inFlight = Array.from({ length: 16 }, (_, i) =>
      fetch(`${service.url}/api/users`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Connection: 'close' },
        body: JSON.stringify({ user: { username: `graceful${i}`, password: 'password1' } }),
      }).then(async (r) => ({ status: r.status, body: await r.json() })),
    );
    // Every registration has reached the server. Counted as they arrive, not as they are
    // open: on a loaded machine the first may be done before the last connects, and the
    // stop must not wait for a moment when all 16 are open at once.
    await eventually(() => arrived >= 16, { message: 'all 16 registrations connected', timeout: 20_000, interval: 1 });

    const stopping = service.stop();
    const results = await Promise.all(inFlight);
    expect(results.map((r) => r.status)).toEqual(Array(16).fill(201));
    await stopping;
    expect(service.server.listening).toBe(false);
    await expect(fetch(`${service.url}/healthz`)).rejects.toThrow();
  });

  it('lets the handlers of clients that hung up finish before it closes the database', async () => {
    const databaseUrl = await createTestDatabase();
    const config = { ...loadConfig({}), databaseUrl, port: 0, host: '127.0.0.1', rateLimitAuthPerMinute: 0 };
    const lines: any[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const service = await startService({ config, logger });

    // Registrations hash at the production cost: their clients are gone long before they end.
    // Half go through REST, half as tRPC batches streamed as JSON lines, whose response ends
    // as soon as the client hangs up while the procedure still runs.
    const aborts = Array.from({ length: 8 }, () => new AbortController());
    const sent = aborts.map((abort, i) => {
      const user = { username: `hung_up${i}`, password: 'password1' };
      const init = { method: 'POST', signal: abort.signal };
      const call =
        i % 2 === 0
          ? fetch(`${service.url}/api/users`, { ...init, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ user }) })
          : fetch(`${service.url}/trpc/users.register?batch=1`, {
              ...init,
              headers: { 'Content-Type': 'application/json', 'trpc-accept': 'application/jsonl' },
              body: JSON.stringify({ 0: { json: { user } } }),
            });
      return call.then((r) => r.text()).catch((error: Error) => error.name);
    });
    // Every request is in (8) and every procedure runs (8): the bodies have all been read.
    await eventually(() => service.inFlight.size >= 16, { message: 'all 8 requests and their 8 procedures in flight', timeout: 20_000, interval: 1 });
    for (const abort of aborts) abort.abort();
    expect(await Promise.all(sent)).toEqual(Array(8).fill('AbortError'));
    const connections = () => new Promise<number>((resolve, reject) => service.server.getConnections((e, n) => (e ? reject(e) : resolve(n))));
    await eventually(async () => (await connections()) === 0, { message: 'every client connection closed', timeout: 20_000, interval: 1 });

    await service.stop();
    const failures = lines.filter((l) => l.level >= 50);
    expect(failures, JSON.stringify(failures)).toEqual([]);
    // Every handler ran to its end: all 8 users exist, each with its token.
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query("select count(*)::int as n, (select count(*)::int from access_tokens) as tokens from users where username like 'hung_up%'");
      expect(rows).toEqual([{ n: 8, tokens: 8 }]);
    } finally {
      await client.end();
    }
  });

  it('does not wait its whole timeout for clients that have sent nothing, part of a request or of its body; answers during it close their connection', async () => {
    const databaseUrl = await createTestDatabase();
    const config = { ...loadConfig({}), databaseUrl, port: 0, host: '127.0.0.1', shutdownTimeoutMs: 10_000 };
    const service = await startService({ config, logger: createLogger('silent') });
    const { port } = new URL(service.url);
    const quiet = net.connect(Number(port), '127.0.0.1');
    const partial = net.connect(Number(port), '127.0.0.1');
    const halfBody = net.connect(Number(port), '127.0.0.1');
    const busy = net.connect(Number(port), '127.0.0.1');
    const sockets = [quiet, partial, halfBody, busy];
    await Promise.all(sockets.map((s) => new Promise((resolve) => s.once('connect', resolve))));
    await acceptedAll(service.server, sockets.length);
    partial.write('GET /api/users/me HTTP/1.1\r\nHost: x\r\n');
    halfBody.write('POST /api/users HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 60\r\n\r\n{"user"');
    let answers = '';
    busy.on('data', (chunk) => (answers += chunk.toString()));
    for (const s of sockets) s.on('error', () => undefined);
    const closed = Promise.all(sockets.map((s) => new Promise((resolve) => s.once('close', resolve))));
    const started = Date.now();
    const stopped = service.stop();
    // A request sent during the stop (the server no longer listens) on a connection open before
    // it is answered, and its answer closes the connection.
    await eventually(() => !service.server.listening, { message: 'the server stopped listening', interval: 1 });
    busy.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await stopped;
    // A sweep or two for a request on its way, then they are closed: not the 10 s timeout.
    expect(Date.now() - started).toBeLessThan(5_000);
    await closed;
    expect(answers).toMatch(/^HTTP\/1\.1 200 /);
    expect(answers).toMatch(/\r\nConnection: close\r\n/i);
  });

  it('serves a request that arrived during the stop while the process was not scheduled for longer than a sweep', async () => {
    const databaseUrl = await createTestDatabase();
    const config = { ...loadConfig({}), databaseUrl, port: 0, host: '127.0.0.1', shutdownTimeoutMs: 10_000 };
    const service = await startService({ config, logger: createLogger('silent') });
    const busy = net.connect(Number(new URL(service.url).port), '127.0.0.1');
    await new Promise((resolve) => busy.once('connect', resolve));
    await acceptedAll(service.server, 1);
    let answers = '';
    busy.on('data', (chunk) => (answers += chunk.toString()));
    busy.on('error', () => undefined);
    const closed = new Promise((resolve) => busy.once('close', resolve));
    const stopped = service.stop();
    await eventually(() => !service.server.listening, { message: 'the server stopped listening', interval: 1 });
    // The request is sent, then the process (service and client alike) stalls past the first
    // sweep, as one that a loaded machine does not schedule. Stalled in the loop's check phase,
    // the next round of the loop runs the due sweep before it reads the request's bytes.
    await new Promise<void>((resolve) =>
      setImmediate(() => {
        busy.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1_300);
        resolve();
      }),
    );
    await stopped;
    await closed;
    expect(answers).toMatch(/^HTTP\/1\.1 200 /);
    expect(answers).toMatch(/\r\nConnection: close\r\n/i);
  });
});
