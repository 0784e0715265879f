/**
 * A typed tRPC client for TypeScript users of the service:
 *
 *   const api = createClient({ url: 'http://localhost:3000', token });
 *   const { data } = await api.projects.create.mutate({ project: { name: 'Coffee' } });
 *   api.events.onChange.subscribe({}, { onData: ({ data }) => console.log(data.type) });
 *
 * Queries and mutations go over HTTP; subscriptions over Server-Sent Events
 * (httpSubscriptionLink), through the `eventsource` package so that the access token travels
 * in the Authorization header, never in the URL. tRPC resumes a dropped subscription by
 * itself from the last event id it received.
 *
 * Conditional and keyed calls (API-CONTRACT.md §11) pass per-call options, and read the
 * ETag back with `withEtag`:
 *
 *   const { data, etag } = await withEtag((o) => api.projects.get.query({ id }, o));
 *   await api.projects.update.mutate(input, callOptions({ ifMatch: etag, idempotencyKey }));
 *
 * This client sends every call in its own HTTP request (no batching), so each call's ETag
 * is its own response's header.
 */
import { TRPCClientError, createTRPCClient, httpLink, httpSubscriptionLink, splitLink, type TRPCClient, type TRPCLink } from '@trpc/client';
import { observable } from '@trpc/server/observable';
import { EventSource } from 'eventsource';
import superjson from 'superjson';
import type { AppRouter } from './app/router.js';

export type { AppRouter };

export interface ClientOptions {
  /** Base URL of the service, without /trpc. */
  url: string;
  /** Access token from `users.register` or `users.authorize`. */
  token?: string;
  fetch?: typeof fetch;
}

/** Per-call conditions and key. */
export interface CallConditions {
  /** The ETag the change is based on: 412 precondition_failed if the resource changed since. */
  ifMatch?: string;
  /** A read answers 304 (`withEtag` gives `notModified: true`) while its ETag is this one. */
  ifNoneMatch?: string;
  /** Makes a write safe to retry: a retry with the same key and input replays the first outcome. */
  idempotencyKey?: string;
}

/** What one call saw in its HTTP response. */
export interface CallResponse {
  status?: number;
  etag?: string | null;
  replayed?: boolean;
}

export interface CallContext extends Record<string, unknown> {
  headers?: Record<string, string>;
  /** Filled in when the call's response arrives. */
  response?: CallResponse;
}

/** The second argument of `query`/`mutate` that sends these conditions with the call. */
export function callOptions(conditions: CallConditions = {}, response?: CallResponse): { context: CallContext } {
  const headers: Record<string, string> = {};
  if (conditions.ifMatch !== undefined) headers['If-Match'] = conditions.ifMatch;
  if (conditions.ifNoneMatch !== undefined) headers['If-None-Match'] = conditions.ifNoneMatch;
  if (conditions.idempotencyKey !== undefined) headers['Idempotency-Key'] = conditions.idempotencyKey;
  return { context: { headers, ...(response ? { response } : {}) } };
}

/**
 * Runs one call with these conditions and returns its data with its ETag (null when the
 * response has none). A read whose If-None-Match still matches gives `notModified: true`
 * and no data.
 */
export async function withEtag<T>(
  call: (options: { context: CallContext }) => Promise<T>,
  conditions: CallConditions = {},
): Promise<{ data: T | undefined; etag: string | null; notModified: boolean; replayed: boolean }> {
  const response: CallResponse = {};
  const data = await call(callOptions(conditions, response));
  if (response.status === 304) return { data: undefined, etag: response.etag ?? conditions.ifNoneMatch ?? null, notModified: true, replayed: false };
  return { data, etag: response.etag ?? null, notModified: false, replayed: response.replayed ?? false };
}

/** Copies the call's response status and headers into its context's `response`. */
const responseLink: TRPCLink<AppRouter> = () => ({ op, next }) =>
  observable((observer) => {
    const target = (op.context as CallContext).response;
    const record = (meta: unknown) => {
      const response = (meta as { response?: Response } | undefined)?.response;
      if (!target || !response) return;
      target.status = response.headers.has(NOT_MODIFIED_MARK) ? 304 : response.status;
      target.etag = response.headers.get('etag');
      target.replayed = response.headers.get('idempotent-replayed') === 'true';
    };
    return next(op).subscribe({
      next(value) {
        record(value.context);
        observer.next(value);
      },
      error(error) {
        if (error instanceof TRPCClientError) record(error.meta);
        observer.error(error);
      },
      complete() {
        observer.complete();
      },
    });
  });

/** Set on the stand-in answer for a 304, which carries no body for tRPC to read. */
const NOT_MODIFIED_MARK = 'x-client-not-modified';

/**
 * A 304 has no body, which tRPC's link cannot parse: the call gets a stand-in 200 whose
 * result is null, marked so that `withEtag` reports `notModified` (with the 304's ETag).
 */
function acceptingNotModified(base: typeof fetch): typeof fetch {
  return async (input, init) => {
    const response = await base(input, init);
    if (response.status !== 304) return response;
    const headers = new Headers(response.headers);
    headers.set(NOT_MODIFIED_MARK, '1');
    headers.set('content-type', 'application/json');
    return new Response(JSON.stringify({ result: { data: superjson.serialize(null) } }), { status: 200, headers });
  };
}

export function createClient(options: ClientOptions): TRPCClient<AppRouter> {
  const url = `${options.url.replace(/\/$/, '')}/trpc`;
  const authorization = (): Record<string, string> => (options.token ? { Authorization: options.token } : {});
  const baseFetch = options.fetch ?? fetch;
  return createTRPCClient<AppRouter>({
    links: [
      responseLink,
      splitLink({
        condition: (op) => op.type === 'subscription',
        true: httpSubscriptionLink({
          url,
          transformer: superjson,
          EventSource,
          eventSourceOptions: () => ({
            fetch: (input, init) => baseFetch(input, { ...init, headers: { ...init?.headers, ...authorization() } }),
          }),
        }),
        false: httpLink({
          url,
          transformer: superjson,
          headers: ({ op }) => ({ ...authorization(), ...(op.context as CallContext).headers }),
          fetch: acceptingNotModified(baseFetch),
        }),
      }),
    ],
  });
}
