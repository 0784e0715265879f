/**
 * Set-based task statements: order assignment and shifting, the effect of a project's
 * state change or deletion on its tasks, and the task ids listed on projects. Each is one
 * SQL statement whatever the number of tasks; callers hold the owner's lock.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { ProjectTransition } from '../projects/project.lifecycle.js';

export async function nextTaskOrder(em: SqlEntityManager, userId: number): Promise<number> {
  const [row] = await em.execute<{ next: number }[]>(
    'select coalesce(max("order"), 0) + 1 as next from tasks where user_id = ?',
    [userId],
  );
  return Number(row!.next);
}

export async function highestTaskOrder(em: SqlEntityManager, userId: number): Promise<number> {
  return (await nextTaskOrder(em, userId)) - 1;
}

export interface OrderChange {
  id: number;
  order: number;
}

/**
 * Moves one task from `from` to `to` (API-CONTRACT.md §5): moving up pushes the tasks in
 * [to, from) one place down, moving down pulls those in (from, to] one place up. One UPDATE;
 * the (user_id, order) uniqueness is checked at its end. Returns every changed row by order.
 */
export async function moveTaskOrder(
  em: SqlEntityManager,
  userId: number,
  taskId: number,
  from: number,
  to: number,
): Promise<OrderChange[]> {
  const shift = to < from ? 1 : -1;
  const rows = await em.execute<OrderChange[]>(
    `update tasks set "order" = case when id = ? then ?::int else "order" + ?::int end
      where user_id = ? and "order" between ? and ?
      returning id, "order"`,
    [taskId, to, shift, userId, Math.min(from, to), Math.max(from, to)],
  );
  return rows.map((r) => ({ id: r.id, order: r.order })).sort((a, b) => a.order - b.order);
}

/** Start/restart starts the project's newed tasks; pause returns its started ones to newed. */
export async function applyProjectTransitionToTasks(
  em: SqlEntityManager,
  projectId: number,
  transition: ProjectTransition,
  now: Date,
): Promise<void> {
  const effect = transition.tasks;
  if (!effect) return;
  if (effect.to === 'started') {
    await em.execute(
      `update tasks set state = 'started', started_at = coalesce(started_at, ?) where project_id = ? and state = 'newed'`,
      [now, projectId],
    );
  } else {
    await em.execute(
      `update tasks set state = 'newed', started_at = null where project_id = ? and state = 'started'`,
      [projectId],
    );
  }
}

/** Deleting a project abandons its unfinished tasks and detaches all of them. */
export async function releaseProjectTasks(em: SqlEntityManager, projectId: number, now: Date): Promise<void> {
  await em.execute(
    `update tasks set
        abandoned_at = case when state in ('newed', 'started', 'planned') then ? else abandoned_at end,
        state = case when state in ('newed', 'started', 'planned') then 'abandoned' else state end,
        project_id = null
      where project_id = ?`,
    [now, projectId],
  );
}

/** Ids of each project's non-abandoned tasks, by order: one query for a whole page. */
export async function taskIdsOfProjects(em: SqlEntityManager, projectIds: readonly number[]): Promise<Map<number, number[]>> {
  const byProject = new Map<number, number[]>(projectIds.map((id) => [id, []]));
  if (projectIds.length === 0) return byProject;
  const rows = await em.execute<{ project_id: number; id: number }[]>(
    `select project_id, id from tasks
      where project_id = any(?::int[]) and state <> 'abandoned'
      order by project_id, "order", id`,
    // A PostgreSQL array literal: MikroORM would expand a JS array into a list of parameters.
    [`{${projectIds.map((id) => Math.trunc(id)).join(',')}}`],
  );
  for (const row of rows) byProject.get(row.project_id)?.push(row.id);
  return byProject;
}
