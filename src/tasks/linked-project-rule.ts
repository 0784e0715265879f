/**
 * The rule of `task.project_id` (422 `record_not_found`) for an input the schema refused for another
 * member: every validation error is reported (API-CONTRACT.md §2), and the write function that holds the
 * rule (`readLinkedProjectSql`) does not run then. Not in a batch: an earlier operation may create or
 * delete the project, so the write function checks it when the operation runs (docs/batches.md).
 */
import type { AuthedContext } from '../core/context.js';
import { apiError, type ApiError } from '../core/errors.js';
import { MAX_ID } from '../core/fields.js';
import { execute } from '../db/prepared.js';

export async function linkedProjectInputRules(ctx: AuthedContext, rawInput: unknown): Promise<ApiError[]> {
  const task = (rawInput as { task?: unknown } | null | undefined)?.task;
  const id = task !== null && typeof task === 'object' && !Array.isArray(task) ? (task as { project_id?: unknown }).project_id : undefined;
  if (ctx.batchStep || typeof id !== 'number' || !Number.isInteger(id) || id < 1 || id > MAX_ID) return [];
  const found = await execute(ctx.em, 'select 1 from projects p where p.user_id = ? and p.id = ?', [ctx.user.id, id]);
  if (found.length > 0) return [];
  return [apiError('record_not_found', { status: 422, pointer: '/task/project_id', detail: 'No project with this id exists for the current user.' })];
}
