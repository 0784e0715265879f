/**
 * Environment → typed configuration, validated once at start-up.
 * Every knob of API-CONTRACT.md section 9 lives here; nothing else reads process.env but
 * src/core/output-checks.ts (NODE_ENV, which the contract does not name).
 */
import { isIP } from 'node:net';
import path from 'node:path';
import { z } from 'zod';

/**
 * A whole number written in decimal digits, then held to `check`: a space, `0x10`, `1e1` or `1.5`
 * is refused (zod's coercion read " " as 0, which turned a rate limit off without a word).
 */
const whole = (check: z.ZodNumber) => z.string().regex(/^[0-9]+$/, 'a whole number, written in decimal digits').transform(Number).pipe(check);
const count = (fallback: number) => whole(z.number().min(0)).default(fallback);

/** A PostgreSQL connection URL as `pg` reads them: `postgres://`, `postgresql://`, or `socket:` for a Unix socket. */
const postgresUrl = z
  .string()
  .min(1)
  .refine((value) => URL.canParse(value) && ['postgres:', 'postgresql:', 'socket:'].includes(new URL(value).protocol), 'a PostgreSQL URL, such as postgres://user:password@host:5432/database (or socket:/run/postgresql?db=planning)');

/** Express's `trust proxy` as a list: loopback, linklocal, uniquelocal, or addresses and subnets (`10.0.0.0/8`, `10.0.0.0/255.0.0.0`). */
const PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);
const trustedProxy = (item: string): boolean => {
  const [address = '', range, ...more] = item.split('/');
  const family = isIP(address);
  if (PROXY_NAMES.has(item) || (family !== 0 && range === undefined)) return true;
  if (family === 0 || more.length > 0 || range === undefined) return false;
  return /^\d{1,3}$/.test(range) ? Number(range) <= (family === 4 ? 32 : 128) : isIP(range) === family;
};
const trustProxy = z
  .string()
  .min(1)
  .refine(
    (value) => ['true', 'false'].includes(value) || /^\d+$/.test(value) || value.split(',').every((item) => trustedProxy(item.trim())),
    'true, false, a number of hops, or a comma list of loopback, linklocal, uniquelocal, addresses and subnets',
  );

const EnvSchema = z.object({
  PORT: whole(z.number().min(0).max(65535)).default(3000),
  HOST: z.string().min(1).default('0.0.0.0'),
  DATABASE_URL: postgresUrl.optional(),
  DATABASE_DIRECT_URL: postgresUrl.optional(),
  DATABASE_PREPARED_STATEMENTS: z.enum(['auto', 'on', 'off']).default('auto'),
  DATA_DIR: z.string().min(1).default('./.data'),
  WEB_CONCURRENCY: whole(z.number().min(1).max(64)).default(1),
  DATABASE_POOL_SIZE: whole(z.number().min(1).max(1000)).optional(),
  TRUST_PROXY: trustProxy.optional(),
  RATE_LIMIT_AUTH_PER_MINUTE: count(30),
  RATE_LIMIT_PER_MINUTE: count(1200),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  CORS_ORIGINS: z.string().optional(),
  SHUTDOWN_TIMEOUT_MS: whole(z.number().min(0)).default(10_000),
  EVENTS_RETENTION_DAYS: whole(z.number().min(1).max(3650)).default(30),
  METRICS_PORT: whole(z.number().min(0).max(65535)).optional(),
  METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  WEBHOOK_RETRY_SCHEDULE: z
    .string()
    .regex(/^\s*\d+(\.\d+)?\s*(,\s*\d+(\.\d+)?\s*)*$/, 'a comma list of seconds, such as 5,300,1800')
    .default('5,300,1800,7200,18000,36000,36000'),
  WEBHOOK_TIMEOUT_MS: whole(z.number().min(1).max(600_000)).default(15_000),
  WEBHOOK_ALLOW_PRIVATE_URLS: z.enum(['0', '1']).default('0'),
});

export interface Config {
  port: number;
  host: string;
  databaseUrl: string | undefined;
  /**
   * PostgreSQL itself, for what a transaction-mode pooler cannot carry (the LISTEN connection,
   * the migration lock); unset: DATABASE_URL. When it differs, DATABASE_URL is taken to be a pooler.
   */
  databaseDirectUrl: string | undefined;
  /** Named prepared statements (src/db/prepared.ts): `auto` is on unless behind a pooler. */
  preparedStatements: 'auto' | 'on' | 'off';
  dataDir: string;
  webConcurrency: number;
  /** Database connections per server process; unset: sized from the database (src/db/pool-size.ts). */
  databasePoolSize: number | undefined;
  /** Value for Express's `trust proxy` setting, or false. */
  trustProxy: boolean | number | string;
  rateLimitAuthPerMinute: number;
  rateLimitPerMinute: number;
  logLevel: z.infer<typeof EnvSchema>['LOG_LEVEL'];
  /** Origins allowed by CORS; empty means CORS is off. */
  corsOrigins: string[];
  shutdownTimeoutMs: number;
  /** Days the change log keeps events. */
  eventsRetentionDays: number;
  /** Port of the separate GET /metrics server; unset: no metrics are kept or served. */
  metricsPort: number | undefined;
  /** Address the metrics server listens on (the loopback by default: off the public network). */
  metricsHost: string;
  /** scrypt cost parameter N for new password hashes (a power of two). */
  passwordHashCost: number;
  /** Webhook deliveries (API-CONTRACT.md §14). */
  webhooks: WebhookConfig;
}

export interface WebhookConfig {
  /** Seconds to wait before each retry of a failed delivery, in turn. */
  retrySchedule: number[];
  /** How long one delivery attempt may take. */
  timeoutMs: number;
  /** `http:` and loopback or private addresses allowed (development and tests). */
  allowPrivateUrls: boolean;
}

function parseTrustProxy(value: string | undefined): Config['trustProxy'] {
  if (value === undefined || value === '' || value === 'false') return false;
  if (value === 'true') return true;
  if (/^\d+$/.test(value)) return Number(value);
  return value;
}

/** scrypt's N for stored passwords (tests lower it to stay fast). */
export const PASSWORD_HASH_COST = 1 << 15;

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable means "not set", as in most shells' `VAR= command`.
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== ''));
  const parsed = EnvSchema.safeParse(present);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new Error(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  if (e.DATABASE_DIRECT_URL && !e.DATABASE_URL) {
    throw new Error('Invalid configuration:\nDATABASE_DIRECT_URL: only means something with DATABASE_URL (the embedded PostgreSQL needs neither)');
  }
  return {
    port: e.PORT,
    host: e.HOST,
    databaseUrl: e.DATABASE_URL,
    databaseDirectUrl: e.DATABASE_DIRECT_URL,
    preparedStatements: e.DATABASE_PREPARED_STATEMENTS,
    dataDir: path.resolve(e.DATA_DIR),
    webConcurrency: e.WEB_CONCURRENCY,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    trustProxy: parseTrustProxy(e.TRUST_PROXY),
    rateLimitAuthPerMinute: e.RATE_LIMIT_AUTH_PER_MINUTE,
    rateLimitPerMinute: e.RATE_LIMIT_PER_MINUTE,
    logLevel: e.LOG_LEVEL,
    corsOrigins: (e.CORS_ORIGINS ?? '').split(',').map((s) => s.trim()).filter(Boolean),
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    eventsRetentionDays: e.EVENTS_RETENTION_DAYS,
    metricsPort: e.METRICS_PORT,
    metricsHost: e.METRICS_HOST,
    passwordHashCost: PASSWORD_HASH_COST,
    webhooks: {
      retrySchedule: e.WEBHOOK_RETRY_SCHEDULE.split(',').map((s) => Number(s.trim())),
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
      allowPrivateUrls: e.WEBHOOK_ALLOW_PRIVATE_URLS === '1',
    },
  };
}

/**
 * The warning the start gives when WEB_CONCURRENCY asks for more server processes than the
 * cores this process may use (`os.availableParallelism()`), else undefined. Past the cores,
 * processes only take turns: each request costs more CPU (more processes, caches and
 * collections competing) and none more is served. docs/configuration.md, WEB_CONCURRENCY, says how to size it.
 */
export function concurrencyWarning(workers: number, cores: number): string | undefined {
  if (workers <= cores) return undefined;
  return (
    `WEB_CONCURRENCY=${workers} is more than the ${cores} core${cores === 1 ? '' : 's'} this process may use: ` +
    'the extra processes add CPU per request and no throughput; set it to the cores left to the service (docs/configuration.md, WEB_CONCURRENCY)'
  );
}
