/**
 * POST /api/users/me/tasks (SPEC.md 4.5): a task at the end of the user's order, its state
 * from `newTaskFields` (task.lifecycle.ts). Without a project it is one statement (the
 * owner's lock, the insert, its event); with one, whose state decides the task's and whose
 * document lists it, it is the transaction, which reads the project under the owner's lock:
 * the project's state cannot change until this task exists, so a task is never left newed
 * under a project that started.
 */
import type { z } from 'zod';
import { fromSeconds } from '../core/clock.js';
import type { UseCase } from '../writes/user-write.js';
import { requireLinkedProject } from './linked-project.js';
import { newTaskFields } from './task.lifecycle.js';
import type { CreateTaskInput } from './task.schema.js';
import { insertTask, insertTaskSql } from './task.store.js';
import { TASK_ROW_ANSWER, answerTask, type TaskAnswer } from './task-answer.js';

type Input = z.infer<typeof CreateTaskInput>;

const plannedAtOf = (input: Input) => (input.task.planned_at === undefined ? null : fromSeconds(input.task.planned_at));

export const createTask: UseCase<Input, TaskAnswer> = {
  oneStatement(input, now) {
    const { label, project_id } = input.task;
    if (project_id != null) return null;
    const fields = newTaskFields({ plannedAt: plannedAtOf(input), project: null }, now);
    return { resource: 'task', kind: 'created', changed: insertTaskSql({ ...fields, projectId: null, label, createdAt: now }), ...TASK_ROW_ANSWER };
  },

  async transaction(scope, input) {
    const { em, userId, now, changes } = scope;
    const { label, project_id } = input.task;
    const project = project_id == null ? null : await requireLinkedProject(em, userId, project_id);
    const fields = newTaskFields({ plannedAt: plannedAtOf(input), project }, now);
    const inserted = await insertTask(em, { ...fields, userId, projectId: project?.id ?? null, label, createdAt: now });
    const answer = answerTask(scope, inserted, () => inserted.version, 'created');
    if (project) changes.updated('project', project.id); // its document lists its tasks
    return answer;
  },
};
