/**
 * The node:http server around the Express app: bounded timeouts, and the door's error shape
 * (a tRPC error under /trpc, REST's envelope elsewhere: src/http/door-errors.ts) even for
 * requests Node refuses before Express sees them (oversized headers, broken framing, an
 * Expect it does not meet).
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { DomainError, type ErrorCode } from '../core/errors.js';
import { BODY_LIMIT_BYTES } from '../core/limits.js';
import { doorAnswer, doorOfPath } from './door-errors.js';
import { continueWithheld } from './request-body.js';
import { normaliseTarget, pathOfTarget } from './request-framing.js';

/** Headers of an error answered before Express (and helmet) sees the request, besides the door's media type. */
const ERROR_HEADERS = {
  'X-Content-Type-Options': 'nosniff',
  'Content-Security-Policy': "default-src 'none'; frame-ancestors 'none'",
  'X-Frame-Options': 'SAMEORIGIN',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
};

/** An error answered before Express sees the request, in the shape of the door of `path` (src/http/door-errors.ts). */
function errorAnswer(error: DomainError, path: string | undefined): { status: number; headers: Record<string, string | number>; body: string } {
  const answer = doorAnswer(path === undefined ? 'rest' : doorOfPath(path), error, path ?? '/');
  const headers = { ...answer.headers, ...ERROR_HEADERS, 'Content-Length': Buffer.byteLength(answer.body), 'X-Request-Id': randomUUID() };
  return { status: answer.status, headers, body: answer.body };
}

function rawErrorResponse(code: ErrorCode, reason: string, path: string | undefined, options: { status?: number; detail?: string } = {}): string {
  const { status, headers, body } = errorAnswer(DomainError.of(code, options), path);
  return [
    `HTTP/1.1 ${status} ${reason}`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    'Connection: close',
    '',
    body,
  ].join('\r\n');
}

/**
 * The request line of the request Node's parser stopped in, as far as the bytes it was parsing
 * (`rawPacket`) hold it: from the end of the headers before `bytesParsed` (a request before it
 * on the connection, whose body of `bodyBytes` follows them), or from their start.
 */
function refusedLine(error: NodeJS.ErrnoException & { rawPacket?: Buffer; bytesParsed?: number }, bodyBytes = 0): string | undefined {
  const packet = error.rawPacket;
  if (!packet) return undefined;
  // Where it stopped, less the end of a header block that ends there (headers too large).
  const at = Math.min(error.bytesParsed ?? 0, packet.length) - 5;
  const before = at < 0 ? -1 : packet.lastIndexOf('\r\n\r\n', at);
  const start = before < 0 ? 0 : before + 4 + bodyBytes;
  const end = packet.indexOf(0x0a, start);
  return packet.subarray(start, end < 0 ? packet.length : end).toString('latin1');
}

/** The target of a request line (its second word; words apart by spaces or tabs, which parsers differ on). */
const targetOf = (line: string | undefined): string | undefined => line?.split(/[ \t]+/)[1];

/**
 * The path of the request a client error is about, where it can be read: the request the
 * connection is answering (its body broke off, or came too slowly), else the request line of
 * what Node could not parse (`refusedLine`). Undefined when neither says (the headers did not
 * arrive in time): the answer is then REST's.
 */
function clientErrorPath(error: NodeJS.ErrnoException & { rawPacket?: Buffer }, pending: ServerResponse | undefined, before?: IncomingMessage): string | undefined {
  const req = pending?.req as (IncomingMessage & { originalUrl?: string }) | undefined;
  if (req) return req.originalUrl ?? req.url;
  const line = refusedLine(error, before ? Number(before.headers['content-length'] ?? 0) || 0 : 0);
  // After a request (`before`), what `refusedLine` finds may not start where its bytes ended
  // (a chunked body, several requests): only a whole request line names a door.
  if (before && !/^\S+[ \t]+\S+[ \t]+HTTP\//.test(line ?? '')) return undefined;
  const target = targetOf(line);
  return target === undefined ? undefined : pathOfTarget(target);
}

/**
 * A request line Node's parser refused for its method, one it does not know (`FOO`, `get`:
 * methods are case-sensitive) but written as HTTP allows (a token, RFC 9110 §9.1): no endpoint
 * answers it (API-CONTRACT.md §2: a wrong method is 404 `missing_endpoint`). When the bytes at
 * hand end before the method does, it cannot be told from a malformed line: 400.
 */
function unknownMethod(error: NodeJS.ErrnoException & { rawPacket?: Buffer }): boolean {
  return error.code === 'HPE_INVALID_METHOD' && /^[!#$%&'*+.^_`|~0-9A-Za-z-]+ /.test(refusedLine(error) ?? '');
}

/** How long a CONNECT's socket may stay without traffic before it is closed. */
const CONNECT_IDLE_MS = 10_000;

/** File descriptors kept for everything but client sockets: stdio, logs, pipes, DNS, the loop. */
export const RESERVED_DESCRIPTORS = 64;

/** The soft limit on open files of this process (RLIMIT_NOFILE), where the system tells it. */
export function openFileLimit(): number | undefined {
  try {
    const line = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    return line && line[1] !== 'unlimited' ? Number(line[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * How many client connections the server may hold: every one costs a file descriptor, and
 * the database pool (`poolSize`) and the process need theirs. Past the limit Node closes new
 * connections at once, so a flood of idle sockets cannot take the descriptor a request needs
 * to reach PostgreSQL (that was a 500, `connect EMFILE`).
 */
export function maxConnectionsFor(poolSize: number, fdLimit = openFileLimit()): number | undefined {
  if (fdLimit === undefined) return undefined;
  return Math.max(1, fdLimit - poolSize - RESERVED_DESCRIPTORS);
}

export interface HttpServerOptions {
  /** How long a client may take to send its headers (default 10 s). */
  headersTimeoutMs?: number;
}

export function createHttpServer(app: RequestListener, options: HttpServerOptions = {}): Server {
  // Node checks the timeouts below only this often (30 s by default), so a slow client
  // could hold a socket up to 30 s past them.
  // A missing Host is answered by the app (src/http/request-framing.ts), with the envelope:
  // Node's own answer to it is a bare 400.
  // The target is read once, before anything path-scoped runs (src/http/request-framing.ts).
  // Requests pipelined on one connection run one after another, each when its answer gets the
  // socket, that is once the answer before it has been sent (Node hands them over as soon as it
  // has parsed them, and queues their answers): a write runs after the read sent before it, a
  // key's second request after its first, and a request that could not be answered (after one
  // that ends the connection, or behind a stream that never ends) is not run at all. During a
  // stop, each answer closes its connection.
  const handle: RequestListener = (req, res) => {
    normaliseTarget(req);
    const run = () => {
      if (!req.socket.writable || req.socket.destroyed) return;
      if (stoppingServers.has(server)) res.shouldKeepAlive = false;
      served.add(req.socket);
      app(req, res);
    };
    if (res.socket) run();
    else res.once('socket', run);
  };
  const server = createServer({ connectionsCheckingInterval: 1_000, requireHostHeader: false }, handle);
  server.closeIdleConnections = () => closeServedIdle(server);
  // Expect: 100-continue: the client waits for a go before it sends its body. A body declared
  // over the limit gets none: the request goes on without it, to be refused (413, or 401
  // first), and its connection ends with the answer (src/http/request-body.ts).
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if (Number(req.headers['content-length']) > BODY_LIMIT_BYTES) continueWithheld.add(req);
    else res.writeContinue();
    handle(req, res);
  });
  server.keepAliveTimeout = 5_000;
  server.headersTimeout = options.headersTimeoutMs ?? 10_000;
  server.requestTimeout = 30_000;
  // An Expect other than 100-continue: Node's own 417 has no body; this one has the door's error.
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const { status, headers, body } = errorAnswer(DomainError.of('expectation_failed'), pathOfTarget(req.url ?? '/'));
    res.writeHead(status, headers);
    res.end(body);
  });
  // A client that half-closes after its request (shutdown of its side, as `nc -N` and some
  // HTTP/1.0 clients do) still gets the answer; by default Node drops it, though the write ran.
  // An event stream has no end to wait for: its client closing its side is its going away, as
  // before (its stream ends at once, and no longer counts among the token's).
  (server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  server.on('connection', (socket: Socket) => {
    const open = openSockets.get(server) ?? openSockets.set(server, new Set()).get(server)!;
    open.add(socket);
    socket.once('close', () => open.delete(socket));
    socket.on('end', () => {
      const res = answering(socket);
      if (res && /^text\/event-stream/i.test(String(res.getHeader('content-type') ?? ''))) socket.destroy();
    });
  });
  // What Node's parser refuses (a request line, a header, headers too large, a broken body) or
  // what came too slowly, answered in the shape of the door the request addressed; after the
  // answers of the requests received whole before it on the connection.
  const refusing = new WeakSet<Duplex>();
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    // The parser, once broken, refuses every later packet again: one answer.
    if (refusing.has(socket)) return;
    refusing.add(socket);
    refuseAfterAnswers(socket, error);
  });
  // CONNECT is no method of this service: Node would close the connection without a word.
  // Node hands the socket over untracked (no timeouts; a graceful stop does not see it): it is
  // answered after the answers before it on the connection, then closed, within bounds.
  server.on('connect', (req: IncomingMessage, socket: Duplex) => {
    socket.on('error', () => socket.destroy());
    (socket as Socket).setTimeout(CONNECT_IDLE_MS, () => socket.destroy());
    const answer = () => {
      const pending = answering(socket);
      if (pending && !pending.writableFinished) {
        // The next answer queued on the connection takes the socket once this one is sent.
        pending.once('finish', answer);
        pending.once('close', () => pending.writableFinished || socket.destroy());
        return;
      }
      if (!socket.writable) return void socket.destroy();
      socket.end(rawErrorResponse('missing_endpoint', 'Not Found', pathOfTarget(req.url ?? '/')), () => socket.destroy());
    };
    answer();
  });
  return server;
}

const openSockets = new WeakMap<Server, Set<Socket>>();
/** Connections that have had a request run. */
const served = new WeakSet<object>();
const stoppingServers = new WeakSet<Server>();

/** The answer that holds the connection now (Node's `_httpMessage`), if any. */
const answering = (socket: Duplex) => (socket as { _httpMessage?: ServerResponse | null })._httpMessage ?? undefined;

/**
 * Node's `closeIdleConnections` (which `server.close()` calls) takes a connection for idle once
 * its answer has ended, before its bytes are sent, and cuts that answer short: here a
 * connection is idle when it has been served and no answer holds it.
 */
function closeServedIdle(server: Server): void {
  for (const socket of openSockets.get(server) ?? []) if (served.has(socket) && !answering(socket)) socket.destroy();
}

/**
 * Winds down the connections of a stopping `server`: from now on each answer closes its
 * connection, and idle ones are closed at once; then every `sweepMs`, those no answer has held
 * at two sweeps in a row (ones that have sent nothing, or part of a request's headers: Node
 * counts them busy, so a stop would wait its whole timeout for a client that never sends) and
 * those whose request's body has made no progress to its end since the sweep before (nothing
 * has run for it). Two sweeps, not one: a process that was not scheduled for a sweep's length
 * runs its timers before it reads its sockets, so a request that arrived meanwhile is read
 * after the first sweep that sees its connection quiet, and served.
 */
export function closeQuietConnections(server: Server, sweepMs = 1_000): void {
  stoppingServers.add(server);
  closeServedIdle(server);
  const incomplete = new WeakSet<object>();
  const quiet = new WeakSet<object>();
  const sweep = setInterval(() => {
    const open = openSockets.get(server);
    if (!open || open.size === 0) return void clearInterval(sweep);
    for (const socket of open) {
      const res = answering(socket);
      if (!res) {
        if (quiet.has(socket)) socket.destroy();
        else quiet.add(socket);
      } else if (!res.headersSent && !res.req.complete) {
        if (incomplete.has(res)) socket.destroy();
        else incomplete.add(res);
      }
    }
  }, sweepMs);
  sweep.unref();
}

/**
 * Answers a client error on `socket`. A request received whole and still being answered
 * (pipelined bytes broke after it) gets its answer first: it ran, and its client must learn
 * how; then the refusal, and the end of the connection (none after an answer that ends it).
 */
function refuseAfterAnswers(socket: Duplex, error: NodeJS.ErrnoException, before?: IncomingMessage): void {
  const pending = answering(socket);
  if (pending?.req?.complete && !pending.writableFinished) {
    pending.once('finish', () => refuseAfterAnswers(socket, error, pending.req));
    pending.once('close', () => pending.writableFinished || socket.destroy());
    return;
  }
  if (!socket.writable || pending?.headersSent) {
    socket.destroy();
    return;
  }
  const path = clientErrorPath(error, pending, before);
  const response =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? rawErrorResponse('headers_too_large', 'Request Header Fields Too Large', path)
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? rawErrorResponse('malformed_request', 'Request Timeout', path, { status: 408, detail: 'The request took too long to arrive.' })
        : unknownMethod(error)
          ? rawErrorResponse('missing_endpoint', 'Not Found', path)
          : rawErrorResponse('malformed_request', 'Bad Request', path);
  socket.end(response);
}
