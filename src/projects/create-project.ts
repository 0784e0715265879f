/** POST /api/users/me/projects (SPEC.md 4.1): a newed project with a name unique per user. */
import type { z } from 'zod';
import { projectEtag } from '../core/conditional.js';
import { STABILITY_META } from '../core/envelope.js';
import type { UseCase } from '../writes/user-write.js';
import { Project, slugOf } from './project.entity.js';
import { flushNamed, isNameTaken, takenName } from './project-name.js';
import type { ProjectAnswer } from './project-answer.js';
import type { CreateProjectInput } from './project.schema.js';
import { presentProject } from './project.view.js';

type Input = z.infer<typeof CreateProjectInput>;

export const createProject: UseCase<Input, ProjectAnswer> = {
  async transaction(scope, input) {
    const { em, userId, now, changes } = scope;
    const { name } = input.project;
    if (await isNameTaken(em, userId, name)) throw takenName();
    const project = em.create(Project, { userId, name, slug: slugOf(name), description: '', state: 'newed', createdAt: now });
    await flushNamed(em);
    const data = presentProject(project, []);
    scope.etag = () => projectEtag(project.id, project.version, []);
    changes.created('project', project.id, data);
    return { data, meta: STABILITY_META };
  },
};
