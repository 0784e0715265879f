/** Tasks of the current user (SPEC.md 4.5–4.9, API-CONTRACT.md §5). */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { STABILITY_META, pageLinks, pageOf } from '../core/envelope.js';
import { listEtag, notModified, taskEtag } from '../core/conditional.js';
import { daysBefore, fromSeconds, startOfUtcDay } from '../core/clock.js';
import { DomainError } from '../core/errors.js';
import { authedProcedure, keepDroppedMembers, router } from '../core/trpc.js';
import { userWrite, type OneStatement, type WriteScope } from '../writes/user-write.js';
import { Task } from './task.entity.js';
import { newTaskFields } from './task.lifecycle.js';
import {
  ChangeTaskStateInput,
  CreateTaskInput,
  ListTasksInput,
  ReorderTaskInput,
  TASK_PAGE_SIZE,
  TaskDocument,
  TaskIdInput,
  TaskListDocument,
  TaskOrderDocument,
  type TaskResource,
  UpdateTaskInput,
} from './task.schema.js';
import {
  changeTaskState, insertTask, insertTaskSql, linkedProject, listTasks, moveTask, ownedTask, presentedTaskColumns, presentedTaskOf, taskStateChangeSql,
} from './task.store.js';
import { presentTask, presentTaskFields, taskDocumentSql } from './task.view.js';

const TAGS = ['tasks'];
const LIST_PATH = '/api/users/me/tasks';
/** Finished tasks stay listed for this many UTC days. */
const FINISHED_LISTED_DAYS = 14;

async function findOwnedTask(em: SqlEntityManager, userId: number, id: number): Promise<Task> {
  const task = await em.findOne(Task, { id, userId });
  if (!task) throw DomainError.notFound('task');
  return task;
}

/** The project a task names in its body, which must be one of the user's. */
async function findLinkedProject(em: SqlEntityManager, userId: number, id: number) {
  const project = await linkedProject(em, userId, id);
  if (!project) {
    throw DomainError.validation('record_not_found', '/task/project_id', 'No project with this id exists for the current user.');
  }
  return project;
}

function taskDocument(task: Task) {
  return { data: presentTask(task), meta: STABILITY_META };
}

/** A changed task's document, recorded in the write's change set and returned with its ETag. */
function recordTask(scope: WriteScope, task: Task) {
  const document = taskDocument(task);
  scope.changes.updated('task', task.id, document.data);
  scope.etag = () => taskEtag(task.id, task.version);
  return document;
}

type TaskAnswer = { data: TaskResource; meta: typeof STABILITY_META };

/** A one-statement write's event document and answer, from the task's row (user-write.ts `OneStatement`). */
const TASK_ROW_ANSWER: Pick<OneStatement<TaskAnswer>, 'document' | 'returning' | 'answer'> = {
  document: taskDocumentSql('changed'),
  returning: presentedTaskColumns('changed'),
  answer: (row) => {
    const task = presentedTaskOf(row);
    return { value: { data: presentTaskFields(task), meta: STABILITY_META }, etag: taskEtag(task.id, task.version) };
  },
};

export const tasksRouter = router({
  create: authedProcedure
    .meta({
      openapi: {
        method: 'POST', path: '/api/users/me/tasks', tags: TAGS,
        summary: 'Create a task',
        description: [
          'Creates a task at the end of the user\'s order. Initial state, in this order:',
          '1. `planned_at` given: planned, plannedCount 1, plannedAt = planned_at.',
          '2. `project_id` names a project that is not started: newed.',
          '3. Otherwise (started project, or none): started.',
        ].join('\n'),
      },
      successStatus: 201,
      errorCodes: ['parameter_missing', 'invalid', 'too_long', 'record_not_found'],
    })
    .input(CreateTaskInput)
    .output(TaskDocument)
    .mutation(({ ctx, input }) => {
      const { label, planned_at, project_id } = input.task;
      // Without a project (whose state decides and whose document changes), one statement:
      // the owner's lock, the insert at the end of the order, its event.
      const oneStatement = (now: Date): OneStatement<TaskAnswer> | null => project_id != null ? null : {
        resource: 'task',
        kind: 'created',
        changed: insertTaskSql({
          ...newTaskFields({ plannedAt: planned_at === undefined ? null : fromSeconds(planned_at), project: null }, now),
          projectId: null, label, createdAt: now,
        }),
        ...TASK_ROW_ANSWER,
      };
      // Under the owner's lock (taken first by every write) the project's state cannot change
      // until this task exists, so a task is never left newed under a project that started.
      return userWrite(ctx, async (scope) => {
        const { em, userId, now, changes } = scope;
        const project = project_id == null ? null : await findLinkedProject(em, userId, project_id);
        const fields = newTaskFields({ plannedAt: planned_at === undefined ? null : fromSeconds(planned_at), project }, now);
        const inserted = await insertTask(em, { ...fields, userId, projectId: project?.id ?? null, label, createdAt: now });
        const task = presentTaskFields(inserted);
        scope.etag = () => taskEtag(inserted.id, inserted.version);
        changes.created('task', task.id, task);
        if (project) changes.updated('project', project.id);
        return { data: task, meta: STABILITY_META };
      }, oneStatement);
    }),

  list: authedProcedure
    .meta({
      openapi: {
        method: 'GET', path: LIST_PATH, tags: TAGS,
        summary: 'List tasks',
        description: `The current user's tasks by order, ${TASK_PAGE_SIZE} a page. Abandoned tasks and tasks finished before the UTC day ${FINISHED_LISTED_DAYS} days ago are left out. A page beyond the last has an empty \`data\`.`,
      },
      queryParameters: ['page'],
    })
    .input(ListTasksInput)
    .output(TaskListDocument)
    .query(async ({ ctx, input }) => {
      const { page, size, offset } = pageOf(input.page, TASK_PAGE_SIZE);
      const cutoff = daysBefore(startOfUtcDay(ctx.clock.now()), FINISHED_LISTED_DAYS);
      // The page's ETag is known before the page is read: the user's newest change-log number
      // (read with the token, no statement of its own) names every write of the user, and the
      // cutoff day names the 14-day window's move at UTC midnight. A matching If-None-Match
      // answers 304 without reading the page. The number was read before the page, so a write
      // that lands in between makes the tag older than the page, never newer: at worst one
      // more full answer, never a stale 304.
      const etag = listEtag(['tasks', ctx.user.id, ctx.lastEventSeq, page, ctx.baseUrl, cutoff.toISOString()]);
      if (notModified(ctx, etag)) return { data: [], links: pageLinks(ctx.baseUrl, LIST_PATH, page, size, 0), meta: STABILITY_META };
      const { tasks, total } = await listTasks(ctx.em, ctx.user.id, cutoff, size, offset);
      return {
        data: tasks.map(presentTaskFields),
        links: pageLinks(ctx.baseUrl, LIST_PATH, page, size, total),
        meta: STABILITY_META,
      };
    }),

  get: authedProcedure
    .meta({ openapi: { method: 'GET', path: '/api/tasks/{id}', tags: TAGS, summary: 'Get a task' }, resource: 'task' })
    .input(TaskIdInput)
    .output(TaskDocument)
    .query(async ({ ctx, input }) => {
      // One row read either way; a matching If-None-Match saves building and sending the body.
      const task = await ownedTask(ctx.em, ctx.user.id, input.id);
      if (!task) throw DomainError.notFound('task');
      notModified(ctx, taskEtag(task.id, task.version));
      return { data: presentTaskFields(task), meta: STABILITY_META };
    }),

  update: authedProcedure
    .meta({
      openapi: {
        method: 'PATCH', path: '/api/tasks/{id}', tags: TAGS,
        summary: 'Update a task',
        description: 'Changes the label (1 to 1,000 characters) or the project (`null` detaches). Changing the project re-syncs the state: a newed task starts when its project is started or gone; a started task returns to newed when its new project is not started.',
      },
      resource: 'task',
      errorCodes: ['parameter_missing', 'invalid', 'too_long', 'record_not_found'],
    })
    .input(UpdateTaskInput)
    .output(TaskDocument)
    .mutation(({ ctx, input }) =>
      userWrite(ctx, async (scope) => {
        const { em, userId, now, changes } = scope;
        const { label, project_id } = input.task;
        const task = await findOwnedTask(em, userId, input.id);
        if (label !== undefined) task.label = label;
        if (project_id !== undefined) {
          const before = task.projectId ?? null;
          task.moveToProject(project_id === null ? null : await findLinkedProject(em, userId, project_id), now);
          // The project the task left and the one it joined list their tasks in their documents.
          if (before !== (task.projectId ?? null)) {
            for (const id of [before, task.projectId]) if (id) changes.updated('project', id);
          }
        }
        return recordTask(scope, task);
      }),
    ),

  changeState: authedProcedure
    .meta({
      openapi: {
        method: 'PUT', path: '/api/tasks/{id}/state', tags: TAGS,
        summary: 'Change the state of a task',
        description: [
          'The requested state and the current one select the action:',
          '- start: newed → started (startedAt = now if unset)',
          '- plan: newed/started → planned (plannedAt = now, plannedCount + 1)',
          '- replan: planned/finished → planned (plannedAt = now, plannedCount + 1, finishedAt unset)',
          '- finish: planned → finished (finishedAt = now)',
          '- cancel: started/planned → newed (startedAt and plannedAt unset)',
          '- abandon: newed/started/planned → abandoned (abandonedAt = now)',
          'Anything else is `invalid_transition`; a member of `task` other than `state` is `cannot_be_set`.',
        ].join('\n'),
      },
      resource: 'task',
      errorCodes: ['parameter_missing', 'invalid', 'must_be_set', 'cannot_be_set', 'invalid_transition'],
    })
    .input(ChangeTaskStateInput)
    .use(keepDroppedMembers('task'))
    .output(TaskDocument)
    .mutation(({ ctx, input }) => {
      // The usual request, only `state` and not abandoning (which also changes the project's
      // document), is one statement, lock to commit, when the task's state allows it. Else,
      // or when it changed nothing, the work below runs and says why (404, invalid_transition,
      // cannot_be_set, in that order: Task.changeState).
      const onlyState = Object.keys(input.task).length === 1;
      const oneStatement = (now: Date): OneStatement<TaskAnswer> | null => {
        const changed = onlyState && input.task.state !== 'abandoned' ? taskStateChangeSql(input.id, input.task.state, now) : null;
        return changed && { resource: 'task', kind: 'updated', changed, ...TASK_ROW_ANSWER };
      };
      return userWrite(ctx, async (scope) => {
        const { em, userId, now, changes } = scope;
        const changed = onlyState ? await changeTaskState(em, userId, input.id, input.task.state, now) : null;
        if (changed) {
          const data = presentTaskFields(changed);
          changes.updated('task', changed.id, data);
          if (changed.state === 'abandoned' && changed.projectId) changes.updated('project', changed.projectId);
          scope.etag = () => taskEtag(changed.id, changed.version);
          return { data, meta: STABILITY_META };
        }
        const task = await findOwnedTask(em, userId, input.id);
        task.changeState(input.task, now);
        // An abandoned task leaves its project's list of tasks.
        if (task.state === 'abandoned' && task.projectId) changes.updated('project', task.projectId);
        return recordTask(scope, task);
      }, oneStatement);
    }),

  reorder: authedProcedure
    .meta({
      openapi: {
        method: 'PUT', path: '/api/tasks/{id}/order', tags: TAGS,
        summary: 'Move a task in the order',
        description: 'Moves the task to `order` (clamped to the highest order). Moving up shifts the tasks in between one place down; moving down shifts them one place up. Returns every task whose order changed, by order; not moving returns just the task.',
      },
      resource: 'task',
      errorCodes: ['parameter_missing', 'invalid'],
    })
    .input(ReorderTaskInput)
    .output(TaskOrderDocument)
    .mutation(({ ctx, input }) =>
      userWrite(ctx, async ({ em, userId, changes }) => {
        const move = await moveTask(em, userId, input.id, input.task.order);
        if (!move) throw DomainError.notFound('task');
        for (const task of move.moved) {
          changes.updated('task', task.id, presentTaskFields(task));
          // Projects list their tasks by order.
          if (task.projectId !== null) changes.updated('project', task.projectId);
        }
        return {
          data: move.changed.map(({ id, order }) => ({ type: 'task' as const, id, attributes: { order } })),
          meta: STABILITY_META,
        };
      }),
    ),
});
