/**
 * A webhook receiver on a loopback port, as a real one is: it records every request it gets
 * (headers and raw body) and answers as the test says, by default 204 at once.
 */
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** The body parsed (every delivery is JSON). */
  json: { id: string; type: string; data: unknown; at: number };
  /** Milliseconds since the epoch when it arrived. */
  arrivedAt: number;
}

/** Answers one request; may answer late or never (the test then ends the socket). */
export type Responder = (request: Received, res: ServerResponse) => void | Promise<void>;

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** Delivered events (answered 2xx) in the order they arrived. */
  accepted: Received[];
  respond(responder: Responder): void;
  close(): Promise<void>;
}

export async function startReceiver(port = 0): Promise<Receiver> {
  let responder: Responder = (_req, res) => {
    res.writeHead(204).end();
  };
  const received: Received[] = [];
  const accepted: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: Received['json'];
      try {
        json = JSON.parse(body);
      } catch {
        json = { id: '', type: '', data: null, at: 0 };
      }
      const request: Received = { path: req.url ?? '/', headers: req.headers, body, json, arrivedAt: Date.now() };
      received.push(request);
      res.on('finish', () => {
        if (res.statusCode >= 200 && res.statusCode < 300) accepted.push(request);
      });
      void responder(request, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const actual = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${actual}/hook`,
    port: actual,
    received,
    accepted,
    respond(next) {
      responder = next;
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
