/**
 * The one fact a task needs of the project its request names (`project_id`): that the user
 * has it, and whether it is started (the task's state follows: task.lifecycle.ts
 * `newTaskFields`, `projectSyncAction`). Read in SQL: tasks sit below projects and import
 * nothing of them.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { DomainError } from '../core/errors.js';
import { linkedProject } from './task.store.js';

export async function requireLinkedProject(em: SqlEntityManager, userId: number, id: number): Promise<{ id: number; started: boolean }> {
  const project = await linkedProject(em, userId, id);
  if (!project) throw linkedProjectMissing();
  return project;
}

/** The refusal of a `project_id` that is not one of the user's projects. */
export function linkedProjectMissing(): DomainError {
  return DomainError.validation('record_not_found', '/task/project_id', 'No project with this id exists for the current user.');
}
