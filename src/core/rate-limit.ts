/**
 * Rate limits of API-CONTRACT.md §9: per client address on registration and login, per
 * username on login, per client address on requests with an unknown token, per token on
 * everything else, the opening of an event stream included (on both doors). Sliding
 * one-minute windows counted in PostgreSQL (one statement a counter), so the limits hold
 * across all server processes and instances. Answers carry the standard RateLimit headers; a
 * refused request is 429 `rate_limited` with Retry-After. `enforceRateLimit` is the one way a
 * request is counted, by the procedures (src/core/procedures.ts) and by the REST event stream
 * (src/http/event-stream.ts), which runs outside them.
 */
import { createHash } from 'node:crypto';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { DomainError } from './errors.js';
import { noteRateLimitRefusal, type RateLimitKind } from './request-scope.js';

const WINDOW_SECONDS = 60;

export interface RateLimitDecision {
  limit: number;
  remaining: number;
  /** Seconds until the current window ends, or, when no request fits now, until one does. */
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

/** Counts `requests` (one request; a batch's operations) under `key` now. */
export async function hit(em: SqlEntityManager, key: string, limit: number, now: Date, requests = 1): Promise<RateLimitDecision> {
  const nowMs = now.getTime();
  const windowMs = WINDOW_SECONDS * 1000;
  const windowStart = nowMs - (nowMs % windowMs);
  const stored = storedKey(key);
  const [row] = await em.execute<{ hits: number; previous: number }[]>(
    `with counted as (
       insert into rate_limit_hits ("key", "window_start", "hits") values (?, ?, ?)
       on conflict ("key", "window_start") do update set "hits" = rate_limit_hits."hits" + excluded."hits"
       returning "hits")
     select (select "hits" from counted) as hits,
            coalesce((select "hits" from rate_limit_hits where "key" = ? and "window_start" = ?), 0) as previous`,
    [stored, new Date(windowStart), requests, stored, new Date(windowStart - windowMs)],
  );
  return decide(limit, Number(row!.previous), Number(row!.hits), (nowMs - windowStart) / windowMs);
}

/**
 * The sliding window: the hits of the last minute are estimated as this window's hits plus
 * the previous window's, weighted by how much of the previous window the last minute still
 * covers. Unlike fixed windows, twice the limit never fits across a window boundary.
 *
 * `elapsed` is the fraction of the current window gone by (0 to 1); `hits` counts this request.
 */
export function decide(limit: number, previous: number, hits: number, elapsed: number): RateLimitDecision {
  const weighted = previous * (1 - elapsed) + hits;
  const allowed = weighted <= limit;
  const untilWindowEnd = (1 - elapsed) * WINDOW_SECONDS;
  let reset = untilWindowEnd;
  if (weighted + 1 > limit) {
    // Seconds until one more request fits: first while the previous window's weight decays,
    // else once this window has become the previous one and decays in its turn.
    const within = previous > 0 && hits + 1 <= limit ? (1 - elapsed - (limit - hits - 1) / previous) * WINDOW_SECONDS : Infinity;
    reset = within <= untilWindowEnd ? within : untilWindowEnd + Math.max(0, 1 - (limit - 1) / hits) * WINDOW_SECONDS;
  }
  return {
    limit,
    remaining: Math.max(0, Math.floor(limit - weighted)),
    reset: Math.max(1, Math.ceil(reset - 1e-9)),
    allowed,
  };
}

/** Of several limits that all apply, the one the client is closest to (or past). */
export function tightest(decisions: RateLimitDecision[]): RateLimitDecision {
  const refused = decisions.filter((d) => !d.allowed);
  if (refused.length > 0) return refused.reduce((a, b) => (b.reset > a.reset ? b : a));
  return decisions.reduce((a, b) => (b.remaining < a.remaining ? b : a));
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

/**
 * Counts a request (or `requests` of them: a batch's further operations) against every key
 * that applies, at `limit` a minute, and sets the RateLimit headers of the tightest; throws 429
 * `rate_limited` (with Retry-After) when one is spent.
 */
export async function enforceRateLimit(
  em: SqlEntityManager,
  keys: readonly string[],
  limit: number,
  now: Date,
  kind: RateLimitKind,
  setHeader: (name: string, value: string) => void,
  requests = 1,
): Promise<void> {
  const decisions = [];
  for (const key of keys) decisions.push(await hit(em, key, limit, now, requests));
  const decision = tightest(decisions);
  for (const [name, value] of Object.entries(rateLimitHeaders(decision))) setHeader(name, value);
  if (!decision.allowed) {
    noteRateLimitRefusal(kind);
    throw rateLimited(decision);
  }
}

export function rateLimited(decision: RateLimitDecision): DomainError {
  const seconds = Math.max(1, decision.reset);
  return DomainError.of('rate_limited', { detail: `Too many requests; retry in ${seconds} seconds.` }).withRetryAfter(seconds);
}
