/**
 * GET /api/users/me/tasks (SPEC.md 4.6, API-CONTRACT.md §12): a page of the user's listed
 * tasks, narrowed by the query's filters, in the query's sort (by order by default).
 *
 * Every "day" here is the user's (src/core/user-day.ts): the 14-day window of finished tasks
 * starts at the first instant of the user's day 14 days ago, and `planned_on` is that day in
 * the user's zone.
 *
 * The page's ETag is known before the page is read: the user's newest change-log number
 * (read with the token, no statement of its own) names every write of the user; the window's
 * start and the day `planned_on` names move it when the user's day turns (or the user's
 * zone changes); the query and the host of the links are in it too. A matching If-None-Match
 * answers 304 without reading the page. The number was read before the page, so a write that
 * lands in between makes the tag older than the page, never newer: at worst one more full
 * answer, never a stale 304.
 */
import type { z } from 'zod';
import type { AuthedContext } from '../core/context.js';
import { fromSeconds } from '../core/clock.js';
import { MAX_TIMESTAMP } from '../core/fields.js';
import { listEtag, notModified } from '../core/conditional.js';
import { STABILITY_META, pageLinks, pageOf } from '../core/envelope.js';
import { linkQuery, sortOf } from '../core/list-query.js';
import { addDays, daysAgo, parseLocalDate, startOfDate, userDay, type UserDay } from '../core/user-day.js';
import { TASK_PAGE_SIZE, type ListTasksInput, type TaskListDocument } from './task.schema.js';
import { listTasks as readTaskPage, type TaskSelection } from './task.store.js';
import { presentTaskFields } from './task.view.js';

export const TASKS_PATH = '/api/users/me/tasks';
/** Finished tasks stay listed for this many of the user's days. */
export const FINISHED_LISTED_DAYS = 14;
/** The query's parameters, in the order links repeat them. */
const PARAMETERS = ['page_size', 'state', 'project_id', 'q', 'planned_after', 'planned_before', 'planned_on', 'sort'] as const;

type Query = z.infer<typeof ListTasksInput>;

const EPOCH = new Date(0);
/** The first instant after every timestamp the service holds (timestamps are at most MAX_TIMESTAMP). */
const AFTER_ALL = fromSeconds(MAX_TIMESTAMP + 1);

/**
 * The instants `planned_on` names: its day's first instant and the next day's. A day before
 * 1970 names nothing a task can hold (an empty range); a bound past the last timestamp is none.
 */
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
  const query = await linkQuery(ctx, input, PARAMETERS);
  const links = (total: number) => pageLinks(ctx.baseUrl, TASKS_PATH, page, size, total, query);
  const etag = listEtag([
    'tasks', ctx.user.id, ctx.lastEventSeq, page, ctx.baseUrl, query(0),
    selection.finishedSince.toISOString(), selection.plannedFrom?.toISOString() ?? '', selection.plannedUntil?.toISOString() ?? '',
  ]);
  if (notModified(ctx, etag)) return { data: [], links: links(0), meta: STABILITY_META };
  const { tasks, total } = await readTaskPage(ctx.em, ctx.user.id, selection, size, offset, sortOf(input.sort, 'order'));
  return { data: tasks.map(presentTaskFields), links: links(total), meta: STABILITY_META };
}
