/**
 * GET /api/users/me/projects (SPEC.md 4.2): a page of the user's projects by id. The ETag is
 * known before the page is read (as the task list's, src/tasks/list-tasks.ts): a matching
 * If-None-Match is 304 after the token's statement alone.
 */
import type { z } from 'zod';
import type { AuthedContext } from '../core/context.js';
import { listEtag, notModified } from '../core/conditional.js';
import { STABILITY_META, pageLinks, pageOf } from '../core/envelope.js';
import { PROJECT_PAGE_SIZE, type ListProjectsInput, type ProjectListDocument } from './project.schema.js';
import { listProjects as readProjectPage } from './project.store.js';
import { presentProjectFields } from './project.view.js';

export const PROJECTS_PATH = '/api/users/me/projects';

export async function listProjects(ctx: AuthedContext, input: z.infer<typeof ListProjectsInput>): Promise<z.infer<typeof ProjectListDocument>> {
  const { page, size, offset } = pageOf(input.page, PROJECT_PAGE_SIZE);
  const etag = listEtag(['projects', ctx.user.id, ctx.lastEventSeq, page, ctx.baseUrl]);
  if (notModified(ctx, etag)) return { data: [], links: pageLinks(ctx.baseUrl, PROJECTS_PATH, page, size, 0), meta: STABILITY_META };
  const { projects, total } = await readProjectPage(ctx.em, ctx.user.id, size, offset);
  return { data: projects.map(presentProjectFields), links: pageLinks(ctx.baseUrl, PROJECTS_PATH, page, size, total), meta: STABILITY_META };
}
