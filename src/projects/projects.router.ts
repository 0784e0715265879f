/** Projects of the current user (SPEC.md 4.1–4.4, API-CONTRACT.md §4 and §6). */
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { STABILITY_META, pageLinks, pageOf } from '../core/envelope.js';
import { listEtag, notModified, projectEtag } from '../core/conditional.js';
import { DomainError, ValidationErrors } from '../core/errors.js';
import { authedProcedure, keepDroppedMembers, router } from '../core/trpc.js';
import { userWrite, type WriteScope } from '../writes/user-write.js';
import { PROJECT_DELETED } from '../tasks/task.lifecycle.js';
import { applyToProjectTasks, taskIdsOfProjects } from '../tasks/task.store.js';
import { Project, slugOf } from './project.entity.js';
import {
  ChangeProjectStateInput,
  CreateProjectInput,
  ListProjectsInput,
  PROJECT_PAGE_SIZE,
  ProjectDocument,
  ProjectIdInput,
  ProjectListDocument,
  UpdateProjectInput,
} from './project.schema.js';
import { presentProject, presentProjectFields } from './project.view.js';
import { listProjects, projectsByIds } from './project.store.js';
import { MAX_STARTED_PROJECTS } from './project.lifecycle.js';

const TAGS = ['projects'];
const LIST_PATH = '/api/users/me/projects';

async function findOwnedProject(em: SqlEntityManager, userId: number, id: number): Promise<Project> {
  const project = await em.findOne(Project, { id, userId });
  if (!project) throw DomainError.notFound('project');
  return project;
}

/** A project's document and its ETag (which covers the task ids the document lists). */
async function projectDocument(em: SqlEntityManager, project: Project) {
  const taskIds = (await taskIdsOfProjects(em, [project.id])).get(project.id) ?? [];
  return {
    document: { data: presentProject(project, taskIds), meta: STABILITY_META },
    etag: projectEtag(project.id, project.version, taskIds),
  };
}

/** A changed project's document, recorded in the write's change set and returned with its ETag. */
async function recordProject(scope: WriteScope, project: Project) {
  const { document, etag } = await projectDocument(scope.em, project);
  scope.changes.updated('project', project.id, document.data);
  scope.etag = () => etag;
  return document;
}

function takenName(): DomainError {
  return DomainError.validation('taken', '/project/name', 'Project name already exists for this user.');
}

/** Flushes, reporting a name that became taken since it was checked as `taken`. */
async function flushNamed(em: SqlEntityManager): Promise<void> {
  try {
    await em.flush();
  } catch (error) {
    if (error instanceof UniqueConstraintViolationException) throw takenName();
    throw error;
  }
}

async function isNameTaken(em: SqlEntityManager, userId: number, name: string, exceptId?: number): Promise<boolean> {
  const where = exceptId === undefined ? { userId, slug: slugOf(name) } : { userId, slug: slugOf(name), id: { $ne: exceptId } };
  return (await em.count(Project, where)) > 0;
}

export const projectsRouter = router({
  create: authedProcedure
    .meta({
      openapi: {
        method: 'POST', path: '/api/users/me/projects', tags: TAGS,
        summary: 'Create a project',
        description: 'Creates a project in state `newed` with an empty description and all timestamps 0. The name has 1 to 100 letters, digits, underscores or hyphens and is unique per user regardless of case.',
      },
      successStatus: 201,
      errorCodes: ['parameter_missing', 'invalid', 'too_long', 'taken'],
    })
    .input(CreateProjectInput)
    .output(ProjectDocument)
    .mutation(({ ctx, input }) =>
      userWrite(ctx, async (scope) => {
        const { em, userId, now, changes } = scope;
        const { name } = input.project;
        if (await isNameTaken(em, userId, name)) throw takenName();
        const project = em.create(Project, { userId, name, slug: slugOf(name), description: '', state: 'newed', createdAt: now });
        await flushNamed(em);
        const data = presentProject(project, []);
        scope.etag = () => projectEtag(project.id, project.version, []);
        changes.created('project', project.id, data);
        return { data, meta: STABILITY_META };
      }),
    ),

  list: authedProcedure
    .meta({
      openapi: {
        method: 'GET', path: LIST_PATH, tags: TAGS,
        summary: 'List projects',
        description: `The current user's projects by id, ${PROJECT_PAGE_SIZE} a page. A page beyond the last has an empty \`data\`.`,
      },
      queryParameters: ['page'],
    })
    .input(ListProjectsInput)
    .output(ProjectListDocument)
    .query(async ({ ctx, input }) => {
      const { page, size, offset } = pageOf(input.page, PROJECT_PAGE_SIZE);
      // Known before the page is read (see the task list): a matching If-None-Match is 304
      // after the token's statement alone.
      const etag = listEtag(['projects', ctx.user.id, ctx.lastEventSeq, page, ctx.baseUrl]);
      if (notModified(ctx, etag)) return { data: [], links: pageLinks(ctx.baseUrl, LIST_PATH, page, size, 0), meta: STABILITY_META };
      const { projects, total } = await listProjects(ctx.em, ctx.user.id, size, offset);
      return {
        data: projects.map(presentProjectFields),
        links: pageLinks(ctx.baseUrl, LIST_PATH, page, size, total),
        meta: STABILITY_META,
      };
    }),

  get: authedProcedure
    .meta({ openapi: { method: 'GET', path: '/api/projects/{id}', tags: TAGS, summary: 'Get a project' }, resource: 'project' })
    .input(ProjectIdInput)
    .output(ProjectDocument)
    .query(async ({ ctx, input }) => {
      // The tag needs the row and the task ids, which are the whole document (one statement):
      // a matching If-None-Match saves the body on the wire, not the read.
      const [project] = await projectsByIds(ctx.em, [input.id], ctx.user.id);
      if (!project) throw DomainError.notFound('project');
      notModified(ctx, projectEtag(project.id, project.version, project.taskIds));
      return { data: presentProjectFields(project), meta: STABILITY_META };
    }),

  update: authedProcedure
    .meta({
      openapi: {
        method: 'PATCH', path: '/api/projects/{id}', tags: TAGS,
        summary: 'Update a project',
        description: 'Changes the name (rules of creation), the description (at most 10,000 characters) or `due_at`, which may change only while the project is started and not to before its start. A `due_at` equal to the current value (0 when unset) is no change and is accepted in any state.',
      },
      resource: 'project',
      errorCodes: ['parameter_missing', 'invalid', 'too_long', 'taken', 'cannot_be_set', 'cannot_be_before_started_at'],
    })
    .input(UpdateProjectInput)
    .output(ProjectDocument)
    .mutation(({ ctx, input }) =>
      userWrite(ctx, async (scope) => {
        const { em, userId } = scope;
        const project = await findOwnedProject(em, userId, input.id);
        const { name, description, due_at } = input.project;
        const problems = new ValidationErrors();
        if (name !== undefined) {
          if (await isNameTaken(em, userId, name, project.id)) problems.errors.push(...takenName().errors);
          else project.rename(name);
        }
        if (description !== undefined) project.description = description;
        if (due_at !== undefined) problems.collect(() => project.changeDueAt(due_at));
        problems.throwIfAny();
        await flushNamed(em);
        return recordProject(scope, project);
      }),
    ),

  changeState: authedProcedure
    .meta({
      openapi: {
        method: 'PUT', path: '/api/projects/{id}/state', tags: TAGS,
        summary: 'Change the state of a project',
        description: [
          'Moves the project along its state machine:',
          `- newed → started (start): \`due_at\` required and after today; fewer than ${MAX_STARTED_PROJECTS} started projects. Sets startedAt and dueAt; the project's newed tasks start.`,
          '- started → paused (pause): sets pausedAt; the project\'s started tasks go back to newed.',
          `- paused → started (restart): \`due_at\` optional, after today; fewer than ${MAX_STARTED_PROJECTS} started projects. Unsets pausedAt; newed tasks start.`,
          '- started → finished (finish): `finished_at` optional, between startedAt and today; defaults to now.',
          'Any other move is `invalid_transition`. Checks stop at the first failure: state missing, transition, must/cannot be set, dates, started limit.',
        ].join('\n'),
      },
      resource: 'project',
      errorCodes: ['parameter_missing', 'invalid', 'must_be_set', 'cannot_be_set', 'invalid_transition', 'cannot_be_before_started_at', 'cannot_be_after_today', 'reached_max_started'],
    })
    .input(ChangeProjectStateInput)
    .use(keepDroppedMembers('project'))
    .output(ProjectDocument)
    .mutation(({ ctx, input }) =>
      // The owner's lock (taken first by every write) keeps the count of started projects
      // true until this one commits, across every server process.
      userWrite(ctx, async (scope) => {
        const { em, userId, now, changes } = scope;
        const project = await findOwnedProject(em, userId, input.id);
        const transition = await project.changeState(input.project, {
          now,
          startedProjects: () => em.count(Project, { userId, state: 'started' }),
        });
        await em.flush();
        changes.updated('project', project.id); // first: its tasks' events follow it
        if (transition.tasks) {
          for (const id of await applyToProjectTasks(em, project.id, transition.tasks, now)) changes.updated('task', id);
        }
        return recordProject(scope, project);
      }),
    ),

  delete: authedProcedure
    .meta({
      openapi: {
        method: 'DELETE', path: '/api/projects/{id}', tags: TAGS,
        summary: 'Delete a project',
        description: 'Deletes the project. Its newed, started and planned tasks become abandoned; all its tasks lose their project.',
      },
      resource: 'project',
      successStatus: 204,
    })
    .input(ProjectIdInput)
    .output(z.void())
    .mutation(async ({ ctx, input }) => {
      await userWrite(ctx, async ({ em, userId, now, changes }) => {
        const project = await findOwnedProject(em, userId, input.id);
        changes.deleted('project', project.id);
        // Under the owner's lock no task can join the project between release and delete.
        const released = await applyToProjectTasks(em, project.id, PROJECT_DELETED, now, { detach: true });
        for (const id of released) changes.updated('task', id);
        em.remove(project);
      });
    }),
});
