/**
 * The node:http server around the Express app: bounded timeouts, and the error envelope
 * even for requests Node refuses before Express sees them (oversized headers, broken framing).
 */
import { randomUUID } from 'node:crypto';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { DomainError, type ErrorCode } from '../core/errors.js';
import { errorBody, toErrorResponse } from '../core/failures.js';

function rawErrorResponse(code: ErrorCode, reason: string, options: { status?: number; detail?: string } = {}): string {
  const response = toErrorResponse(DomainError.of(code, options));
  const body = errorBody(response);
  return [
    `HTTP/1.1 ${response.status} ${reason}`,
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
        ? rawErrorResponse('headers_too_large', 'Request Header Fields Too Large')
        : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? rawErrorResponse('malformed_request', 'Request Timeout', { status: 408, detail: 'The request took too long to arrive.' })
          : rawErrorResponse('malformed_request', 'Bad Request');
    socket.end(response);
  });
  return server;
}
