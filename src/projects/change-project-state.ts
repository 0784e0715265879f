/**
 * PUT /api/projects/{id}/state (SPEC.md 3.1, 4.4): the project moves along its state machine
 * (project.lifecycle.ts), and its tasks with it, in one statement for all of them
 * (task.store.ts `applyToProjectTasks`, which returns them as changed: their events' documents).
 * The owner's lock (taken first by every write) keeps the count of started projects true until
 * this one commits, across every server process.
 */
import type { z } from 'zod';
import type { UseCase } from '../writes/user-write.js';
import { applyToProjectTasks } from '../tasks/task.store.js';
import { presentTaskFields } from '../tasks/task.view.js';
import { Project } from './project.entity.js';
import { answerProject, findOwnedProject, type ProjectAnswer } from './project-answer.js';
import type { ChangeProjectStateInput } from './project.schema.js';

type Input = z.infer<typeof ChangeProjectStateInput>;

export const changeProjectState: UseCase<Input, ProjectAnswer> = {
  async transaction(scope, input) {
    const { em, userId, now, timeZone, changes } = scope;
    const project = await findOwnedProject(em, userId, input.id);
    const transition = await project.changeState(input.project, {
      now,
      timeZone,
      startedProjects: () => em.count(Project, { userId, state: 'started' }),
    });
    await em.flush();
    changes.updated('project', project.id); // first: its tasks' events follow it
    if (transition.tasks) {
      for (const task of await applyToProjectTasks(em, userId, project.id, transition.tasks, now)) {
        changes.updated('task', task.id, presentTaskFields(task));
      }
    }
    return answerProject(scope, project);
  },
};
