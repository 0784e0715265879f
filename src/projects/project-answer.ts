/**
 * What every project write answers with: the project's document (which lists its tasks) and
 * its ETag (which covers those task ids), also recorded as the project's document in the
 * write's change set.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { projectEtag } from '../core/conditional.js';
import { STABILITY_META } from '../core/envelope.js';
import { DomainError } from '../core/errors.js';
import type { WriteScope } from '../writes/user-write.js';
import { taskIdsOfProjects } from '../tasks/task.store.js';
import { Project } from './project.entity.js';
import type { ProjectResource } from './project.schema.js';
import { presentProject } from './project.view.js';

export type ProjectAnswer = { data: ProjectResource; meta: typeof STABILITY_META };

export async function findOwnedProject(em: SqlEntityManager, userId: number, id: number): Promise<Project> {
  const project = await em.findOne(Project, { id, userId });
  if (!project) throw DomainError.notFound('project');
  return project;
}

/** A changed project's answer, recorded in the write's change set, with its ETag. */
export async function answerProject(scope: WriteScope, project: Project): Promise<ProjectAnswer> {
  const taskIds = (await taskIdsOfProjects(scope.em, scope.userId, [project.id])).get(project.id) ?? [];
  const data = presentProject(project, taskIds);
  scope.changes.updated('project', project.id, data);
  scope.etag = () => projectEtag(project.id, project.version, taskIds);
  return { data, meta: STABILITY_META };
}
