/**
 * The node:http server around the Express app: bounded timeouts, and the error envelope
 * even for requests Node refuses before Express sees them (oversized headers, broken framing).
 */
import { randomUUID } from 'node:crypto';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { apiError } from '../core/errors.js';

function rawErrorResponse(status: number, reason: string, detail: string): string {
  const body = JSON.stringify({ errors: [apiError(status, status === 431 ? 'headers_too_large' : 'malformed_request', detail)] });
  return [
    `HTTP/1.1 ${status} ${reason}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    `X-Request-Id: ${randomUUID()}`,
    'X-Content-Type-Options: nosniff',
    "Content-Security-Policy: default-src 'none'; frame-ancestors 'none'",
    'X-Frame-Options: SAMEORIGIN',
    'Referrer-Policy: no-referrer',
    'Connection: close',
    '',
    body,
  ].join('\r\n');
}

export function createHttpServer(app: RequestListener): Server {
  const server = createServer(app);
  server.keepAliveTimeout = 5_000;
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    if (!socket.writable || (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent) {
      socket.destroy();
      return;
    }
    const response =
      error.code === 'HPE_HEADER_OVERFLOW'
        ? rawErrorResponse(431, 'Request Header Fields Too Large', 'The request line and headers must stay under 16 KiB.')
        : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? rawErrorResponse(408, 'Request Timeout', 'The request took too long to arrive.')
          : rawErrorResponse(400, 'Bad Request', 'The request is not valid HTTP.');
    socket.end(response);
  });
  return server;
}
