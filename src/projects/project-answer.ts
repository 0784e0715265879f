/**
 * What every project write answers with: the project's document (which lists its tasks) and
 * its ETag (which covers those task ids), also recorded as the project's document in the
 * write's change set.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { projectEtag } from '../core/conditional.js';
import { STABILITY_META } from '../core/envelope.js';
import { DomainError } from '../core/errors.js';
import type { OneStatement, WriteScope } from '../writes/user-write.js';
import { listedTaskIdsOf } from '../tasks/task.sql.js';
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

/**
 * A one-statement write's answer for the project it changed (`OneStatement`): its `data` is
 * the project's event document, built in SQL from the row (`projectDocumentSql`); its ETag
 * covers the project's listed task ids, read from the row `changed`.
 */
export const PROJECT_ROW_ANSWER: Pick<OneStatement<ProjectAnswer>, 'returning' | 'answer'> = {
  returning: `changed.id, changed.version, ${listedTaskIdsOf('changed')} as task_ids`,
  answer: (row) => {
    const { id, version, task_ids, document } = row as { id: number; version: number; task_ids: number[]; document: ProjectResource };
    return { value: { data: document, meta: STABILITY_META }, etag: projectEtag(id, version, task_ids) };
  },
};
