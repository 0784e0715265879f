/**
 * DELETE /api/projects/{id} (API-CONTRACT.md §6): the project goes; its newed, started and
 * planned tasks are abandoned and every task loses its project. Under the owner's lock no
 * task can join the project between that release and the delete. The release has to come
 * first: a task's key to its project, (user_id, project_id), takes no action when the project
 * goes (a sharded database refuses ON DELETE SET NULL on it; see the user-keyed layout
 * migration), so a project that still has tasks cannot be deleted.
 */
import type { z } from 'zod';
import type { UseCase } from '../writes/user-write.js';
import { PROJECT_DELETED } from '../tasks/task.lifecycle.js';
import { applyToProjectTasks } from '../tasks/task.store.js';
import { presentTaskFields } from '../tasks/task.view.js';
import { findOwnedProject } from './project-answer.js';
import type { ProjectIdInput } from './project.schema.js';

type Input = z.infer<typeof ProjectIdInput>;

export const deleteProject: UseCase<Input, void> = {
  async transaction({ em, userId, now, changes }, input) {
    const project = await findOwnedProject(em, userId, input.id);
    changes.deleted('project', project.id);
    const released = await applyToProjectTasks(em, userId, project.id, PROJECT_DELETED, now, { detach: true });
    for (const task of released) changes.updated('task', task.id, presentTaskFields(task));
    em.remove(project);
  },
};
