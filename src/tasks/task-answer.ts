/**
 * What every task write answers with: the task's document and its ETag, also recorded as the
 * task's document in the write's change set (its change-log event).
 */
import { STABILITY_META } from '../core/envelope.js';
import { taskEtag } from '../core/conditional.js';
import type { OneStatement, WriteScope } from '../writes/user-write.js';
import type { TaskResource } from './task.schema.js';
import { presentTaskFields, taskDocumentSql, type TaskFields } from './task.view.js';

export type TaskAnswer = { data: TaskResource; meta: typeof STABILITY_META };

/**
 * A changed task's answer, recorded in the write's change set, with its ETag: `version` is
 * read after the write's flush (an entity's version moves then).
 */
export function answerTask(scope: WriteScope, task: TaskFields, version: () => number, kind: 'created' | 'updated' = 'updated'): TaskAnswer {
  const data = presentTaskFields(task);
  scope.changes[kind]('task', task.id, data);
  scope.etag = () => taskEtag(task.id, version());
  return { data, meta: STABILITY_META };
}

/**
 * A one-statement write's answer (`OneStatement`): its `data` is the task's event document,
 * built in SQL from the task's row (`taskDocumentSql`, the same JSON as `presentTaskFields`:
 * test/rules/tasks-document.test.ts), so the row's columns are not presented a second time
 * for the response.
 */
export const TASK_ROW_ANSWER: Pick<OneStatement<TaskAnswer>, 'returning' | 'answer'> = {
  returning: 'changed.id, changed.version',
  answer: (row) => {
    const { id, version, document } = row as { id: number; version: number; document: TaskResource };
    return { value: { data: document, meta: STABILITY_META }, etag: taskEtag(id, version) };
  },
};

/** The event of the task a one-statement write changed: its document, from its row `changed`. */
export const taskEvent = (kind: 'created' | 'updated') => ({ type: `task.${kind}` as const, document: taskDocumentSql('changed') });
