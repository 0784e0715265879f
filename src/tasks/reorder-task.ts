/**
 * PUT /api/tasks/{id}/order (SPEC.md 4.9, API-CONTRACT.md §5): moves a task in the user's order, shifting
 * the tasks in between (task.store.ts `moveTask`, one statement). Every moved task's document
 * changes, and so does each of their projects' (a project lists its tasks by order). Answers
 * with every task whose order changed, by order.
 */
import type { z } from 'zod';
import { STABILITY_META } from '../core/envelope.js';
import { DomainError } from '../core/errors.js';
import type { UseCase } from '../writes/user-write.js';
import type { ReorderTaskInput, TaskOrderDocument } from './task.schema.js';
import { moveTask } from './task.store.js';
import { presentTaskFields } from './task.view.js';

type Input = z.infer<typeof ReorderTaskInput>;

export const reorderTask: UseCase<Input, z.infer<typeof TaskOrderDocument>> = {
  async transaction({ em, userId, changes }, input) {
    const move = await moveTask(em, userId, input.id, input.task.order);
    if (!move) throw DomainError.notFound('task');
    for (const task of move.moved) {
      changes.updated('task', task.id, presentTaskFields(task));
      if (task.projectId !== null) changes.updated('project', task.projectId);
    }
    return {
      data: move.changed.map(({ id, order }) => ({ type: 'task' as const, id, attributes: { order } })),
      meta: STABILITY_META,
    };
  },
};
