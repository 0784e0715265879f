/**
 * PUT /api/tasks/{id}/state (SPEC.md 3.2, 4.8): a requested state change, in its forms.
 *
 * - One statement, for the usual request (only `state`): the owner's lock, the update guarded
 *   by the states the table lets reach `state` (task.lifecycle.ts `taskTransitionSql`), its
 *   event and the NOTIFY; abandoning also changes the project's document (it lists its
 *   tasks), whose event follows, read in the statement's snapshot (so only when `FRESH`). No changed row means nothing changed: no such task, or a state that does not
 *   allow it. Then the same statement has also read the task's state, and says why
 *   from it (404, then `invalid_transition`: `requestedTaskAction`) unless a write of the user
 *   landed while it waited for the lock (`OneStatement.refusal`): a refusal costs no
 *   transaction.
 * - The transaction, under the owner's lock, for every request: with an Idempotency-Key or
 *   If-Match it makes the same guarded update. After the one statement changed nothing (and
 *   could not say why) it reads the task first and says why (404, then `invalid_transition`,
 *   then `cannot_be_set`: `requestedTaskAction`), making the change after all only if a write
 *   that landed in between now allows it.
 *
 * An abandoned task leaves its project's list of tasks, so that project's document changes too.
 */
import type { z } from 'zod';
import { DomainError } from '../core/errors.js';
import { FRESH, type UseCase, type WriteScope } from '../writes/user-write.js';
import { listedTaskIdsAfter } from './task.sql.js';
import { requestedTaskAction } from './task.entity.js';
import type { TaskState } from './task.lifecycle.js';
import type { ChangeTaskStateInput } from './task.schema.js';
import { changeTaskStateUnderLock, ownedTask, taskStateChangeSql } from './task.store.js';
import { TASK_ROW_ANSWER, answerTask, taskEvent, type TaskAnswer } from './task-answer.js';
import { USER } from '../db/user-param.js';

type Input = z.infer<typeof ChangeTaskStateInput>;

const onlyState = (input: Input) => Object.keys(input.task).length === 1;

export const changeTaskState: UseCase<Input, TaskAnswer> = {
  oneStatement(input, { now, resources }) {
    if (!onlyState(input)) return null;
    // An abandoned task leaves its project's list: that project's document (read in the
    // statement's snapshot, so only when it is as fresh as the lock) is an event too.
    const abandons = input.task.state === 'abandoned';
    const changed = taskStateChangeSql(input.id, input.task.state, now, abandons ? FRESH : undefined);
    return changed && {
      changed,
      freshOnly: abandons,
      events: abandons
        ? [
            taskEvent('updated'),
            {
              type: 'project.updated',
              document: resources.project.documentSql('project', listedTaskIdsAfter('project', 'changed')),
              from: `changed, projects project where project.user_id = ${USER} and project.id = changed.project_id`,
            },
          ]
        : [taskEvent('updated')],
      ...TASK_ROW_ANSWER,
      // Nothing changed: the task's state says why, as the transaction would (it is read there
      // under the lock; here only when no write of the user landed since the snapshot).
      refusal: {
        current: { sql: `(select t.state from tasks t where t.id = ? and t.user_id = ${USER})`, params: [input.id] },
        refuse(current) {
          if (current === null) throw DomainError.notFound('task');
          requestedTaskAction(current as TaskState, input.task);
        },
      },
    };
  },

  async transaction(scope, input) {
    if (onlyState(input) && !scope.oneStatementChangedNothing) {
      const changed = await guardedUpdate(scope, input);
      if (changed) return changed;
    }
    const task = await ownedTask(scope.em, scope.userId, input.id);
    if (!task) throw DomainError.notFound('task');
    requestedTaskAction(task.state, input.task);
    // Allowed now: a write of this user landed between the one statement and this transaction.
    const changed = await guardedUpdate(scope, input);
    if (!changed) throw new Error(`task ${input.id}: the transition table and its SQL disagree`);
    return changed;
  },
};

async function guardedUpdate(scope: WriteScope, input: Input): Promise<TaskAnswer | null> {
  const changed = await changeTaskStateUnderLock(scope.em, scope.userId, input.id, input.task.state, scope.now);
  if (!changed) return null;
  const answer = answerTask(scope, changed, () => changed.version);
  if (changed.state === 'abandoned' && changed.projectId) scope.changes.updated('project', changed.projectId);
  return answer;
}
