/**
 * Limits of the HTTP server under hostile clients: a flood of idle connections cannot use
 * up the file descriptors a request needs to reach PostgreSQL (server.maxConnections stays
 * below the descriptor limit minus the pool's share), and a client that sends its headers
 * too slowly is cut off soon after headersTimeout, not up to 30 s later (Node checks every
 * connectionsCheckingInterval, now 1 s).
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { createHttpServer } from '../../src/http/http-server.js';
import { eventually } from '../helpers/eventually.js';
import { spawnService } from '../helpers/spawn-service.js';
import { createTestDatabase } from '../helpers/test-app.js';

const sockets: net.Socket[] = [];
afterAll(() => {
  for (const socket of sockets) socket.destroy();
});

/** Sends one request on an open socket and resolves with its status line's code. */
function requestOn(socket: net.Socket, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (chunk: Buffer) => {
      text += chunk.toString('latin1');
      const match = /^HTTP\/1\.1 (\d{3})/.exec(text);
      if (match && text.includes('\r\n\r\n')) {
        socket.off('data', onData);
        resolve(Number(match[1]));
      }
    };
    socket.on('data', onData);
    socket.once('close', () => reject(new Error(`connection closed before an answer to ${path}: ${JSON.stringify(text)}`)));
    socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
  });
}

describe('HTTP server limits', () => {
  it('keeps serving requests that need a new database connection while idle connections flood it past the descriptor limit', async () => {
    const databaseUrl = await createTestDatabase();
    const FD_LIMIT = 256;
    const service = await spawnService({ DATABASE_URL: databaseUrl, DATABASE_POOL_SIZE: '10' }, { fdLimit: FD_LIMIT });
    try {
      const { port } = new URL(service.url);
      // More idle connections than the process has descriptors.
      const FLOOD = 400;
      let settled = 0;
      let closed = 0;
      // This test's own connections (all the file's sockets are also closed after it).
      const flood: net.Socket[] = [];
      for (let i = 0; i < FLOOD; i++) {
        const socket = net.connect(Number(port), '127.0.0.1');
        socket.on('error', () => undefined);
        socket.once('connect', () => (settled += 1));
        socket.once('close', () => {
          closed += 1;
          settled += socket.connecting ? 1 : 0;
        });
        flood.push(socket);
        sockets.push(socket);
      }
      await eventually(() => settled >= FLOOD, { message: 'every flood connection connected or failed', timeout: 30_000 });
      // The service can hold at most FD_LIMIT of them; it must have let go of the rest.
      await eventually(() => closed >= FLOOD - FD_LIMIT, { message: `the service let go of at least ${FLOOD - FD_LIMIT} connections`, timeout: 30_000 });

      // The first connections were accepted; their requests need fresh pool connections.
      const answers = await Promise.all(flood.slice(0, 5).map((socket) => requestOn(socket, '/readyz')));
      expect(answers).toEqual([200, 200, 200, 200, 200]);
      expect(service.output()).not.toMatch(/EMFILE/);
    } finally {
      for (const socket of sockets) socket.destroy();
      service.child.kill('SIGTERM');
      await service.exited;
    }
  }, 60_000);

  it('cuts off a client that sends its headers too slowly within a second or so of headersTimeout', async () => {
    const server = createHttpServer((_req, res) => res.end('ok'), { headersTimeoutMs: 1_000 });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const socket = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
      sockets.push(socket);
      socket.on('error', () => undefined);
      let answer = '';
      socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
      let closed = false;
      socket.once('close', () => (closed = true));
      // Half a request line, then nothing: a slowloris client.
      socket.write('GET / HTTP/1.1\r\nHost: local');
      // Node's default check runs every 30 s; with 1 s the cut comes about 1–2 s in.
      await eventually(() => closed, { message: 'the server closed the slow connection', timeout: 15_000 });
      expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }, 30_000);
});
