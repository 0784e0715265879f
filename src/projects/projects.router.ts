/**
 * Projects of the current user (SPEC.md 4.1–4.4, API-CONTRACT.md §4 and §6): a table of procedures,
 * each its route, documentation, schemas and use case (a file beside this one); no logic lives here.
 */
import { z } from 'zod';
import { authedProcedure, keepDroppedMembers, routesUnder } from '../core/procedures.js';
import { router } from '../core/trpc.js';
import { write } from '../writes/write.js';
import { getProject } from './get-project.js';
import { updateProjectInputRules } from './project-input-rules.js';
import { PROJECTS_PATH, listProjects } from './list-projects.js';
import { describeProjectTransitions } from './project.lifecycle.js';
import {
  ChangeProjectStateInput, CreateProjectInput, ListProjectsInput, PROJECT_PAGE_SIZE, ProjectDocument, ProjectIdInput, ProjectListDocument,
  UpdateProjectInput,
} from './project.schema.js';

const route = routesUnder('projects', authedProcedure);

export const projectsRouter = router({
  create: route({
    method: 'POST', path: '/api/users/me/projects',
    summary: 'Create a project',
    description: 'Creates a project in state `newed` with an empty description and all timestamps 0. The name has 1 to 100 letters, digits, underscores or hyphens and is unique per user regardless of case.',
  }, { successStatus: 201, errorCodes: ['parameter_missing', 'invalid', 'too_long', 'taken'] })
    .input(CreateProjectInput)
    .output(ProjectDocument)
    .mutation(({ ctx, input }) => write(ctx, 'projects.create', input)),

  list: route({
    method: 'GET', path: PROJECTS_PATH,
    summary: 'List projects',
    description: [
      `The current user's projects, by id unless \`sort\` says otherwise, ${PROJECT_PAGE_SIZE} a page unless \`page_size\` says otherwise.`,
      'Filters combine (all must hold); a comma list keeps an item that matches one of its values. `links` keep every parameter and change only `page`; `last` counts the filtered projects. A page beyond the last has an empty `data`. A bad value of any parameter is 400 `invalid` on that parameter, every bad parameter reported.',
    ].join('\n\n'),
  }, { queryParameters: ['page', 'page_size', 'state', 'q', 'due_after', 'due_before', 'sort'] })
    .input(ListProjectsInput)
    .output(ProjectListDocument)
    .query(({ ctx, input }) => listProjects(ctx, input)),

  get: route({ method: 'GET', path: '/api/projects/{id}', summary: 'Get a project' }, { resource: 'project' })
    .input(ProjectIdInput)
    .output(ProjectDocument)
    .query(({ ctx, input }) => getProject(ctx, input)),

  update: route({
    method: 'PATCH', path: '/api/projects/{id}',
    summary: 'Update a project',
    description: 'Changes the name (rules of creation), the description (at most 10,000 characters) or `due_at`, which may change only while the project is started and not to before its start. A `due_at` equal to the current value (0 when unset) is no change and is accepted in any state.',
  }, {
    resource: 'project',
    errorCodes: ['parameter_missing', 'invalid', 'too_long', 'taken', 'cannot_be_set', 'cannot_be_before_started_at'],
    inputRules: updateProjectInputRules,
  })
    .input(UpdateProjectInput)
    .output(ProjectDocument)
    .mutation(({ ctx, input }) => write(ctx, 'projects.update', input)),

  changeState: route({
    method: 'PUT', path: '/api/projects/{id}/state',
    summary: 'Change the state of a project',
    description: [
      'Moves the project along its state machine (each line: the action, its move, its conditions, its effects):',
      ...describeProjectTransitions(),
      'Any other move is `invalid_transition`; `due_at` or `finished_at` where a line does not take it, and any other member of `project`, is `cannot_be_set`. Checks stop at the first failure: state missing, transition, must/cannot be set, dates, started limit.',
    ].join('\n'),
  }, {
    resource: 'project',
    errorCodes: ['parameter_missing', 'invalid', 'must_be_set', 'cannot_be_set', 'invalid_transition', 'cannot_be_before_started_at', 'cannot_be_after_today', 'reached_max_started'],
  })
    .input(ChangeProjectStateInput)
    .use(keepDroppedMembers('project'))
    .output(ProjectDocument)
    .mutation(({ ctx, input }) => write(ctx, 'projects.changeState', input)),

  delete: route({
    method: 'DELETE', path: '/api/projects/{id}',
    summary: 'Delete a project',
    description: 'Deletes the project. Its newed, started and planned tasks become abandoned; all its tasks lose their project.',
  }, { resource: 'project', successStatus: 204 })
    .input(ProjectIdInput)
    .output(z.void())
    .mutation(({ ctx, input }) => write(ctx, 'projects.delete', input)),
});
