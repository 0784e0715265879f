/**
 * The Express application: request ids and logs, health, the OpenAPI document and its
 * docs page, the tRPC door at /trpc, the REST door under /api, and the error envelope for
 * everything that falls through.
 */
import { randomUUID } from 'node:crypto';
import express, { type ErrorRequestHandler, type Request, type RequestHandler, type Response } from 'express';
import cors from 'cors';
import helmet from 'helmet';
import type { MikroORM } from '@mikro-orm/postgresql';
import { createExpressMiddleware } from '@trpc/server/adapters/express';
import swaggerUi from 'swagger-ui-express';
import type { Clock } from '../core/clock.js';
import { BODY_LIMIT_BYTES, DomainError } from '../core/errors.js';
import { toErrorResponse, unavailable } from '../core/failures.js';
import { pruneRateLimits } from '../core/rate-limit.js';
import type { Logger } from '../core/logger.js';
import type { Context } from '../core/trpc.js';
import { buildOpenApiDocument } from '../openapi/document.js';
import { appRouter } from '../router.js';
import { authenticate } from '../users/authentication.js';
import type { InFlight } from './in-flight.js';
import { restHandlers, sendErrorResponse } from './rest.js';

export interface AppDependencies {
  orm: MikroORM;
  clock: Clock;
  logger: Logger;
  trustProxy: boolean | number | string;
  passwordHashCost: number;
  rateLimits?: { authPerMinute: number; perMinute: number };
  /** Origins allowed to call the API from a browser; none by default. */
  corsOrigins?: string[];
  /** Counts running procedures for a graceful stop (src/server.ts). */
  inFlight?: InFlight;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

const requestId: RequestHandler = (req, res, next) => {
  const incoming = req.headers['x-request-id'];
  const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
  res.setHeader('X-Request-Id', id);
  next();
};

function requestLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      logger.info(
        {
          reqId: res.getHeader('x-request-id'),
          method: req.method,
          url: req.originalUrl,
          status: res.statusCode,
          ms: Number(process.hrtime.bigint() - started) / 1e6,
        },
        'request',
      );
    });
    next();
  };
}

/**
 * A read whose If-None-Match matched answers 304 on /trpc too. tRPC builds a fetch Response,
 * which cannot carry 304 with the body it always has, so the call answers 200 and its status
 * line is turned into 304 here, where Node writes it; Node then drops the body (RFC 9110
 * §15.4.5: a 304 has none). Only a single call can set the flag (src/core/conditional.ts).
 */
const notModifiedOnTrpc: RequestHandler = (_req, res, next) => {
  const conditional = { notModified: false };
  res.locals.conditional = conditional;
  const writeHead = res.writeHead;
  res.writeHead = function (this: Response, status: number, ...rest: unknown[]) {
    return writeHead.apply(this, [conditional.notModified && status === 200 ? 304 : status, ...rest] as never);
  } as typeof res.writeHead;
  next();
};

export function createApp(deps: AppDependencies): express.Express {
  const { orm, clock, logger } = deps;
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', deps.trustProxy);
  app.set('etag', false);

  const rateLimits = deps.rateLimits ?? { authPerMinute: 0, perMinute: 0 };
  const createContext = (req: Request, res: Response, batched = false, response = { notModified: false }): Context => {
    const em = orm.em.fork();
    return {
      em,
      clock,
      authorization: req.headers.authorization,
      baseUrl: `${req.protocol}://${req.host}`,
      passwordHashCost: deps.passwordHashCost,
      clientIp: req.ip ?? req.socket.remoteAddress ?? 'unknown',
      rateLimits,
      header: (name) => {
        const value = req.headers[name.toLowerCase()];
        return Array.isArray(value) ? value[0] : value;
      },
      setHeader: (name, value) => {
        if (!res.headersSent) res.setHeader(name, value);
      },
      response,
      batched,
      enterProcedure: deps.inFlight && (() => deps.inFlight!.enter()),
      authenticate: (authorization) => authenticate(em, authorization, clock.now()),
      log: logger,
    };
  };

  if (rateLimits.authPerMinute > 0 || rateLimits.perMinute > 0) {
    const prune = setInterval(() => {
      pruneRateLimits(orm.em.fork(), clock.now()).catch(() => undefined);
    }, 60_000);
    prune.unref();
  }

  app.use(requestId);
  app.use(requestLog(logger));
  app.use(
    helmet({
      // The docs page loads its own scripts and styles from this origin only.
      contentSecurityPolicy: { directives: { 'script-src': ["'self'"], 'img-src': ["'self'", 'data:'] } },
      crossOriginEmbedderPolicy: false,
    }),
  );
  if (deps.corsOrigins?.length) {
    app.use(cors({ origin: deps.corsOrigins, exposedHeaders: ['X-Request-Id', 'ETag', 'Idempotent-Replayed', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After'] }));
  }

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    try {
      await orm.em.getConnection().execute('select 1');
      res.json({ status: 'ready' });
    } catch {
      sendErrorResponse(res, toErrorResponse(unavailable()));
    }
  });

  const openApiDocument = buildOpenApiDocument();
  app.get('/openapi.json', (_req, res) => {
    res.json(openApiDocument);
  });
  app.use('/docs', swaggerUi.serve, swaggerUi.setup(openApiDocument, { customSiteTitle: 'Planning service API' }));

  app.use(
    '/trpc',
    notModifiedOnTrpc,
    createExpressMiddleware({
      router: appRouter,
      // A batch of one call is a single call: it keeps its ETag and conditional headers.
      createContext: ({ req, res, info }) =>
        createContext(req, res, info.isBatchCall && info.calls.length > 1, (res as Response).locals.conditional),
      maxBodySize: BODY_LIMIT_BYTES,
      onError: ({ error }) => {
        if (toErrorResponse(error).status >= 500) logger.error({ err: error.cause ?? error }, 'trpc call failed');
      },
    }),
  );

  const api = express.Router();
  api.use(...restHandlers({ router: appRouter, createContext, logger }));
  app.use(api);

  app.use((_req, res) => {
    sendErrorResponse(res, toErrorResponse(DomainError.of('missing_endpoint')));
  });

  const errorHandler: ErrorRequestHandler = (err, _req, res, _next) => {
    const response = toErrorResponse(err);
    if (response.status >= 500) logger.error({ err, reqId: res.getHeader('x-request-id') }, 'request failed');
    if (res.headersSent) {
      res.end();
      return;
    }
    sendErrorResponse(res, response);
  };
  app.use(errorHandler);
  return app;
}
