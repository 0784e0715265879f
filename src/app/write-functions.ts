/**
 * The write functions of this code (docs/design/writes.md): every write operation, made by its
 * feature from its rule tables, gathered here at the composition root (a feature's operation
 * may need another's SQL: `apply` writes the project documents the tasks' operations name), then installed with
 * the migrations (src/app/orm.ts) and named in every context (`writes`).
 */
import type { WriteFunctionNames } from '../core/context.js';
import { changeProjectStateOperation } from '../projects/change-project-state.js';
import { createProjectOperation } from '../projects/create-project.js';
import { deleteProjectOperation } from '../projects/delete-project.js';
import { updateProjectOperation } from '../projects/update-project.js';
import { projectDocumentSql } from '../projects/project.view.js';
import { changeTaskStateOperation } from '../tasks/change-task-state.js';
import { createTaskOperation } from '../tasks/create-task.js';
import { reorderTaskOperation } from '../tasks/reorder-task.js';
import { listedTaskIdsOf } from '../tasks/task.sql.js';
import { updateTaskOperation } from '../tasks/update-task.js';
import { writeFunctions, type WriteOperation } from '../writes/write-functions.js';

export const writeOperations: readonly WriteOperation[] = [
  createProjectOperation(),
  updateProjectOperation(),
  changeProjectStateOperation(),
  deleteProjectOperation(),
  createTaskOperation(),
  updateTaskOperation(),
  changeTaskStateOperation(),
  reorderTaskOperation(),
];

/** A project's document, as `apply` writes it for a `project.updated` a task's operation names. */
const projectDocument = (p: string) => projectDocumentSql(p, listedTaskIdsOf(p, 'p_user'));

export const writeFunctionSet = writeFunctions(writeOperations, projectDocument);

export const writes: WriteFunctionNames = {
  apply: writeFunctionSet.apply,
  keyOpen: writeFunctionSet.keyOpen,
  keyKeep: writeFunctionSet.keyKeep,
};
