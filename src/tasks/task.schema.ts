/** Wire shapes of tasks: inputs as SPEC.md §4 names them, outputs as SPEC.md 2.2. */
import { z } from 'zod';
import { PageLinks, StabilityMeta, ref } from '../core/envelope.js';
import { inputObject, integer, pageParam, pathId, recordId, stateField, text, timestamp } from '../core/fields.js';
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

/** No input at all is page 1, on /trpc as on REST without `?page`. */
export const ListTasksInput = z.object({ page: pageParam }).prefault({});

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
    order: integer(1, Number.MAX_SAFE_INTEGER).meta({
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

