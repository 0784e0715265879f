/**
 * GET /api/projects/{id}. The tag needs the row and the task ids, which are the whole document
 * (one statement): a matching If-None-Match saves the body on the wire, not the read.
 */
import type { z } from 'zod';
import type { AuthedContext } from '../core/context.js';
import { notModified, projectEtag } from '../core/conditional.js';
import { STABILITY_META } from '../core/envelope.js';
import { DomainError } from '../core/errors.js';
import type { ProjectDocument, ProjectIdInput } from './project.schema.js';
import { projectsByIds } from './project.store.js';
import { presentProjectFields } from './project.view.js';

export async function getProject(ctx: AuthedContext, input: z.infer<typeof ProjectIdInput>): Promise<z.infer<typeof ProjectDocument>> {
  const [project] = await projectsByIds(ctx.em, ctx.user.id, [input.id]);
  if (!project) throw DomainError.notFound('project');
  notModified(ctx, projectEtag(project.id, project.version, project.taskIds));
  return { data: presentProjectFields(project), meta: STABILITY_META };
}
