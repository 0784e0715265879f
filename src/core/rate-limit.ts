/**
 * Rate limits of API-CONTRACT.md §9: per client IP on registration and login, per token on
 * everything else. Fixed one-minute windows counted in PostgreSQL (one upsert per request),
 * so the limit holds across all server processes. Answers carry the standard RateLimit
 * headers; a refused request is 429 `rate_limited` with Retry-After.
 */
import { createHash } from 'node:crypto';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { DomainError } from './errors.js';

const WINDOW_SECONDS = 60;

export interface RateLimitDecision {
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  reset: number;
  allowed: boolean;
}

/**
 * Keys are stored as a SHA-256 digest: fixed size whatever the client sent (a 12,000-character
 * address went past PostgreSQL's index row limit, a 500), and no address or token in clear.
 */
export function storedKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export async function hit(em: SqlEntityManager, key: string, limit: number, now: Date): Promise<RateLimitDecision> {
  const nowSeconds = Math.floor(now.getTime() / 1000);
  const windowStart = nowSeconds - (nowSeconds % WINDOW_SECONDS);
  const [row] = await em.execute<{ hits: number }[]>(
    `insert into rate_limit_hits ("key", "window_start", "hits") values (?, ?, 1)
      on conflict ("key", "window_start") do update set "hits" = rate_limit_hits."hits" + 1
      returning "hits"`,
    [storedKey(key), new Date(windowStart * 1000)],
  );
  const hits = row!.hits;
  return {
    limit,
    remaining: Math.max(0, limit - hits),
    reset: windowStart + WINDOW_SECONDS - nowSeconds,
    allowed: hits <= limit,
  };
}

/** Drops the counters of past windows; called now and then, never on the request path. */
export async function pruneRateLimits(em: SqlEntityManager, now: Date): Promise<void> {
  await em.execute('delete from rate_limit_hits where window_start < ?', [new Date(now.getTime() - 2 * WINDOW_SECONDS * 1000)]);
}

export function rateLimitHeaders(decision: RateLimitDecision): Record<string, string> {
  const headers: Record<string, string> = {
    'RateLimit-Policy': `${decision.limit};w=${WINDOW_SECONDS}`,
    'RateLimit-Limit': String(decision.limit),
    'RateLimit-Remaining': String(decision.remaining),
    'RateLimit-Reset': String(decision.reset),
  };
  if (!decision.allowed) headers['Retry-After'] = String(Math.max(1, decision.reset));
  return headers;
}

export function rateLimited(decision: RateLimitDecision): DomainError {
  const error = DomainError.of(429, 'rate_limited', `Too many requests; retry in ${Math.max(1, decision.reset)} seconds.`);
  error.retryAfter = Math.max(1, decision.reset);
  return error;
}
