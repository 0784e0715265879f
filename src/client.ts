/**
 * A typed tRPC client for TypeScript users of the service:
 *
 *   const api = createClient({ url: 'http://localhost:3000', token });
 *   const { data } = await api.projects.create.mutate({ project: { name: 'Coffee' } });
 */
import { createTRPCClient, httpLink, type TRPCClient } from '@trpc/client';
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
  return createTRPCClient<AppRouter>({
    links: [
      httpLink({
        url: `${options.url.replace(/\/$/, '')}/trpc`,
        transformer: superjson,
        headers: () => (options.token ? { Authorization: options.token } : {}),
        ...(options.fetch ? { fetch: options.fetch } : {}),
      }),
    ],
  });
}
