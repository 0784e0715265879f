/**
 * GET /api/users/me/projects (SPEC.md 4.2, API-CONTRACT.md §12): a page of the user's projects.
 * The ETag is known before the page is read: a matching If-None-Match is 304 after the token's statement alone.
 * The tag sent with a page is the page's own (src/tasks/list-tasks.ts).
 */
import type { z } from 'zod';
import type { AuthedContext } from '../core/context.js';
import { listEtag, notModified, sendEtag } from '../core/conditional.js';
import { STABILITY_META, pageLinks, pageOf } from '../core/envelope.js';
import { linkQuery } from '../core/list-query.js';
import { PROJECT_PAGE_SIZE, type ListProjectsInput, type ProjectListDocument } from './project.schema.js';
import { listProjects as readProjectPage } from './project.store.js';
import { presentProjectFields } from './project.view.js';

export const PROJECTS_PATH = '/api/users/me/projects';
/** The query's parameters, in the order links repeat them. */
const PARAMETERS = ['page_size', 'state', 'q', 'due_after', 'due_before', 'sort'] as const;

export async function listProjects(
  ctx: AuthedContext, input: z.infer<typeof ListProjectsInput>,
): Promise<z.infer<typeof ProjectListDocument>> {
  const { page, size, offset } = pageOf(input.page, input.page_size ?? PROJECT_PAGE_SIZE);
  const query = await linkQuery(ctx, input, PARAMETERS);
  const links = (total: number) => pageLinks(ctx.baseUrl, PROJECTS_PATH, page, size, total, query);
  const etag = (seq: string) => listEtag(['projects', ctx.user.id, seq, page, ctx.baseUrl, query(0)]);
  if (notModified(ctx, etag(ctx.lastEventSeq))) return { data: [], links: links(0), meta: STABILITY_META };
  const { projects, total, seq } = await readProjectPage(ctx.em, ctx.user.id, size, offset, input);
  if (seq !== ctx.lastEventSeq) sendEtag(ctx, etag(seq));
  return { data: projects.map(presentProjectFields), links: links(total), meta: STABILITY_META };
}
