/** Tasks of the current user (SPEC.md 4.5–4.9, API-CONTRACT.md §5). */
import { LockMode, type SqlEntityManager } from '@mikro-orm/postgresql';
import { STABILITY_META, pageLinks, pageOf } from '../core/envelope.js';
import { daysBefore, fromSeconds, startOfUtcDay } from '../core/clock.js';
import { DomainError } from '../core/errors.js';
import { authedProcedure, keepDroppedMembers, router } from '../core/trpc.js';
import { Project } from '../projects/project.entity.js';
import { lockOwner } from '../users/owner-lock.js';
import { Task } from './task.entity.js';
import { initialTaskState } from './task.lifecycle.js';
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
  UpdateTaskInput,
} from './task.schema.js';
import { insertTask, listTasks, moveTask } from './task.store.js';
import { presentTask, presentTaskFields } from './task.view.js';

const TAGS = ['tasks'];
const LIST_PATH = '/api/users/me/tasks';
/** Finished tasks stay listed for this many UTC days. */
const FINISHED_LISTED_DAYS = 14;

async function findOwnedTask(em: SqlEntityManager, userId: number, id: number, lockMode?: LockMode): Promise<Task> {
  const task = await em.findOne(Task, { id, userId }, lockMode === undefined ? {} : { lockMode });
  if (!task) throw DomainError.notFound('task');
  return task;
}

/** The project a task names in its body, which must be one of the user's. */
async function findLinkedProject(em: SqlEntityManager, userId: number, id: number) {
  const project = await em.findOne(Project, { id, userId }, { fields: ['id', 'state'] });
  if (!project) {
    throw DomainError.validation('record_not_found', '/task/project_id', 'No project with this id exists for the current user.');
  }
  return { id: project.id, started: project.state === 'started' };
}

function taskDocument(task: Task) {
  return { data: presentTask(task), meta: STABILITY_META };
}

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
    .mutation(async ({ ctx, input }) =>
      ctx.em.transactional(async (em) => {
        const { label, planned_at, project_id } = input.task;
        // The owner's lock first: the project's state cannot change until this task exists,
        // so a task is never left newed under a project that started meanwhile.
        await lockOwner(em, ctx.user.id);
        const project = project_id == null ? null : await findLinkedProject(em, ctx.user.id, project_id);
        const state = initialTaskState({ plannedAt: planned_at !== undefined, project });
        const now = ctx.clock.now();
        const task = await insertTask(em, {
          userId: ctx.user.id,
          projectId: project?.id ?? null,
          label,
          plannedCount: state === 'planned' ? 1 : 0,
          state,
          startedAt: state === 'newed' ? null : now,
          plannedAt: planned_at === undefined ? null : fromSeconds(planned_at),
          createdAt: now,
        });
        return { data: presentTaskFields(task), meta: STABILITY_META };
      }),
    ),

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
    .query(async ({ ctx, input }) => taskDocument(await findOwnedTask(ctx.em, ctx.user.id, input.id))),

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
    .mutation(async ({ ctx, input }) => {
      const { label, project_id } = input.task;
      if (project_id === undefined) {
        const task = await findOwnedTask(ctx.em, ctx.user.id, input.id);
        if (label !== undefined) task.label = label;
        await ctx.em.flush();
        return taskDocument(task);
      }
      // A state re-sync reads the project's state: hold the owner's lock, as state changes do.
      return ctx.em.transactional(async (em) => {
        await lockOwner(em, ctx.user.id);
        // Locked too: a state change of this task (which takes only the task's lock) waits.
        const task = await findOwnedTask(em, ctx.user.id, input.id, LockMode.PESSIMISTIC_WRITE);
        if (label !== undefined) task.label = label;
        const project = project_id === null ? null : await findLinkedProject(em, ctx.user.id, project_id);
        task.moveToProject(project, ctx.clock.now());
        await em.flush();
        return taskDocument(task);
      });
    }),

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
    .mutation(async ({ ctx, input }) =>
      // The task's row is locked while its state is read and written: two changes of one task
      // (or a change and its project's start or pause) apply one after the other, each to
      // what the other left, so no plannedCount or date is lost or left inconsistent.
      ctx.em.transactional(async (em) => {
        const task = await findOwnedTask(em, ctx.user.id, input.id, LockMode.PESSIMISTIC_WRITE);
        task.changeState(input.task, ctx.clock.now());
        await em.flush();
        return taskDocument(task);
      }),
    ),

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
    .mutation(async ({ ctx, input }) =>
      ctx.em.transactional(async (em) => {
        // The lock, then one statement: the lock is held for two round trips.
        await lockOwner(em, ctx.user.id);
        const changed = await moveTask(em, ctx.user.id, input.id, input.task.order);
        if (!changed) throw DomainError.notFound('task');
        return {
          data: changed.map(({ id, order }) => ({ type: 'task' as const, id, attributes: { order } })),
          meta: STABILITY_META,
        };
      }),
    ),
});
