/** GET /api/tasks/{id}: one of the user's tasks; one row read either way, a matching If-None-Match saves the body. */
import type { z } from 'zod';
import type { AuthedContext } from '../core/context.js';
import { notModified, taskEtag } from '../core/conditional.js';
import { STABILITY_META } from '../core/envelope.js';
import { DomainError } from '../core/errors.js';
import type { TaskDocument, TaskIdInput } from './task.schema.js';
import { ownedTask } from './task.store.js';
import { presentTaskFields } from './task.view.js';

export async function getTask(ctx: AuthedContext, input: z.infer<typeof TaskIdInput>): Promise<z.infer<typeof TaskDocument>> {
  const task = await ownedTask(ctx.em, ctx.user.id, input.id);
  if (!task) throw DomainError.notFound('task');
  notModified(ctx, taskEtag(task.id, task.version));
  return { data: presentTaskFields(task), meta: STABILITY_META };
}
