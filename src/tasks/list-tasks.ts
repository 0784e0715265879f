/**
 * GET /api/users/me/tasks (SPEC.md 4.6, API-CONTRACT.md §12): a page of the user's listed tasks, as
 * the query filters and sorts them; every "day" is the user's (src/core/user-day.ts). The ETag
 * (src/core/conditional.ts) is known before the page is read: a matching If-None-Match answers 304 unread.
 * Its change-log number is read with the token; the page's statement reads it again, and the tag
 * sent is the page's: a write in between never makes a stale 304, nor a tag of another page.
 */
import type { z } from 'zod';
import type { AuthedContext } from '../core/context.js';
import { fromSeconds } from '../core/clock.js';
import { MAX_TIMESTAMP } from '../core/fields.js';
import { listEtag, notModified, sendEtag } from '../core/conditional.js';
import { STABILITY_META, pageLinks, pageOf } from '../core/envelope.js';
import { linkQuery, sortOf } from '../core/list-query.js';
import { addDays, daysAgo, parseLocalDate, startOfDate, userDay, type UserDay } from '../core/user-day.js';
import { TASK_PAGE_SIZE, type ListTasksInput, type TaskListDocument } from './task.schema.js';
import { listTasks as readTaskPage, type TaskSelection } from './task.store.js';
import { presentTaskFields } from './task.view.js';

export const TASKS_PATH = '/api/users/me/tasks';
/** Finished tasks stay listed for this many of the user's days. */
export const FINISHED_LISTED_DAYS = 14;
/** The query's parameters but `page`, in the order links repeat them. */
export const TASK_LIST_PARAMETERS = [
  'page_size', 'state', 'project_id', 'q', 'planned_after', 'planned_before', 'planned_on', 'sort',
] as const;

type Query = z.infer<typeof ListTasksInput>;

const EPOCH = new Date(0);
/** The first instant after every timestamp the service holds (timestamps are at most MAX_TIMESTAMP). */
const AFTER_ALL = fromSeconds(MAX_TIMESTAMP + 1);

/** The instants `planned_on` names: [its first instant, the next day's). Before 1970: none; past the last timestamp: no bound. */
function plannedOn(value: string, today: UserDay): { from: Date; until?: Date } {
  const date = value === 'today' ? today.date : value === 'tomorrow' ? addDays(today.date, 1) : parseLocalDate(value)!;
  if (date.year < 1969) return { from: EPOCH, until: EPOCH };
  const until = startOfDate(addDays(date, 1), today.zone);
  return { from: startOfDate(date, today.zone), until: until < AFTER_ALL ? until : undefined };
}

/** What the query keeps: the window, its filters, and the bounds on plannedAt they give together. */
export function taskSelection(query: Query, today: UserDay): TaskSelection {
  const selection: TaskSelection = { finishedSince: daysAgo(today, FINISHED_LISTED_DAYS) };
  if (query.state) selection.states = query.state;
  if (query.project_id) {
    selection.projectIds = query.project_id.filter((id): id is number => id !== null);
    selection.loose = query.project_id.includes(null);
  }
  if (query.q !== undefined) selection.q = query.q;
  const from: Date[] = [];
  const until: Date[] = [];
  if (query.planned_after !== undefined) from.push(fromSeconds(query.planned_after));
  if (query.planned_before !== undefined) until.push(fromSeconds(query.planned_before));
  if (query.planned_on !== undefined) {
    const day = plannedOn(query.planned_on, today);
    from.push(day.from);
    if (day.until) until.push(day.until);
  }
  if (from.length) selection.plannedFrom = new Date(Math.max(...from.map(Number)));
  if (until.length) selection.plannedUntil = new Date(Math.min(...until.map(Number)));
  return selection;
}

export async function listTasks(ctx: AuthedContext, input: Query): Promise<z.infer<typeof TaskListDocument>> {
  const { page, size, offset } = pageOf(input.page, input.page_size ?? TASK_PAGE_SIZE);
  const today = userDay(ctx.clock.now(), ctx.user.timeZone);
  const selection = taskSelection(input, today);
  const query = await linkQuery(ctx, input, TASK_LIST_PARAMETERS);
  const links = (total: number) => pageLinks(ctx.baseUrl, TASKS_PATH, page, size, total, query);
  const etag = (seq: string) => listEtag([
    'tasks', ctx.user.id, seq, page, ctx.baseUrl, query(0),
    selection.finishedSince.toISOString(), selection.plannedFrom?.toISOString() ?? '', selection.plannedUntil?.toISOString() ?? '',
  ]);
  if (notModified(ctx, etag(ctx.lastEventSeq))) return { data: [], links: links(0), meta: STABILITY_META };
  const { tasks, total, seq } = await readTaskPage(ctx.em, ctx.user.id, selection, size, offset, sortOf(input.sort, 'order'));
  if (seq !== ctx.lastEventSeq) sendEtag(ctx, etag(seq));
  return { data: tasks.map(presentTaskFields), links: links(total), meta: STABILITY_META };
}
