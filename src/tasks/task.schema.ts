/** Wire shapes of tasks: inputs as SPEC.md §4 names them, outputs as SPEC.md 2.2. */
import { z } from 'zod';
import { PageLinks, StabilityMeta, ref } from '../core/envelope.js';
import { inputObject, integer, pageParam, strict, pathId, recordId, stateField, text, timestamp } from '../core/fields.js';
import { dayParam, listParam, pageSizeParam, searchParam, secondsParam, sortParam } from '../core/list-query.js';
import { TASK_STATES } from './task.lifecycle.js';

export const TASK_PAGE_SIZE = 50;

export const taskLabel = text({ min: 1, max: 1000, what: 'Label' });

export const CreateTaskInput = inputObject({
  task: z.object({
    label: taskLabel,
    planned_at: timestamp().optional(),
    project_id: recordId().nullable().optional(),
  }),
});

/** The states a task list can show: SPEC.md 4.6 never lists abandoned tasks. */
export const LISTED_TASK_STATES = ['newed', 'started', 'planned', 'finished'] as const;
/** What the task list sorts by (API-CONTRACT.md §12). */
export const TASK_SORTS = ['order', 'id', 'label', 'startedAt', 'plannedAt', 'finishedAt'] as const;

/**
 * The task list's query (API-CONTRACT.md §12): each member a REST query parameter, in the order links
 * repeat them. No input at all is page 1 of every listed task.
 */
export const ListTasksInput = z
  .object({
    page: pageParam,
    page_size: pageSizeParam(TASK_PAGE_SIZE),
    state: listParam(z.enum(LISTED_TASK_STATES), 'Keeps tasks in one of these states: a comma list of `newed`, `started`, `planned`, `finished` (on /trpc an array).', ['newed', 'started']),
    // Any positive id: one that is not the user's (or beyond every id) matches nothing.
    project_id: listParam(
      integer(1, Number.MAX_SAFE_INTEGER).nullable(),
      'Keeps tasks of one of these projects: a comma list of project ids and `none` for tasks of no project (on /trpc an array, `null` for none). An id that is not one of yours matches nothing.',
      [3, null],
    ),
    q: searchParam,
    planned_after: secondsParam('Keeps tasks planned at or after this Unix time (seconds); a task never planned never matches.'),
    planned_before: secondsParam('Keeps tasks planned before this Unix time (seconds); a task never planned never matches.'),
    planned_on: dayParam,
    sort: sortParam(TASK_SORTS, 'order'),
  })
  .prefault({});

export const TaskIdInput = inputObject({ id: pathId });

export const UpdateTaskInput = inputObject({
  id: pathId,
  task: z.object({
    label: taskLabel.optional(),
    project_id: recordId().nullable().optional().meta({ description: 'A project of the user, or null to detach.' }),
  }),
});

export const ChangeTaskStateInput = inputObject({
  id: pathId,
  // Loose, so that any other member reaches the entity's check (`cannot_be_set`); documented as closed.
  task: z.looseObject({ state: stateField(TASK_STATES) }).meta({ additionalProperties: false }),
});

export const ReorderTaskInput = inputObject({
  id: pathId,
  task: z.object({
    // Any integer from 1 (API-CONTRACT.md §5), beyond 2^53 too: above the highest order, it is clamped.
    // Number.isInteger, not multipleOf(1): zod's remainder allows 2.0000000000000004 through.
    order: strict(z.number().min(1).refine(Number.isInteger)).meta({
      type: 'integer',
      description: 'New position, from 1; a value above the highest order is clamped to it.',
    }),
  }),
});

const secondsField = z.int().meta({ description: 'Unix time in whole seconds; 0 when unset.' });

export const TaskResource = z.object({
  type: z.literal('task'),
  id: z.int(),
  attributes: z.object({
    label: z.string(),
    order: z.int(),
    plannedCount: z.int(),
    state: z.enum(TASK_STATES),
    startedAt: secondsField,
    plannedAt: secondsField,
    finishedAt: secondsField,
    abandonedAt: secondsField,
  }),
  relationships: z.object({
    user: z.object({ data: ref('user') }),
    project: z.object({ data: ref('project').nullable() }),
  }),
}).meta({ id: 'Task' });
export type TaskResource = z.infer<typeof TaskResource>;

export const TaskDocument = z.object({ data: TaskResource, meta: StabilityMeta });
export const TaskListDocument = z.object({ data: z.array(TaskResource), links: PageLinks, meta: StabilityMeta });

export const TaskOrderResource = z.object({
  type: z.literal('task'),
  id: z.int(),
  attributes: z.object({ order: z.int() }),
}).meta({ id: 'TaskOrder' });
export const TaskOrderDocument = z.object({ data: z.array(TaskOrderResource), meta: StabilityMeta });

