/**
 * PUT /api/tasks/{id}/order (SPEC.md 4.9, API-CONTRACT.md §5): moves a task in the user's order, shifting
 * the tasks in between (task.store.ts `moveTaskCtes`). Every moved task's document changes,
 * and so does each of their projects' (a project lists its tasks by order). Answers with
 * every task whose order changed, by order (just the task when it did not move).
 *
 * One statement when its snapshot is as fresh as the owner's lock (`FRESH`: the orders it
 * shifts must be the current ones): the lock, the move, the moved tasks' events by order,
 * each project's (listing its tasks in their new order) after its first moved task. Else the
 * transaction. Both append the events in that order.
 */
import type { z } from 'zod';
import { STABILITY_META } from '../core/envelope.js';
import { DomainError } from '../core/errors.js';
import { FRESH, type UseCase } from '../writes/user-write.js';
import type { ReorderTaskInput, TaskOrderDocument } from './task.schema.js';
import { listedTaskIdsAfterMove, moveTask, moveTaskCtes } from './task.store.js';
import { presentTaskFields, taskDocumentSql } from './task.view.js';
import { USER } from '../db/user-param.js';

type Input = z.infer<typeof ReorderTaskInput>;
type Answer = z.infer<typeof TaskOrderDocument>;

const orderDocument = (changed: ReadonlyArray<{ id: number; order: number }>): Answer => ({
  data: changed.map(({ id, order }) => ({ type: 'task' as const, id, attributes: { order } })),
  meta: STABILITY_META,
});

export const reorderTask: UseCase<Input, Answer> = {
  oneStatement(input, { resources }) {
    return {
      freshOnly: true,
      reads: moveTaskCtes(input.id, input.task.order, FRESH),
      // The moved task, whether or not it moved: what the statement answers with.
      changed: { sql: 'select * from target', params: [] },
      // Each moved task by order, and after the first moved task of a project, that project.
      events: [
        { type: 'task.updated', document: taskDocumentSql('moved'), from: 'moved', place: { group: 0, at: '2 * row_number() over (order by moved."order")' } },
        {
          type: 'project.updated',
          document: resources.project.documentSql('project', listedTaskIdsAfterMove('project')),
          from: `projects project where project.user_id = ${USER} and project.id in (select project_id from moved)`,
          place: { group: 0, at: '2 * (select count(*) from moved m where m."order" <= (select min(f."order") from moved f where f.project_id = project.id)) + 1' },
        },
      ],
      returning: `changed.id, changed.from_order,
        (select json_agg(json_build_object('id', m.id, 'order', m."order") order by m."order", m.id) from moved m) as orders`,
      answer: (row) => {
        const { id, from_order, orders } = row as { id: number; from_order: number; orders: Array<{ id: number; order: number }> | null };
        return { value: orderDocument(orders ?? [{ id, order: from_order }]) };
      },
      refusal: {
        current: { sql: `(select true from tasks t where t.id = ? and t.user_id = ${USER})`, params: [input.id] },
        refuse(current) {
          if (current === null) throw DomainError.notFound('task');
        },
      },
    };
  },

  async transaction({ em, userId, changes }, input) {
    const move = await moveTask(em, userId, input.id, input.task.order);
    if (!move) throw DomainError.notFound('task');
    // Each moved task by order, and after the first moved task of a project, that project.
    for (const task of move.moved) {
      changes.updated('task', task.id, presentTaskFields(task));
      if (task.projectId !== null) changes.updated('project', task.projectId);
    }
    return orderDocument(move.changed);
  },
};
