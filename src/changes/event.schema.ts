/** Wire shapes of the change log (API-CONTRACT.md §10). */
import { z } from 'zod';
import { EVENT_ID } from '../core/errors.js';
import { ProjectResource } from '../projects/project.schema.js';
import { TaskResource } from '../tasks/task.schema.js';

export const EVENT_TYPES = ['project.created', 'project.updated', 'project.deleted', 'task.created', 'task.updated'] as const;

export const EventId = z.string().regex(EVENT_ID).meta({ description: 'An event id (opaque; increasing within your log).', example: '42' });

export const DeletedResource = z
  .object({ type: z.enum(['project', 'task']), id: z.int() })
  .meta({ id: 'DeletedResource', description: 'What a delete event carries: the type and id of the deleted resource.' });

export const ChangeEvent = z
  .object({
    id: z.string(),
    type: z.enum(EVENT_TYPES),
    data: z.union([ProjectResource, TaskResource, DeletedResource]),
    at: z.int().meta({ description: 'When the change committed, in Unix seconds.' }),
  })
  .meta({
    id: 'ChangeEvent',
    description: 'One change to your projects or tasks, carrying the resource\'s document after the change (for a delete, its type and id).',
  });
export type ChangeEvent = z.infer<typeof ChangeEvent>;

/** No input at all (a tRPC call without one) is no `after`, as a GET without a query is on REST. */
export const EventsInput = z
  .object({
    after: EventId.optional().meta({ description: 'The last event id you have; without it, the answer is empty and gives the newest id.' }),
  })
  .prefault({});

export const EventsPage = z.object({
  data: z.array(ChangeEvent),
  links: z.object({ next: z.string().optional() }),
  meta: z.object({ last_event_id: z.string().meta({ description: 'The id to pass as `after` next time.' }) }),
});

export const OnChangeInput = z
  .object({ lastEventId: EventId.nullish() })
  .optional();

export const StreamTicketDocument = z.object({
  data: z.object({
    type: z.literal('event_stream_ticket'),
    attributes: z.object({
      ticket: z.string(),
      expiresAt: z.int().meta({ description: 'Unix seconds; the ticket opens one stream before then.' }),
    }),
  }),
});

/** Page size of delta sync. */
export const EVENTS_PAGE_SIZE = 100;
