/**
 * Starts the real Express app on an ephemeral port, on a database of its own (created on
 * the run's PostgreSQL and migrated), with a clock the test moves by hand.
 */
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, inject } from 'vitest';
import type { MikroORM } from '@mikro-orm/postgresql';
import { createClient } from '../../src/client.js';
import { ManualClock } from '../../src/core/clock.js';
import { createLogger, type Logger } from '../../src/core/logger.js';
import { openOrm } from '../../src/app/orm.js';
import { createApp } from '../../src/http/app.js';
import { createHttpServer } from '../../src/http/http-server.js';
import { EventHub, type Subscription } from '../../src/changes/event-hub.js';
import { hashAccessToken } from '../../src/users/credentials.js';
import { request as sendRequest, type ApiResponse, type RequestOptions } from './http.js';
import { testResolver } from './test-resolver.js';
import type { WebhookHost } from '../../src/core/context.js';

import { DAY, T0, seconds } from './times.js';

export { DAY, T0, seconds };

export type { ApiResponse, RequestOptions } from './http.js';

/**
 * PostgreSQL itself for a database URL of the run: the same URL, except in the pooled tier
 * (test/helpers/global-setup.ts), where the run's URLs lead through PgBouncer and this one
 * leads past it (for LISTEN and the migration lock, as DATABASE_DIRECT_URL does).
 */
export function directUrlOf(databaseUrl: string): string {
  const admin = new URL(inject('adminDatabaseUrl'));
  const direct = new URL(inject('directAdminDatabaseUrl'));
  const url = new URL(databaseUrl);
  if (url.host !== admin.host) return databaseUrl;
  url.host = direct.host;
  return url.toString();
}

/**
 * A new database on the run's PostgreSQL, already migrated: a copy of the template the global
 * setup migrated once, its write functions installed (opening it with `migrate: true` would
 * find nothing to do, so startTestApp does not ask for it on a database it made).
 */
export async function createTestDatabase(): Promise<string> {
  const admin = inject('adminDatabaseUrl');
  const name = `t_${process.pid}_${randomBytes(5).toString('hex')}`;
  const client = new pg.Client({ connectionString: directUrlOf(admin) });
  await client.connect();
  try {
    await client.query(`create database "${name}" template "${inject('templateDatabase')}"`);
  } finally {
    await client.end();
  }
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * The app's change feed, which also says how many streams an access token has open in it:
 * the count its limit of MAX_STREAMS_PER_TOKEN reads, which drops when a stream is released.
 */
export class TestEventHub extends EventHub {
  readonly #open = new Set<Subscription>();

  override async subscribe(userId: number, tokenHash: string): Promise<Subscription> {
    const subscription = await super.subscribe(userId, tokenHash);
    this.#open.add(subscription);
    return subscription;
  }

  /** Streams of this access token open in this process (a closed one has given its slot back). */
  streamsOf(token: string): number {
    const hash = hashAccessToken(token);
    let n = 0;
    for (const s of this.#open) {
      if (s.closed) this.#open.delete(s);
      else if (s.tokenHash === hash) n += 1;
    }
    return n;
  }
}

export interface TestAppOptions {
  /** A database to share (another instance, an outage test's own server); else a new one. */
  databaseUrl?: string;
  rateLimits?: { authPerMinute: number; perMinute: number };
  logger?: Logger;
  clock?: ManualClock;
  /** Milliseconds between an event stream's idle ticks (heartbeat, token check). */
  eventsIdleMs?: number;
  /** Milliseconds an event stream waits for a client that does not read. */
  eventsSlowClientMs?: number;
  /** Origins CORS allows (CORS_ORIGINS); none unless given. */
  corsOrigins?: string[];
  /** Express `trust proxy` (TRUST_PROXY); off unless given. */
  trustProxy?: boolean | number | string;
  /**
   * How webhook URLs are checked: public addresses only, names resolved by `testResolver`
   * (test/helpers/test-resolver.ts), unless given. No deliverer runs in a test app: delivery
   * tests start the service (src/server.ts).
   */
  webhooks?: WebhookHost;
}

export async function startTestApp(options: TestAppOptions = {}) {
  const databaseUrl = options.databaseUrl ?? (await createTestDatabase());
  const directUrl = directUrlOf(databaseUrl);
  // A database given may be a new one (an outage test's own server): migrated here. A copy of
  // the template is migrated already; looking again (the migrations' table, the write
  // functions, under the lock on a connection of its own) cost about 0.1 s of CPU per app.
  const migrate = options.databaseUrl !== undefined;
  const orm: MikroORM = await openOrm(databaseUrl, { migrate, poolSize: 20, directUrl });
  const clock = options.clock ?? new ManualClock(T0);
  const events = new TestEventHub({ databaseUrl: directUrl, idleMs: options.eventsIdleMs, slowClientMs: options.eventsSlowClientMs });
  const app = createApp({
    orm,
    clock,
    logger: options.logger ?? createLogger('silent'),
    trustProxy: options.trustProxy ?? false,
    passwordHashCost: 1024,
    rateLimits: options.rateLimits,
    events,
    corsOrigins: options.corsOrigins,
    webhooks: options.webhooks ?? { allowPrivateUrls: false, resolve: testResolver() },
  });
  const server = createHttpServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const request = <T = any>(method: string, path: string, options: RequestOptions = {}): Promise<ApiResponse<T>> =>
    sendRequest<T>(baseUrl, method, path, options);

  let users = 0;
  /** Registers a fresh user and returns its id and token. */
  async function register(username = `user${++users}_${randomBytes(3).toString('hex')}`) {
    const res = await request('POST', '/api/users', { body: { user: { username, password: 'correct horse' } } });
    if (res.status !== 201) throw new Error(`register failed: ${res.status} ${res.text}`);
    return { id: res.body.data.id as number, username, token: res.body.meta.token as string };
  }

  return {
    baseUrl,
    databaseUrl,
    /** This app's live change feed (open streams, their limits). */
    events,
    clock,
    orm,
    request,
    register,
    trpc: (token?: string) => createClient({ url: baseUrl, token }),
    async close() {
      await closing('the change feed', events.stop(), () => `${events.size} streams open`);
      server.closeAllConnections();
      await closing(
        'the HTTP server',
        new Promise<void>((resolve) => server.close(() => resolve())),
        () => new Promise<string>((resolve) => server.getConnections((_error, n) => resolve(`${n} connections open`))),
      );
      await closing('the database pool', orm.close(true), () => sessionsOf(databaseUrl));
    },
  };
}

export type TestApp = Awaited<ReturnType<typeof startTestApp>>;

/** How long one step of `close()` may take before the test run is told which step, and moves on. */
const CLOSE_STEP_MS = 15_000;

/**
 * One step of closing a test app. A step that hangs would only show as a hook timeout naming
 * no step; instead, after CLOSE_STEP_MS, the close fails naming the step and what is still
 * open (`state()`): a hang there is a defect of the service (a pool connection nobody gave
 * back hung `orm.close()` until src/db/pool-ending.ts).
 */
async function closing(step: string, done: Promise<unknown>, state: () => string | Promise<string>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), CLOSE_STEP_MS)));
  try {
    if ((await Promise.race([done, late])) === 'late') {
      throw new Error(`test app close: ${step} did not finish within ${CLOSE_STEP_MS} ms (${await state()})`);
    }
  } finally {
    clearTimeout(timer);
  }
}

/** What the app's connections to its database are doing, as PostgreSQL sees them: a connection never released keeps the pool's end waiting. */
async function sessionsOf(databaseUrl: string): Promise<string> {
  const client = new pg.Client({ connectionString: directUrlOf(databaseUrl), connectionTimeoutMillis: 2_000, query_timeout: 2_000 });
  try {
    await client.connect();
    const { rows } = await client.query(
      `select state, left(query, 120) as query from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`,
    );
    return rows.length === 0 ? 'no sessions on its database' : rows.map((r) => `${r.state}: ${r.query}`).join('; ');
  } catch (error) {
    return `its sessions could not be read: ${(error as Error).message}`;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The single error of an envelope, checking that there is exactly one. */
export function onlyError(body: { errors: Array<Record<string, unknown>> }) {
  if (!body?.errors || body.errors.length !== 1) throw new Error(`expected one error, got ${JSON.stringify(body)}`);
  return body.errors[0]!;
}

/** A test app and a raw SQL connection to its database, for tests that look at the rows. */
export async function startTestAppWithSql(options: TestAppOptions = {}): Promise<{ app: TestApp; db: pg.Client }> {
  const app = await startTestApp(options);
  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  return { app, db };
}

/**
 * An object that stands for one that exists only while the file's tests run (made in
 * beforeAll): reading a member forwards to the current one; before or after, it throws.
 */
function standIn<T extends object>(current: () => T | undefined, what: string): T {
  return new Proxy({} as T, {
    get(_target, key) {
      const target = current();
      if (key === 'then' && target === undefined) return undefined;
      if (target === undefined) throw new Error(`${what} is only there while the tests run (beforeAll to afterAll), not while they are collected`);
      const value = Reflect.get(target, key);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

export interface UseTestAppOptions extends TestAppOptions {
  /** Sets the clock back to T0 before each test. */
  resetClock?: boolean;
}

/**
 * The app of a test file (or of a describe block, when called inside one): started before
 * its tests, closed after them. Returns a stand-in to use like the app itself
 * (`app.register()`, `app.request(...)`), in tests and hooks. Options may be a function,
 * read when the app starts (to share another app's database or clock).
 */
export function useTestApp(options: UseTestAppOptions | (() => UseTestAppOptions) = {}): TestApp {
  let app: TestApp | undefined;
  const resolved = () => (typeof options === 'function' ? options() : options);
  beforeAll(async () => {
    app = await startTestApp(resolved());
  });
  afterAll(async () => {
    await app?.close();
    app = undefined;
  });
  beforeEach(() => {
    if (app && resolved().resetClock) app.clock.set(T0);
  });
  return standIn(() => app, 'the test app');
}

/** `useTestApp` with a raw SQL connection to the app's database (`startTestAppWithSql`). */
export function useTestAppWithSql(options: UseTestAppOptions = {}): { app: TestApp; db: pg.Client } {
  let started: { app: TestApp; db: pg.Client } | undefined;
  beforeAll(async () => {
    started = await startTestAppWithSql(options);
  });
  afterAll(async () => {
    await started?.db.end();
    await started?.app.close();
    started = undefined;
  });
  beforeEach(() => {
    if (started && options.resetClock) started.app.clock.set(T0);
  });
  return { app: standIn(() => started?.app, 'the test app'), db: standIn(() => started?.db, 'the SQL connection') };
}
