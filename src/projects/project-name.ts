/**
 * A project's name is unique per user regardless of case (SPEC.md 4.1): its slug is. Checked
 * before the write, under the owner's lock, to answer `taken` on its pointer beside other
 * problems; the unique index on (user_id, slug) is the last word if two processes race.
 */
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { DomainError } from '../core/errors.js';
import { Project, slugOf } from './project.entity.js';

export function takenName(): DomainError {
  return DomainError.validation('taken', '/project/name', 'Project name already exists for this user.');
}

/** Whether another of the user's projects (not `exceptId`) has this name, in any case. */
export async function isNameTaken(em: SqlEntityManager, userId: number, name: string, exceptId?: number): Promise<boolean> {
  const where = exceptId === undefined ? { userId, slug: slugOf(name) } : { userId, slug: slugOf(name), id: { $ne: exceptId } };
  return (await em.count(Project, where)) > 0;
}

/** Flushes, reporting a name that became taken since it was checked as `taken`. */
export async function flushNamed(em: SqlEntityManager): Promise<void> {
  try {
    await em.flush();
  } catch (error) {
    if (error instanceof UniqueConstraintViolationException) throw takenName();
    throw error;
  }
}
