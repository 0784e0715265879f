/**
 * A project update's rules that read the user's projects (API-CONTRACT.md §2, §4 "Project edits"), for an
 * input the schema refused, so every validation error is reported: update-project.ts's rules in its order,
 * whose write then does not run. Not in a batch: its earlier operations, not run yet, may change what they read.
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
