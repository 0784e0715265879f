/**
 * Request ids and the request log: a well-formed incoming X-Request-Id is kept, else one is
 * made; it is sent back as X-Request-Id and kept as `req.id`, so every line logged about a
 * request (src/core/failure-log.ts) carries it as `reqId`. One line per request, when it ends,
 * with the method, the path only (a query may carry a tRPC input or a token), the status and
 * the time it took; at a level above info (production's usual warn) it costs nothing more
 * than the id. The line has the shape pino-http gave it: `{reqId, req: {method, path},
 * res: {statusCode}, responseTime, msg: 'request'}`, at info, also for a 5xx (whose cause is
 * logged at error by the code that caught it).
 */
import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import type { Logger } from '../core/logger.js';

declare module 'node:http' {
  interface IncomingMessage {
    /** This request's id, as sent back in X-Request-Id (src/http/request-log.ts). */
    id?: string;
  }
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The path of a request, without its query: a query may carry a tRPC input or a token. */
export function pathOf(url: string | undefined): string {
  const path = (url ?? '/').split('?')[0]!;
  return path.length > 2048 ? `${path.slice(0, 2048)}…` : path;
}

export function requestLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    req.id = id;
    res.setHeader('X-Request-Id', id);
    if (logger.isLevelEnabled('info')) {
      const start = Date.now();
      const line = { reqId: id, req: { method: req.method, path: pathOf(req.originalUrl) } };
      // The first of 'finish' (all sent) and 'close' (the client left first) ends the request.
      const done = () => {
        res.off('finish', done);
        res.off('close', done);
        logger.info({ ...line, res: { statusCode: res.statusCode }, responseTime: Date.now() - start }, 'request');
      };
      res.on('finish', done);
      res.on('close', done);
    }
    next();
  };
}
