/**
 * POST /api/users/me/tasks (SPEC.md 4.5): a task at the end of the user's order, its state
 * from `newTaskFields` (task.lifecycle.ts), in one statement: the owner's lock, the insert and
 * its event, when the statement's snapshot is as fresh as the lock (`FRESH`: the end of the
 * order and the project's tasks are read in it; else the transaction runs); with a project, whose state decides the task's and whose document lists it, the
 * statement also reads the project (fresh, after the lock: task.store.ts `projectRowSql`), so
 * its state cannot change until this task exists, and appends the project's event with the
 * task's. A project the user does not have is refused by the same statement when it can tell
 * (`refusal`), else by the transaction, which reads the project under the owner's lock.
 */
import type { z } from 'zod';
import { fromSeconds } from '../core/clock.js';
import { FRESH, type UseCase } from '../writes/user-write.js';
import { linkedProjectMissing, requireLinkedProject } from './linked-project.js';
import { newTaskFields } from './task.lifecycle.js';
import type { CreateTaskInput } from './task.schema.js';
import { LISTED_WITH_NEW_TASK, insertTask, insertTaskInProjectSql, insertTaskSql, projectRowSql } from './task.store.js';
import { TASK_ROW_ANSWER, answerTask, taskEvent, type TaskAnswer } from './task-answer.js';
import { USER } from '../db/user-param.js';

type Input = z.infer<typeof CreateTaskInput>;

const plannedAtOf = (input: Input) => (input.task.planned_at === undefined ? null : fromSeconds(input.task.planned_at));

export const createTask: UseCase<Input, TaskAnswer> = {
  oneStatement(input, { now, resources }) {
    const { label, project_id } = input.task;
    const plannedAt = plannedAtOf(input);
    if (project_id == null) {
      const fields = newTaskFields({ plannedAt, project: null }, now);
      return { freshOnly: true, changed: insertTaskSql({ ...fields, projectId: null, label, createdAt: now }, FRESH), events: [taskEvent('created')], ...TASK_ROW_ANSWER };
    }
    return {
      freshOnly: true,
      reads: projectRowSql(project_id),
      changed: insertTaskInProjectSql({ label, createdAt: now }, (project) => newTaskFields({ plannedAt, project }, now), FRESH),
      events: [
        taskEvent('created'),
        { type: 'project.updated', document: resources.project.documentSql('project', LISTED_WITH_NEW_TASK), from: 'changed, project' },
      ],
      ...TASK_ROW_ANSWER,
      refusal: {
        current: { sql: `(select true from projects p where p.id = ? and p.user_id = ${USER})`, params: [project_id] },
        refuse(current) {
          if (current === null) throw linkedProjectMissing();
        },
      },
    };
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
