/**
 * The Express application: request ids and logs, health, the OpenAPI document and its
 * docs page, the tRPC door at /trpc, the REST event stream (whose limits, like the tRPC
 * subscription's, are kept in the database: the hub's stream leases, the rate-limit rows), the
 * REST door under /api, and the error envelope for everything that falls through.
 */
import { isIP } from 'node:net';
import querystring from 'node:querystring';
import express, { type ErrorRequestHandler, type Request, type RequestHandler, type Response } from 'express';
import cors from 'cors';
import helmet from 'helmet';
import type { MikroORM } from '@mikro-orm/postgresql';
import { createExpressMiddleware } from '@trpc/server/adapters/express';
import type { Clock } from '../core/clock.js';
import { DomainError } from '../core/errors.js';
import { BODY_LIMIT_BYTES } from '../core/limits.js';
import { failureLog, poolStateOf } from '../core/failure-log.js';
import { isDatabaseUnavailable, isReadOnlyDatabase, isServerGone, toErrorResponse, unavailable } from '../core/failures.js';
import { DatabaseRoleWatch } from '../db/database-role.js';
import type { Logger } from '../core/logger.js';
import { createContextInner, type Context, type WebhookHost } from '../core/context.js';
import { writes } from '../app/write-functions.js';
import { appRouter } from '../app/router.js';
import { authenticate } from '../users/authentication.js';
import { EventHub } from '../changes/event-hub.js';
import { EVENTS_PATH } from '../changes/events.router.js';
import { streamLeases } from '../changes/stream-leases.js';
import { Announcer } from '../writes/announcer.js';
import { eventStreamHandler } from './event-stream.js';
import type { InFlight } from './in-flight.js';
import { requestLog } from './request-log.js';
import { restHandlers, sendErrorResponse } from './rest.js';
import { doorRefusal, trpcDoorGuard } from './trpc-door.js';
import { streamedTrpcCalls } from './trpc-streamed.js';
import { sendRefusal } from './door-errors.js';
import { checkFraming, requestOrigin } from './request-framing.js';
import type { ServiceMetrics } from '../metrics/service-metrics.js';

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
  /** This process's live change feed; one is made (and kept in `app.locals.events`) if omitted. */
  events?: EventHub;
  /** Where committed writes are announced (src/writes/announcer.ts); one on `orm` is made if omitted. */
  announcer?: Announcer;
  /** False while the service's own (embedded) PostgreSQL is down: /healthz fails then. */
  databaseUp?: () => boolean;
  /** Counts and times every request (src/metrics/); none are kept when omitted. */
  metrics?: ServiceMetrics;
  /** Webhook URL checks (WEBHOOK_ALLOW_PRIVATE_URLS) and this process's deliverer; public URLs only when omitted. */
  webhooks?: WebhookHost;
  /** What this process sees of its database (primary, read-only, unreachable); one on `orm` is made if omitted. */
  database?: DatabaseRoleWatch;
}

/** How long a request waits for a probe during an outage before it is answered 503. */
const OUTAGE_WAIT_MS = 300;
/** The tRPC subscription to the change log. */
const EVENTS_SUBSCRIPTION = 'events.onChange';

/** How long /readyz waits for the database: a balancer checks it (HAProxy here, `timeout check 2s`). */
const READY_PROBE_TIMEOUT_MS = 5_000;

/** The database's watch of an ORM: its probe runs through the ORM's pool, as requests do. */
export function databaseRoleWatch(orm: MikroORM): DatabaseRoleWatch {
  return new DatabaseRoleWatch((sql) => orm.em.getConnection().execute(sql));
}

/**
 * The client's address: Express's `req.ip` (from X-Forwarded-For when TRUST_PROXY says so)
 * only when it is an IP address; a proxy hop may carry any string, which would make any
 * number of rate-limit keys. Else the socket's address.
 */
function clientAddress(req: Request): string {
  const ip = req.ip;
  if (ip !== undefined && isIP(ip) !== 0) return ip;
  return req.socket.remoteAddress ?? 'unknown';
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
  // Every member of the query is read (Express's parser stops at 1,000, so a repeated or bad
  // parameter after a thousand empty members went unseen); the request line bounds their number.
  app.set('query parser', (query: string) => querystring.parse(query, '&', '=', { maxKeys: 0 }));

  const database = deps.database ?? databaseRoleWatch(orm);
  app.locals.database = database;
  const logRequestFailure = failureLog(logger, 'request failed', poolStateOf(orm));
  // Every failed request passes here: a 503 is counted, and one the database caused tells the
  // watch what the database is now (read-only, or out of reach).
  const logFailure: typeof logRequestFailure = (error, status, fields) => {
    if (status === 503) {
      const seen = !isDatabaseUnavailable(error) ? undefined : isReadOnlyDatabase(error) ? 'read-only' : 'unreachable';
      database.noteUnavailable(seen, isServerGone(error));
    }
    logRequestFailure(error, status, fields);
  };
  const rateLimits = deps.rateLimits ?? { authPerMinute: 0, perMinute: 0 };
  const events = deps.events ?? new EventHub({ databaseUrl: orm.config.get('clientUrl')!, log: logger });
  // The streams' leases live in this database, shared with every other process on it.
  events.useLeases(streamLeases(() => orm.em.fork()));
  app.locals.events = events;
  const announcer = deps.announcer ?? new Announcer(() => orm.em.fork());
  const createContext = (req: Request, res: Response, batched = false, response = { notModified: false }, refusal?: DomainError): Context => {
    // The root entity manager: a request sends statements through it, and what needs a unit of
    // work forks it there (MikroORM refuses identity-map work on the root: allowGlobalContext).
    // A fork per request cost about 26 µs of every request's CPU (bench/README.md).
    const em = orm.em;
    return createContextInner({
      em,
      clock,
      authenticate: (authorization) => authenticate(em, authorization, clock.now()),
      writes,
      announcer,
      authorization: req.headers.authorization,
      baseUrl: requestOrigin(req),
      passwordHashCost: deps.passwordHashCost,
      clientIp: clientAddress(req),
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
      log: logger,
      live: events,
      webhooks: deps.webhooks,
      // The outage's 503 first: with the database out of reach, no other refusal can be answered after the token.
      refusal: (res.locals.refusal as DomainError | undefined) ?? refusal,
    });
  };

  // Expired rows (rate limits, tokens, old events, tickets) are pruned by src/core/housekeeping.ts.

  if (deps.metrics) app.use(deps.metrics.requests());
  app.use(requestLog(logger));
  app.use(
    helmet({
      // The docs page loads its own scripts and styles from this origin only.
      // No upgrade-insecure-requests: over plain http at any host but localhost it makes the
      // browser fetch the docs page's own scripts over https, and the page stays blank.
      contentSecurityPolicy: {
        directives: { 'script-src': ["'self'"], 'img-src': ["'self'", 'data:'], 'upgrade-insecure-requests': null },
      },
      crossOriginEmbedderPolicy: false,
    }),
  );
  // Answers carry tokens and user data: no cache, shared or private, may keep them.
  app.use(['/api', '/trpc'], (_req, res, next) => {
    res.setHeader('Cache-Control', 'no-store');
    next();
  });
  // A request with no valid Host, or a transfer coding Node does not decode, goes no further.
  app.use(checkFraming);
  // While a request has found the database gone and no probe has reached it since (a
  // failover under way), the doors answer 503 within OUTAGE_WAIT_MS instead of waiting on the
  // way to it: each request asks a probe (shared), and goes on if it answered in time. The
  // tRPC subscription refuses in its own shape (an SSE error), raised before its token is
  // read (src/core/procedures.ts), as the token could not be read either.
  app.use(['/api', '/trpc'], (req, res, next) => {
    if (!database.outage) return next();
    database.answersWithin(OUTAGE_WAIT_MS).then((answers) => {
      if (answers) return next();
      database.noteUnavailable(undefined);
      if (req.originalUrl.split('?', 1)[0] !== `/trpc/${EVENTS_SUBSCRIPTION}`) return sendRefusal(req, res, unavailable());
      res.locals.refusal = unavailable();
      next();
    }, next);
  });
  if (deps.corsOrigins?.length) {
    app.use(cors({ origin: deps.corsOrigins, exposedHeaders: ['X-Request-Id', 'ETag', 'Idempotent-Replayed', 'RateLimit-Policy', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After'] }));
  }

  // Liveness: 200 while the process is up, also while its database is not (a restart would not
  // bring a primary back), with what it sees of the database (API-CONTRACT.md §17).
  app.get('/healthz', async (_req, res) => {
    if (deps.databaseUp?.() === false) {
      const detail = 'The embedded PostgreSQL is down; the service is restarting it.';
      sendErrorResponse(res, toErrorResponse(DomainError.of('unavailable', { detail }).withRetryAfter(5)));
      return;
    }
    await database.probe();
    res.json({ status: 'ok', database: database.state });
  });
  // Readiness: the database answers (a primary, or a read-only server that still serves reads).
  app.get('/readyz', async (_req, res) => {
    const role = await database.probe(READY_PROBE_TIMEOUT_MS);
    if (role === 'unreachable') sendErrorResponse(res, toErrorResponse(unavailable()));
    else res.json({ status: 'ready' });
  });

  app.get('/openapi.json', (_req, res, next) => {
    openApiDocument().then((document) => res.json(document), next);
  });
  app.use('/docs', docsPage);

  app.use(
    '/trpc',
    trpcDoorGuard(appRouter),
    notModifiedOnTrpc,
    streamedTrpcCalls({ router: appRouter, createContext: (req, res) => createContext(req, res, false, (res as Response).locals.conditional), logFailure }),
    createExpressMiddleware({
      router: appRouter,
      // A batch of one call is a single call: it keeps its ETag and conditional headers.
      createContext: ({ req, res, info }) => {
        const refusal = doorRefusal(req, info);
        return createContext(req, res, info.isBatchCall && info.calls.length > 1, (res as Response).locals.conditional, refusal);
      },
      maxBodySize: BODY_LIMIT_BYTES,
      onError: ({ error, req }) => {
        logFailure(error.cause ?? error, toErrorResponse(error).status, { door: 'trpc', reqId: req.id });
      },
    }),
  );

  app.get(
    EVENTS_PATH,
    eventStreamHandler({
      orm, clock, live: events, logFailure, rateLimits, clientAddress,
      authenticate: (a) => authenticate(orm.em.fork(), a, clock.now()),
    }),
  );

  const api = express.Router();
  api.use(restHandlers({ router: appRouter, createContext, logFailure }));
  app.use(api);

  app.use((req, res) => {
    sendRefusal(req, res, DomainError.of('missing_endpoint'));
  });

  // What a middleware passed on as an error: in the shape of the request's door (a tRPC error under /trpc).
  const errorHandler: ErrorRequestHandler = (err, req, res, _next) => {
    logFailure(err, toErrorResponse(err).status, { reqId: req.id });
    if (res.headersSent) {
      res.end();
      return;
    }
    sendRefusal(req, res, err);
  };
  app.use(errorHandler);
  return app;
}

/**
 * The OpenAPI document, built from the router on first use and then kept: it is the same for
 * every app of the process, and only /openapi.json and the docs page need it, so neither a
 * start nor an app that never serves them pays for it, nor for trpc-to-openapi's generator,
 * which is loaded with it.
 */
let builtDocument: Promise<unknown> | undefined;
function openApiDocument(): Promise<unknown> {
  // A failed build is not kept: the next request tries again, as a start would have.
  return (builtDocument ??= import('../openapi/document.js')
    .then(({ buildOpenApiDocument }) => buildOpenApiDocument())
    .catch((error: unknown) => {
      builtDocument = undefined;
      throw error;
    }));
}

/** The docs page (Swagger UI), loaded with its library on its first request. */
let docsRouter: Promise<express.Router> | undefined;
const docsPage: RequestHandler = (req, res, next) => {
  docsRouter ??= Promise.all([import('swagger-ui-express'), openApiDocument()])
    .then(([{ default: swaggerUi }, document]) =>
      express.Router().use(swaggerUi.serve, swaggerUi.setup(document as never, { customSiteTitle: 'Planning service API' })),
    )
    .catch((error: unknown) => {
      docsRouter = undefined;
      throw error;
    });
  docsRouter.then((router) => router(req, res, next), next);
};
