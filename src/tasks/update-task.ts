/**
 * PATCH /api/tasks/{id} (SPEC.md 4.7): the label, or the project (null detaches). Moving to
 * another project re-syncs the task's state (`Task.moveToProject`), and both projects'
 * documents change (they list their tasks). Always the transaction: the ORM's unit of work
 * writes what changed.
 */
import type { z } from 'zod';
import { DomainError } from '../core/errors.js';
import type { UseCase } from '../writes/user-write.js';
import { requireLinkedProject } from './linked-project.js';
import { Task } from './task.entity.js';
import type { UpdateTaskInput } from './task.schema.js';
import { fieldsOf } from './task.view.js';
import { answerTask, type TaskAnswer } from './task-answer.js';

type Input = z.infer<typeof UpdateTaskInput>;

export const updateTask: UseCase<Input, TaskAnswer> = {
  async transaction(scope, input) {
    const { em, userId, now, changes } = scope;
    const { label, project_id } = input.task;
    const task = await em.findOne(Task, { id: input.id, userId });
    if (!task) throw DomainError.notFound('task');
    if (label !== undefined) task.label = label;
    if (project_id !== undefined) {
      const before = task.projectId ?? null;
      task.moveToProject(project_id === null ? null : await requireLinkedProject(em, userId, project_id), now);
      if (before !== (task.projectId ?? null)) {
        for (const id of [before, task.projectId]) if (id) changes.updated('project', id);
      }
    }
    return answerTask(scope, fieldsOf(task), () => task.version);
  },
};
