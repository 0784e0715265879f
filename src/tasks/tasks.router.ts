/**
 * Tasks of the current user (SPEC.md 4.5–4.9, API-CONTRACT.md §5): a table of procedures, each with its REST
 * route and documentation, its schemas, and the use case that serves it (a file beside this one); no logic.
 */
import { authedProcedure, keepDroppedMembers, routesUnder } from '../core/procedures.js';
import { router } from '../core/trpc.js';
import { write } from '../writes/write.js';
import { getTask } from './get-task.js';
import { linkedProjectInputRules } from './linked-project-rule.js';
import { FINISHED_LISTED_DAYS, TASKS_PATH, TASK_LIST_PARAMETERS, listTasks } from './list-tasks.js';
import { describeTaskActions } from './task.lifecycle.js';
import {
  ChangeTaskStateInput, CreateTaskInput, ListTasksInput, ReorderTaskInput, TASK_PAGE_SIZE, TaskDocument, TaskIdInput, TaskListDocument,
  TaskOrderDocument, UpdateTaskInput,
} from './task.schema.js';

const route = routesUnder('tasks', authedProcedure);

export const tasksRouter = router({
  create: route({
    method: 'POST', path: TASKS_PATH,
    summary: 'Create a task',
    description: [
      'Creates a task at the end of the user\'s order. Initial state, in this order:',
      '1. `planned_at` given: planned, plannedCount 1, plannedAt = planned_at.',
      '2. `project_id` names a project that is not started: newed.',
      '3. Otherwise (started project, or none): started.',
    ].join('\n'),
  }, { successStatus: 201, errorCodes: ['parameter_missing', 'invalid', 'too_long', 'record_not_found'], inputRules: linkedProjectInputRules })
    .input(CreateTaskInput)
    .output(TaskDocument)
    .mutation(({ ctx, input }) => write(ctx, 'tasks.create', input)),

  list: route({
    method: 'GET', path: TASKS_PATH,
    summary: 'List tasks',
    description: [
      `The current user's tasks, by order unless \`sort\` says otherwise, ${TASK_PAGE_SIZE} a page unless \`page_size\` says otherwise. Abandoned tasks and tasks finished before the user's day ${FINISHED_LISTED_DAYS} days ago (in the user's time zone) are never listed: the filters only narrow that.`,
      'Filters combine (all must hold); a comma list keeps an item that matches one of its values. `links` keep every parameter and change only `page`; `last` counts the filtered tasks. A page beyond the last has an empty `data`. A bad value of any parameter is 400 `invalid` on that parameter, every bad parameter reported.',
    ].join('\n\n'),
  }, { queryParameters: ['page', ...TASK_LIST_PARAMETERS] })
    .input(ListTasksInput)
    .output(TaskListDocument)
    .query(({ ctx, input }) => listTasks(ctx, input)),

  get: route({ method: 'GET', path: '/api/tasks/{id}', summary: 'Get a task' }, { resource: 'task' })
    .input(TaskIdInput)
    .output(TaskDocument)
    .query(({ ctx, input }) => getTask(ctx, input)),

  update: route({
    method: 'PATCH', path: '/api/tasks/{id}',
    summary: 'Update a task',
    description: 'Changes the label (1 to 1,000 characters) or the project (`null` detaches). Changing the project re-syncs the state: a newed task starts when its project is started or gone; a started task returns to newed when its new project is not started.',
  }, { resource: 'task', errorCodes: ['parameter_missing', 'invalid', 'too_long', 'record_not_found'], inputRules: linkedProjectInputRules })
    .input(UpdateTaskInput)
    .output(TaskDocument)
    .mutation(({ ctx, input }) => write(ctx, 'tasks.update', input)),

  changeState: route({
    method: 'PUT', path: '/api/tasks/{id}/state',
    summary: 'Change the state of a task',
    description: [
      'The requested state and the current one select the action:',
      ...describeTaskActions(),
      'Anything else is `invalid_transition`; a member of `task` other than `state` is `cannot_be_set`.',
    ].join('\n'),
  }, {
    resource: 'task',
    errorCodes: ['parameter_missing', 'invalid', 'must_be_set', 'cannot_be_set', 'invalid_transition'],
  })
    .input(ChangeTaskStateInput)
    .use(keepDroppedMembers('task'))
    .output(TaskDocument)
    .mutation(({ ctx, input }) => write(ctx, 'tasks.changeState', input)),

  reorder: route({
    method: 'PUT', path: '/api/tasks/{id}/order',
    summary: 'Move a task in the order',
    description: 'Moves the task to `order` (clamped to the highest order). Moving up shifts the tasks in between one place down; moving down shifts them one place up. Returns every task whose order changed, by order; not moving returns just the task.',
  }, { resource: 'task', errorCodes: ['parameter_missing', 'invalid'] })
    .input(ReorderTaskInput)
    .output(TaskOrderDocument)
    .mutation(({ ctx, input }) => write(ctx, 'tasks.reorder', input)),
});
