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

/** Counts one request under `key` now, whether or not it fits (a refused request counts too). */
export async function hit(em: SqlEntityManager, key: string, limit: number, now: Date): Promise<RateLimitDecision> {
  const { windowStart, elapsed } = windowOf(now);
  const stored = storedKey(key);
  const [row] = await em.execute<{ hits: number; previous: number }[]>(
    `with counted as (
       insert into rate_limit_hits ("key", "window_start", "hits") values (?, ?, ?)
       on conflict ("key", "window_start") do update set "hits" = rate_limit_hits."hits" + excluded."hits"
       returning "hits")
     select (select "hits" from counted) as hits,
            coalesce((select "hits" from rate_limit_hits where "key" = ? and "window_start" = ?), 0) as previous`,
    [stored, windowStart, 1, stored, previousWindow(windowStart)],
  );
  return decide(limit, Number(row!.previous), Number(row!.hits), elapsed);
}

/**
 * Counts `requests` under `key` now only if all of them fit; if they do not, counts nothing
 * (API-CONTRACT.md §15: a batch refused with 429 counts as the one request its call already
 * counted, not as its operations), and `reset` says when `retry` requests (what sending them
 * again counts) will fit. The check and the count are one statement on the counter's row, so
 * that processes counting at once never admit more than the limit between them: the row's
 * lock makes the later one see the earlier one's count.
 */
export async function hitIfFits(em: SqlEntityManager, key: string, limit: number, now: Date, requests: number, retry = requests): Promise<RateLimitDecision> {
  const { windowStart, elapsed } = windowOf(now);
  const stored = storedKey(key);
  const start = previousWindow(windowStart);
  // The previous window's weight in the sliding estimate, as `decide` computes it.
  const weight = 1 - elapsed;
  const [row] = await em.execute<{ counted: number | null; current: number; previous: number }[]>(
    `with previous as (
       select coalesce((select "hits" from rate_limit_hits where "key" = ? and "window_start" = ?), 0) as hits),
     counted as (
       insert into rate_limit_hits ("key", "window_start", "hits")
       select ?, ?, ? from previous where previous.hits * ?::float8 + ? <= ?
       on conflict ("key", "window_start") do update set "hits" = rate_limit_hits."hits" + excluded."hits"
         where (select hits from previous) * ?::float8 + rate_limit_hits."hits" + excluded."hits" <= ?
       returning "hits")
     select (select "hits" from counted) as counted,
            coalesce((select "hits" from rate_limit_hits where "key" = ? and "window_start" = ?), 0) as current,
            (select hits from previous) as previous`,
    [stored, start, stored, windowStart, requests, weight, requests, limit, weight, limit, stored, windowStart],
  );
  const previous = Number(row!.previous);
  if (row!.counted !== null) return { ...decide(limit, previous, Number(row!.counted), elapsed), allowed: true };
  return { ...decide(limit, previous, Number(row!.current), elapsed, retry), allowed: false };
}

function windowOf(now: Date): { windowStart: Date; elapsed: number } {
  const nowMs = now.getTime();
  const windowMs = WINDOW_SECONDS * 1000;
  const startMs = nowMs - (nowMs % windowMs);
  return { windowStart: new Date(startMs), elapsed: (nowMs - startMs) / windowMs };
}

const previousWindow = (windowStart: Date) => new Date(windowStart.getTime() - WINDOW_SECONDS * 1000);

/**
 * The sliding window: the hits of the last minute are estimated as this window's hits plus
 * the previous window's, weighted by how much of the previous window the last minute still
 * covers. Unlike fixed windows, twice the limit never fits across a window boundary.
 *
 * `elapsed` is the fraction of the current window gone by (0 to 1); `hits` counts this request.
 * `reset` says when `next` more requests fit (1, or a batch's operations that did not).
 */
export function decide(limit: number, previous: number, hits: number, elapsed: number, next = 1): RateLimitDecision {
  const weighted = previous * (1 - elapsed) + hits;
  const allowed = weighted <= limit;
  const untilWindowEnd = (1 - elapsed) * WINDOW_SECONDS;
  let reset = untilWindowEnd;
  if (weighted + next > limit) {
    // Seconds until `next` more fit: first while the previous window's weight decays, else
    // once this window has become the previous one and decays in its turn. More than the
    // limit never fits: then, when nothing counted is left.
    const within = previous > 0 && hits + next <= limit ? (1 - elapsed - (limit - hits - next) / previous) * WINDOW_SECONDS : Infinity;
    const afterWindow = next > limit ? 1 : hits > 0 ? Math.max(0, 1 - (limit - next) / hits) : 0;
    reset = within <= untilWindowEnd ? within : untilWindowEnd + afterWindow * WINDOW_SECONDS;
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
 * Counts a request against every key that applies, at `limit` a minute, and sets the
 * RateLimit headers of the tightest; throws 429 `rate_limited` (with Retry-After) when one is
 * spent.
 */
export async function enforceRateLimit(
  em: SqlEntityManager,
  keys: readonly string[],
  limit: number,
  now: Date,
  kind: RateLimitKind,
  setHeader: (name: string, value: string) => void,
): Promise<void> {
  const decisions = [];
  for (const key of keys) decisions.push(await hit(em, key, limit, now));
  answer(tightest(decisions), kind, setHeader);
}

/**
 * Counts `requests` more under `key` if all of them fit, and sets its RateLimit headers;
 * otherwise counts none and throws 429 `rate_limited` (with `detail`, if given), its
 * Retry-After when `retry` requests (what sending them again counts) will fit.
 */
export async function admitRequests(
  em: SqlEntityManager,
  key: string,
  limit: number,
  now: Date,
  kind: RateLimitKind,
  setHeader: (name: string, value: string) => void,
  counts: { requests: number; retry: number; detail?: string },
): Promise<void> {
  answer(await hitIfFits(em, key, limit, now, counts.requests, counts.retry), kind, setHeader, counts.detail);
}

function answer(decision: RateLimitDecision, kind: RateLimitKind, setHeader: (name: string, value: string) => void, detail?: string): void {
  for (const [name, value] of Object.entries(rateLimitHeaders(decision))) setHeader(name, value);
  if (!decision.allowed) {
    noteRateLimitRefusal(kind);
    throw rateLimited(decision, detail);
  }
}

export function rateLimited(decision: RateLimitDecision, detail?: string): DomainError {
  const seconds = Math.max(1, decision.reset);
  return DomainError.of('rate_limited', { detail: detail ?? `Too many requests; retry in ${seconds} seconds.` }).withRetryAfter(seconds);
}
