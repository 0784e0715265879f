/**
 * The rules of a project's update that read the user's projects (API-CONTRACT.md §2, §4
 * "Project edits"), for an input the schema refused for another member: every validation
 * error of a request is reported, and the write function that holds these rules
 * (update-project.ts) does not run then. They are its rules in its order: the project (none:
 * nothing to add, the write would be 404), the name another project's (`taken`), a changed
 * `due_at` outside the started state or before the start (the entity's `changeDueAt`). A value
 * the schema refuses is reported by the schema alone. Not in a batch: its earlier operations
 * have not run yet, and may create, rename or change what these rules read.
 */
import type { AuthedContext } from '../core/context.js';
import { DomainError, apiError, type ApiError } from '../core/errors.js';
import { pathId } from '../core/fields.js';
import { execute } from '../db/prepared.js';
import { NAME_TAKEN_DETAIL } from './create-project.js';
import { Project } from './project.entity.js';
import { dueAtField, projectName } from './project.schema.js';

export async function updateProjectInputRules(ctx: AuthedContext, rawInput: unknown): Promise<ApiError[]> {
  const input = rawInput as { id?: unknown; project?: { name?: unknown; due_at?: unknown } } | null | undefined;
  const id = pathId.safeParse(input?.id);
  const project = input?.project;
  if (ctx.batchStep || !id.success || project === null || typeof project !== 'object' || Array.isArray(project)) return [];
  const found = await ctx.em.fork().findOne(Project, { userId: ctx.user.id, id: id.data });
  if (!found) return [];
  const errors: ApiError[] = [];
  const name = projectName.safeParse(project.name);
  if (name.success && (await execute(ctx.em, 'select 1 from projects p where p.user_id = ? and p.slug = lower(?) and p.id <> ?', [ctx.user.id, name.data, id.data])).length > 0) {
    errors.push(apiError('taken', { pointer: '/project/name', detail: NAME_TAKEN_DETAIL }));
  }
  const dueAt = dueAtField.safeParse(project.due_at);
  if (dueAt.success) {
    try {
      found.changeDueAt(dueAt.data);
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      errors.push(...error.errors);
    }
  }
  return errors;
}
