/**
 * GET /api/users/me/tasks (SPEC.md 4.6): a page of the user's listed tasks, by order.
 *
 * The page's ETag is known before the page is read: the user's newest change-log number
 * (read with the token, no statement of its own) names every write of the user, and the
 * cutoff day names the 14-day window's move at UTC midnight. A matching If-None-Match answers
 * 304 without reading the page. The number was read before the page, so a write that lands
 * in between makes the tag older than the page, never newer: at worst one more full answer,
 * never a stale 304.
 */
import type { z } from 'zod';
import type { AuthedContext } from '../core/context.js';
import { daysBefore, startOfUtcDay } from '../core/clock.js';
import { listEtag, notModified } from '../core/conditional.js';
import { STABILITY_META, pageLinks, pageOf } from '../core/envelope.js';
import { TASK_PAGE_SIZE, type ListTasksInput, type TaskListDocument } from './task.schema.js';
import { listTasks as readTaskPage } from './task.store.js';
import { presentTaskFields } from './task.view.js';

export const TASKS_PATH = '/api/users/me/tasks';
/** Finished tasks stay listed for this many UTC days. */
export const FINISHED_LISTED_DAYS = 14;

export async function listTasks(ctx: AuthedContext, input: z.infer<typeof ListTasksInput>): Promise<z.infer<typeof TaskListDocument>> {
  const { page, size, offset } = pageOf(input.page, TASK_PAGE_SIZE);
  const cutoff = daysBefore(startOfUtcDay(ctx.clock.now()), FINISHED_LISTED_DAYS);
  const etag = listEtag(['tasks', ctx.user.id, ctx.lastEventSeq, page, ctx.baseUrl, cutoff.toISOString()]);
  if (notModified(ctx, etag)) return { data: [], links: pageLinks(ctx.baseUrl, TASKS_PATH, page, size, 0), meta: STABILITY_META };
  const { tasks, total } = await readTaskPage(ctx.em, ctx.user.id, cutoff, size, offset);
  return { data: tasks.map(presentTaskFields), links: pageLinks(ctx.baseUrl, TASKS_PATH, page, size, total), meta: STABILITY_META };
}
