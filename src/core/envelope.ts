/**
 * JSON:API-like envelope pieces shared by projects and tasks: the stability notice, page
 * links, and their zod output schemas (which also document them in openapi.json).
 */
import { z } from 'zod';

export const STABILITY_META = { stability: 'unstable', notice: 'This output may change soon.' } as const;

export const StabilityMeta = z
  .object({ stability: z.literal('unstable'), notice: z.literal('This output may change soon.') })
  .meta({ id: 'StabilityMeta', description: 'Every project and task response is announced as liable to change soon.' });

export const PageLinks = z
  .object({
    first: z.string(),
    last: z.string(),
    prev: z.string().optional(),
    next: z.string().optional(),
  })
  .meta({ id: 'PageLinks', description: 'Absolute URLs of this endpoint with a page parameter; prev and next only when they exist.' });
export type PageLinks = z.infer<typeof PageLinks>;

export interface Page {
  page: number;
  size: number;
  offset: number;
}

export function pageOf(page: number, size: number): Page {
  return { page, size, offset: (page - 1) * size };
}

/**
 * Links of API-CONTRACT.md §7 and §12: last is at least 1; a page beyond it still gets them.
 * `query` writes the query of the link to page `n`: the request's parameters kept, only `page`
 * changed (src/core/list-query.ts `linkQuery`).
 */
export function pageLinks(baseUrl: string, path: string, page: number, size: number, total: number, query = (n: number) => `page=${n}`): PageLinks {
  const last = Math.max(1, Math.ceil(total / size));
  const at = (n: number) => `${baseUrl}${path}?${query(n)}`;
  const links: PageLinks = { first: at(1), last: at(last) };
  if (page > 1) links.prev = at(page - 1);
  if (page < last) links.next = at(page + 1);
  return links;
}

export const ref = <T extends string>(type: T) => z.object({ type: z.literal(type), id: z.int() });
