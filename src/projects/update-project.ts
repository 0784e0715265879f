/**
 * PATCH /api/projects/{id} (SPEC.md 4.3): the name (rules of creation), the description, or
 * `due_at` (project.entity.ts `changeDueAt`). Every problem found is answered at once.
 */
import type { z } from 'zod';
import { ValidationErrors } from '../core/errors.js';
import type { UseCase } from '../writes/user-write.js';
import { flushNamed, isNameTaken, takenName } from './project-name.js';
import { answerProject, findOwnedProject, type ProjectAnswer } from './project-answer.js';
import type { UpdateProjectInput } from './project.schema.js';

type Input = z.infer<typeof UpdateProjectInput>;

export const updateProject: UseCase<Input, ProjectAnswer> = {
  async transaction(scope, input) {
    const { em, userId } = scope;
    const project = await findOwnedProject(em, userId, input.id);
    const { name, description, due_at } = input.project;
    const problems = new ValidationErrors();
    if (name !== undefined) {
      if (await isNameTaken(em, userId, name, project.id)) problems.errors.push(...takenName().errors);
      else project.rename(name);
    }
    if (description !== undefined) project.description = description;
    if (due_at !== undefined) problems.collect(() => project.changeDueAt(due_at));
    problems.throwIfAny();
    await flushNamed(em);
    return answerProject(scope, project);
  },
};
