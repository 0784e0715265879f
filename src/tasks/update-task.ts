/**
 * PATCH /api/tasks/{id} (SPEC.md 4.7): the label, or the project (null detaches). Moving to
 * another project re-syncs the task's state (`Task.moveToProject`), and both projects'
 * documents change (they list their tasks).
 *
 * One statement: the owner's lock, the update (the state synced by `projectSyncSql`, the rule
 * of `projectSyncAction` in SQL), the events of the project it left, the project it joined and
 * the task, in that order. With a project it reads projects in its snapshot, so then it changes
 * nothing when a write of the user landed before it got the lock (`FRESH`). When it changed
 * nothing, the same statement tells a missing task (404) from a project that is not the
 * user's (422); else the transaction, where the ORM's unit of work writes what changed.
 */
import type { z } from 'zod';
import { DomainError } from '../core/errors.js';
import { FRESH, type UseCase } from '../writes/user-write.js';
import { linkedProjectMissing, requireLinkedProject } from './linked-project.js';
import { projectSyncSql } from './task.lifecycle.js';
import { listedTaskIdsAfter } from './task.sql.js';
import { Task } from './task.entity.js';
import type { UpdateTaskInput } from './task.schema.js';
import { fieldsOf } from './task.view.js';
import { TASK_ROW_ANSWER, answerTask, taskEvent, type TaskAnswer } from './task-answer.js';
import { USER } from '../db/user-param.js';
import { versionIfChanged } from '../db/row-version.js';

type Input = z.infer<typeof UpdateTaskInput>;

export const updateTask: UseCase<Input, TaskAnswer> = {
  oneStatement(input, { now, resources }) {
    const { label, project_id } = input.task;
    const moving = project_id !== undefined;
    const set: string[] = [];
    const params: unknown[] = [];
    if (label !== undefined) {
      set.push('label = ?');
      params.push(label);
    }
    if (moving) {
      const sync = projectSyncSql(project_id === null ? 'true' : "(select state = 'started' from joined)", now);
      set.push(project_id === null ? 'project_id = null' : 'project_id = (select id from joined)', sync.set);
      params.push(...sync.params);
    }
    if (set.length === 0) set.push('label = tasks.label'); // nothing to edit: the task as it is
    // The version moves only when a column does: the same label, or a move that changes nothing, keeps it.
    const version = versionIfChanged('tasks', set, params);
    const guard = moving ? ` and ${FRESH}` : '';
    const projectDocument = (p: string) => resources.project.documentSql(p, listedTaskIdsAfter(p, 'changed'));
    return {
      freshOnly: moving,
      reads: {
        sql: `prior as (select t.* from tasks t where t.id = ? and t.user_id = ${USER}${guard})${
          project_id == null ? '' : `, joined as (select p.* from projects p where p.id = ? and p.user_id = ${USER})`
        }`,
        params: project_id == null ? [input.id] : [input.id, project_id],
      },
      changed: {
        sql: `update tasks set ${set.join(', ')}, ${version.sql}
               where tasks.user_id = ${USER} and tasks.id = (select id from prior)${project_id == null ? '' : ' and exists (select 1 from joined)'}
              returning tasks.*`,
        params: [...params, ...version.params],
      },
      events: moving
        ? [
            { type: 'project.updated', document: projectDocument('leaving'), from: `changed, projects leaving where leaving.user_id = ${USER} and leaving.id = (select project_id from prior) and leaving.id is distinct from changed.project_id` },
            { type: 'project.updated', document: projectDocument('joining'), from: `changed, projects joining where joining.user_id = ${USER} and joining.id = changed.project_id and joining.id is distinct from (select project_id from prior)` },
            taskEvent('updated'),
          ]
        : [taskEvent('updated')],
      answerEvent: moving ? 2 : 0,
      ...TASK_ROW_ANSWER,
      refusal: {
        current: {
          sql: `json_build_object('task', exists (select 1 from tasks t where t.id = ? and t.user_id = ${USER}),
                                  'project', ${project_id == null ? 'true' : `exists (select 1 from projects p where p.id = ? and p.user_id = ${USER})`})`,
          params: project_id == null ? [input.id] : [input.id, project_id],
        },
        refuse(current) {
          const { task, project } = current as { task: boolean; project: boolean };
          if (!task) throw DomainError.notFound('task');
          if (!project) throw linkedProjectMissing();
        },
      },
    };
  },

  async transaction(scope, input) {
    const { em, userId, now, changes } = scope;
    const { label, project_id } = input.task;
    const task = await em.findOne(Task, { id: input.id, userId });
    if (!task) throw DomainError.notFound('task');
    if (label !== undefined) task.label = label;
    if (project_id !== undefined) {
      const before = task.projectId ?? null;
      task.moveToProject(project_id === null ? null : await requireLinkedProject(em, userId, project_id), now);
      if (before !== (task.projectId ?? null)) {
        for (const id of [before, task.projectId]) if (id) changes.updated('project', id);
      }
    }
    return answerTask(scope, fieldsOf(task), () => task.version);
  },
};
