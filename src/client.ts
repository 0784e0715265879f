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
 */
import { createTRPCClient, httpLink, httpSubscriptionLink, splitLink, type TRPCClient } from '@trpc/client';
import { EventSource } from 'eventsource';
import superjson from 'superjson';
import type { AppRouter } from './router.js';

export type { AppRouter };

export interface ClientOptions {
  /** Base URL of the service, without /trpc. */
  url: string;
  /** Access token from `users.register` or `users.authorize`. */
  token?: string;
  fetch?: typeof fetch;
}

export function createClient(options: ClientOptions): TRPCClient<AppRouter> {
  const url = `${options.url.replace(/\/$/, '')}/trpc`;
  const authorization = (): Record<string, string> => (options.token ? { Authorization: options.token } : {});
  const baseFetch = options.fetch ?? fetch;
  return createTRPCClient<AppRouter>({
    links: [
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
          headers: authorization,
          ...(options.fetch ? { fetch: options.fetch } : {}),
        }),
      }),
    ],
  });
}
