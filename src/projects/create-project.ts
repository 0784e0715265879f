/**
 * POST /api/users/me/projects (SPEC.md 4.1): a newed project with a name unique per user. One
 * statement: the owner's lock, the insert (nothing when the name is taken: the unique slug of
 * the user decides, whatever the statement's snapshot), its event. A name taken is said by the
 * same statement when its snapshot can tell; else the transaction checks the name and inserts.
 */
import type { z } from 'zod';
import { projectEtag } from '../core/conditional.js';
import { STABILITY_META } from '../core/envelope.js';
import type { UseCase } from '../writes/user-write.js';
import { Project, slugOf } from './project.entity.js';
import { flushNamed, isNameTaken, takenName } from './project-name.js';
import type { ProjectAnswer } from './project-answer.js';
import type { CreateProjectInput, ProjectResource } from './project.schema.js';
import { presentProject } from './project.view.js';
import { USER } from '../db/user-param.js';

type Input = z.infer<typeof CreateProjectInput>;

export const createProject: UseCase<Input, ProjectAnswer> = {
  oneStatement(input, { now, resources }) {
    const { name } = input.project;
    return {
      changed: {
        sql: `insert into projects (user_id, name, slug, description, state, created_at)
              select ${USER}, ?, ?, '', 'newed', ? from owner
              on conflict on constraint projects_user_id_slug_unique do nothing
              returning *`,
        params: [name, slugOf(name), now],
      },
      events: [{ type: 'project.created', document: resources.project.documentSql('changed', "'{}'::bigint[]") }],
      returning: 'changed.id, changed.version',
      answer: (row) => {
        const { id, version, document } = row as { id: number; version: number; document: ProjectResource };
        return { value: { data: document, meta: STABILITY_META }, etag: projectEtag(id, version, []) };
      },
      refusal: {
        current: { sql: `(select true from projects p where p.user_id = ${USER} and p.slug = ?)`, params: [slugOf(name)] },
        refuse(current) {
          if (current === true) throw takenName();
        },
      },
    };
  },

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
