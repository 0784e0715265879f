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
import { apiError } from '../core/errors.js';
import { toErrorResponse } from '../core/failures.js';
import { pruneRateLimits } from '../core/rate-limit.js';
import type { Logger } from '../core/logger.js';
import type { Context } from '../core/trpc.js';
import { buildOpenApiDocument } from '../openapi/document.js';
import { appRouter } from '../router.js';
import type { InFlight } from './in-flight.js';
import { TOO_DEEP_DETAIL } from './json-depth.js';
import { restHandlers, sendErrorResponse } from './rest.js';
import { refuseCall, trpcDoorGuard } from './trpc-door.js';

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

export function createApp(deps: AppDependencies): express.Express {
  const { orm, clock, logger } = deps;
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', deps.trustProxy);
  app.set('etag', false);

  const rateLimits = deps.rateLimits ?? { authPerMinute: 0, perMinute: 0 };
  const createContext = (req: Request, res: Response): Context => ({
    em: orm.em.fork(),
    clock,
    authorization: req.headers.authorization,
    baseUrl: `${req.protocol}://${req.host}`,
    passwordHashCost: deps.passwordHashCost,
    clientIp: req.ip ?? req.socket.remoteAddress ?? 'unknown',
    rateLimits,
    setHeader: (name, value) => {
      if (!res.headersSent) res.setHeader(name, value);
    },
    enterProcedure: deps.inFlight && (() => deps.inFlight!.enter()),
  });

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
    app.use(cors({ origin: deps.corsOrigins, exposedHeaders: ['X-Request-Id', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After'] }));
  }

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    try {
      await orm.em.getConnection().execute('select 1');
      res.json({ status: 'ready' });
    } catch {
      sendErrorResponse(res, {
        status: 503,
        errors: [apiError(503, 'service_unavailable', 'The database cannot be reached.')],
        retryAfter: 5,
      });
    }
  });

  const openApiDocument = buildOpenApiDocument();
  app.get('/openapi.json', (_req, res) => {
    res.json(openApiDocument);
  });
  app.use('/docs', swaggerUi.serve, swaggerUi.setup(openApiDocument, { customSiteTitle: 'Planning service API' }));

  app.use(
    '/trpc',
    trpcDoorGuard,
    createExpressMiddleware({
      router: appRouter,
      createContext: ({ req, res, info }) => {
        refuseCall(req, info);
        return createContext(req, res);
      },
      maxBodySize: 100 * 1024,
      onError: ({ error }) => {
        if (toErrorResponse(error).status >= 500) logger.error({ err: error.cause ?? error }, 'trpc call failed');
      },
    }),
  );

  const api = express.Router();
  api.use(...restHandlers({ router: appRouter, createContext, logger }));
  app.use(api);

  app.use((_req, res) => {
    sendErrorResponse(res, {
      status: 404,
      errors: [apiError(404, 'missing_endpoint', 'No endpoint answers this method and path.')],
    });
  });

  const errorHandler: ErrorRequestHandler = (err, _req, res, _next) => {
    const type = (err as { type?: string }).type;
    if (type === 'entity.too.deep') {
      sendErrorResponse(res, { status: 400, errors: [apiError(400, 'invalid_json', TOO_DEEP_DETAIL)] });
    } else if (type === 'entity.parse.failed') {
      sendErrorResponse(res, { status: 400, errors: [apiError(400, 'invalid_json', 'The request body is not valid JSON.')] });
    } else if (type === 'entity.too.large') {
      sendErrorResponse(res, { status: 413, errors: [apiError(413, 'payload_too_large', 'The request body is larger than 100 KiB.')] });
    } else if (type === 'encoding.unsupported' || type === 'charset.unsupported') {
      sendErrorResponse(res, { status: 415, errors: [apiError(415, 'unsupported_media_type', 'Send the body as UTF-8 application/json.')] });
    } else if (
      type === 'request.aborted' ||
      type === 'request.size.invalid' ||
      type === 'stream.encoding.set' ||
      // A body that does not inflate (Content-Encoding: gzip over anything else): the body
      // parser's own 400, which has no type.
      (type === undefined && (err as { status?: number }).status === 400)
    ) {
      sendErrorResponse(res, { status: 400, errors: [apiError(400, 'invalid_json', 'The request body could not be read.')] });
    } else {
      const response = toErrorResponse(err);
      if (response.status >= 500) logger.error({ err, reqId: res.getHeader('x-request-id') }, 'request failed');
      if (res.headersSent) {
        res.end();
        return;
      }
      sendErrorResponse(res, response);
    }
  };
  app.use(errorHandler);
  return app;
}
