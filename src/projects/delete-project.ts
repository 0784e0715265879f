/**
 * DELETE /api/projects/{id} (API-CONTRACT.md §6): the project goes; its newed, started and
 * planned tasks are abandoned and every task loses its project. Under the owner's lock no
 * task can join the project between that release and the delete. The release has to come
 * first: a task's key to its project, (user_id, project_id), takes no action when the project
 * goes (a sharded database refuses ON DELETE SET NULL on it; see the user-keyed layout
 * migration), so a project that still has tasks cannot be deleted.
 *
 * One statement when its snapshot is as fresh as the owner's lock (`FRESH`: a task created in
 * the project while it waited would not be released): the lock, the release, the delete and
 * the events (the project's deletion, then each released task by order); else the transaction.
 */
import type { z } from 'zod';
import { DomainError } from '../core/errors.js';
import { FRESH, type UseCase } from '../writes/user-write.js';
import { PROJECT_DELETED, taskAction, taskActionSql } from '../tasks/task.lifecycle.js';
import { applyToProjectTasks } from '../tasks/task.store.js';
import { presentTaskFields } from '../tasks/task.view.js';
import { findOwnedProject } from './project-answer.js';
import type { ProjectIdInput } from './project.schema.js';
import { USER } from '../db/user-param.js';

type Input = z.infer<typeof ProjectIdInput>;

export const deleteProject: UseCase<Input, void> = {
  oneStatement(input, { now, resources }) {
    const { set, params } = taskActionSql(taskAction(PROJECT_DELETED.action), now, PROJECT_DELETED.states);
    return {
      freshOnly: true,
      reads: {
        sql: `prior as (select p.* from projects p where p.id = ? and p.user_id = ${USER} and ${FRESH}),
              released as (
                update tasks set ${set}, project_id = null, version = tasks.version + 1
                 where tasks.user_id = ${USER} and tasks.project_id = (select id from prior)
                returning tasks.*)`,
        params: [input.id, ...params],
      },
      // The tasks' key to their project takes no action and is checked at the statement's
      // end, when \`released\` has let go of every task.
      changed: {
        sql: `delete from projects using prior where projects.user_id = ${USER} and projects.id = prior.id returning projects.*`,
        params: [],
      },
      events: [
        { type: 'project.deleted', document: "json_build_object('type', 'project', 'id', changed.id)" },
        { type: 'task.updated', document: resources.task.documentSql('released', ''), from: 'released', orderBy: 'released."order", released.id' },
      ],
      returning: 'changed.id',
      answer: () => ({ value: undefined }),
      refusal: {
        current: { sql: `(select true from projects p where p.id = ? and p.user_id = ${USER})`, params: [input.id] },
        refuse(current) {
          if (current === null) throw DomainError.notFound('project');
        },
      },
    };
  },

  async transaction({ em, userId, now, changes }, input) {
    const project = await findOwnedProject(em, userId, input.id);
    changes.deleted('project', project.id);
    const released = await applyToProjectTasks(em, userId, project.id, PROJECT_DELETED, now, { detach: true });
    for (const task of released.sort((a, b) => a.order - b.order || a.id - b.id)) changes.updated('task', task.id, presentTaskFields(task));
    em.remove(project);
  },
};
