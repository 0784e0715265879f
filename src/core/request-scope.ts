/**
 * What the metrics know about the request being served, reachable from code that has no
 * request at hand (the ORM's statement log, the rate limiter, the event hub) through an
 * AsyncLocalStorage. Without metrics there is no scope and every hook here is a no-op that
 * costs one `getStore()`.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

/** Which limit refused a request: registration/login, unknown tokens, a token's requests, a token's open streams. */
export type RateLimitKind = 'auth' | 'unknown_token' | 'token' | 'streams';

export interface RequestScope {
  /** SQL statements the ORM sent for this request so far. */
  statements: number;
  onRateLimitRefusal(kind: RateLimitKind): void;
}

export const requestScope = new AsyncLocalStorage<RequestScope>();

/** Called by the ORM's logger for every statement it sends (src/db/orm-config.ts). */
export function countStatement(): void {
  const scope = requestScope.getStore();
  if (scope) scope.statements += 1;
}

/** Called where a rate limit answers 429. */
export function noteRateLimitRefusal(kind: RateLimitKind): void {
  requestScope.getStore()?.onRateLimitRefusal(kind);
}
