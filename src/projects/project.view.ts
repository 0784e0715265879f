/** Presents projects as SPEC.md 2.1 resources. */
import { toSeconds } from '../core/clock.js';
import type { Project } from './project.entity.js';
import { isInProgress, type ProjectState } from './project.lifecycle.js';
import type { ProjectResource } from './project.schema.js';

/** What a project resource shows, timestamps in whole seconds (0 when unset). */
export interface ProjectFields {
  id: number;
  userId: number;
  name: string;
  slug: string;
  description: string;
  state: ProjectState;
  startedAt: number;
  dueAt: number;
  pausedAt: number;
  finishedAt: number;
  /** Its tasks that are not abandoned, by order. */
  taskIds: readonly number[];
}

export function presentProject(project: Project, taskIds: readonly number[]): ProjectResource {
  return presentProjectFields({
    id: project.id,
    userId: project.userId,
    name: project.name,
    slug: project.slug,
    description: project.description,
    state: project.state,
    startedAt: toSeconds(project.startedAt),
    dueAt: toSeconds(project.dueAt),
    pausedAt: toSeconds(project.pausedAt),
    finishedAt: toSeconds(project.finishedAt),
    taskIds,
  });
}

export function presentProjectFields(project: ProjectFields): ProjectResource {
  return {
    type: 'project',
    id: project.id,
    attributes: {
      name: project.name,
      slug: project.slug,
      description: project.description,
      state: project.state,
      startedAt: project.startedAt,
      dueAt: project.dueAt,
      pausedAt: project.pausedAt,
      finishedAt: project.finishedAt,
      isInProgress: isInProgress(project.state),
    },
    relationships: {
      user: { data: { type: 'user', id: project.userId } },
      tasks: { data: project.taskIds.map((id) => ({ type: 'task' as const, id })) },
    },
  };
}
