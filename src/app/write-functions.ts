/**
 * The write functions of this code (docs/design/writes.md): every write operation, made by its
 * feature from its rule tables, gathered here at the composition root (a feature's operation
 * may need another's SQL: a task's abandon writes its project's document), then installed with
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
import { updateTaskOperation } from '../tasks/update-task.js';
import { writeFunctions, type WriteOperation } from '../writes/write-functions.js';

export const writeOperations: readonly WriteOperation[] = [
  createProjectOperation(),
  updateProjectOperation(),
  changeProjectStateOperation(),
  deleteProjectOperation(),
  createTaskOperation(projectDocumentSql),
  updateTaskOperation(projectDocumentSql),
  changeTaskStateOperation(projectDocumentSql),
  reorderTaskOperation(projectDocumentSql),
];

export const writeFunctionSet = writeFunctions(writeOperations);

export const writes: WriteFunctionNames = {
  apply: writeFunctionSet.apply,
  operations: Object.fromEntries(writeOperations.map((o) => [o.op, `${writeFunctionSet.schema}.${o.fn}`])),
};
