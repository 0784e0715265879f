/**
 * GET /api/users/me/projects (SPEC.md 4.2, API-CONTRACT.md §12): a page of the user's
 * projects, narrowed by the query's filters, in the query's sort (by id by default). The ETag
 * is known before the page is read (as the task list's, src/tasks/list-tasks.ts): a matching
 * If-None-Match is 304 after the token's statement alone.
 */
import type { z } from 'zod';
import type { AuthedContext } from '../core/context.js';
import { fromSeconds } from '../core/clock.js';
import { listEtag, notModified } from '../core/conditional.js';
import { STABILITY_META, pageLinks, pageOf } from '../core/envelope.js';
import { linkQuery, sortOf } from '../core/list-query.js';
import { PROJECT_PAGE_SIZE, type ListProjectsInput, type ProjectListDocument } from './project.schema.js';
import { listProjects as readProjectPage, type ProjectSelection } from './project.store.js';
import { presentProjectFields } from './project.view.js';

export const PROJECTS_PATH = '/api/users/me/projects';
/** The query's parameters, in the order links repeat them. */
const PARAMETERS = ['page_size', 'state', 'q', 'due_after', 'due_before', 'sort'] as const;

type Query = z.infer<typeof ListProjectsInput>;

export function projectSelection(query: Query): ProjectSelection {
  const selection: ProjectSelection = {};
  if (query.state) selection.states = query.state;
  if (query.q !== undefined) selection.q = query.q;
  if (query.due_after !== undefined) selection.dueFrom = fromSeconds(query.due_after);
  if (query.due_before !== undefined) selection.dueUntil = fromSeconds(query.due_before);
  return selection;
}

export async function listProjects(ctx: AuthedContext, input: Query): Promise<z.infer<typeof ProjectListDocument>> {
  const { page, size, offset } = pageOf(input.page, input.page_size ?? PROJECT_PAGE_SIZE);
  const query = await linkQuery(ctx, input, PARAMETERS);
  const links = (total: number) => pageLinks(ctx.baseUrl, PROJECTS_PATH, page, size, total, query);
  const etag = listEtag(['projects', ctx.user.id, ctx.lastEventSeq, page, ctx.baseUrl, query(0)]);
  if (notModified(ctx, etag)) return { data: [], links: links(0), meta: STABILITY_META };
  const { projects, total } = await readProjectPage(ctx.em, ctx.user.id, size, offset, projectSelection(input), sortOf(input.sort, 'id'));
  return { data: projects.map(presentProjectFields), links: links(total), meta: STABILITY_META };
}
