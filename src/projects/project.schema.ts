/** Wire shapes of projects: inputs as SPEC.md §4 names them, outputs as SPEC.md 2.1. */
import { z } from 'zod';
import { PageLinks, StabilityMeta, ref } from '../core/envelope.js';
import { inputObject, pageParam, pathId, stateField, text, timestamp } from '../core/fields.js';
import { listParam, pageSizeParam, searchParam, secondsParam, sortParam } from '../core/list-query.js';
import { PROJECT_STATES, REQUESTABLE_PROJECT_STATES } from './project.lifecycle.js';

export const PROJECT_PAGE_SIZE = 25;

export const projectName = text({
  min: 1, max: 100, pattern: /^[A-Za-z0-9_\-]+$/, what: 'Project name',
  patternDetail: 'Project name may contain only letters, digits, underscores and hyphens.',
});
export const projectDescription = text({ max: 10_000, what: 'Description' });
/** A project's `due_at` as an edit sends it. */
export const dueAtField = timestamp();

export const CreateProjectInput = inputObject({ project: z.object({ name: projectName }) });

/** What the project list sorts by (API-CONTRACT.md §12). */
export const PROJECT_SORTS = ['id', 'name', 'dueAt', 'startedAt'] as const;

/** The project list's query (API-CONTRACT.md §12), one member a REST parameter; no input at all is page 1 of every project. */
export const ListProjectsInput = z
  .object({
    page: pageParam,
    page_size: pageSizeParam(PROJECT_PAGE_SIZE),
    state: listParam(z.enum(PROJECT_STATES), 'Keeps projects in one of these states: a comma list of `newed`, `started`, `paused`, `finished` (on /trpc an array).', ['started', 'paused']),
    q: searchParam,
    due_after: secondsParam('Keeps projects due at or after this Unix time (seconds); a project without a due date never matches.'),
    due_before: secondsParam('Keeps projects due before this Unix time (seconds); a project without a due date never matches.'),
    sort: sortParam(PROJECT_SORTS, 'id'),
  })
  .prefault({});

export const ProjectIdInput = inputObject({ id: pathId });

export const UpdateProjectInput = inputObject({
  id: pathId,
  project: z.object({
    name: projectName.optional(),
    description: projectDescription.optional(),
    due_at: dueAtField.optional(),
  }),
});

export const ChangeProjectStateInput = inputObject({
  id: pathId,
  // Loose, so that any other member reaches the entity's check and is refused as
  // `cannot_be_set` on its own pointer; documented as closed, which is what clients see.
  project: z
    .looseObject({
      state: stateField(REQUESTABLE_PROJECT_STATES),
      due_at: timestamp().optional(),
      finished_at: timestamp().optional(),
    })
    .meta({ additionalProperties: false }),
});

const secondsField = z.int().meta({ description: 'Unix time in whole seconds; 0 when unset.' });

export const ProjectResource = z.object({
  type: z.literal('project'),
  id: z.int(),
  attributes: z.object({
    name: z.string(),
    slug: z.string(),
    description: z.string(),
    state: z.enum(PROJECT_STATES),
    startedAt: secondsField,
    dueAt: secondsField,
    pausedAt: secondsField,
    finishedAt: secondsField,
    isInProgress: z.boolean(),
  }),
  relationships: z.object({
    user: z.object({ data: ref('user') }),
    tasks: z.object({ data: z.array(ref('task')) }),
  }),
}).meta({ id: 'Project' });
export type ProjectResource = z.infer<typeof ProjectResource>;

export const ProjectDocument = z.object({ data: ProjectResource, meta: StabilityMeta });
export const ProjectListDocument = z.object({ data: z.array(ProjectResource), links: PageLinks, meta: StabilityMeta });
