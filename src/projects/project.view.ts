/** Presents projects as SPEC.md 2.1 resources. */
import { toSeconds } from '../core/clock.js';
import type { Project } from './project.entity.js';
import type { ProjectResource } from './project.schema.js';

export function presentProject(project: Project, taskIds: readonly number[]): ProjectResource {
  return {
    type: 'project',
    id: project.id,
    attributes: {
      name: project.name,
      slug: project.slug,
      description: project.description,
      state: project.state,
      startedAt: toSeconds(project.startedAt),
      dueAt: toSeconds(project.dueAt),
      pausedAt: toSeconds(project.pausedAt),
      finishedAt: toSeconds(project.finishedAt),
      isInProgress: project.isInProgress(),
    },
    relationships: {
      user: { data: { type: 'user', id: project.userId } },
      tasks: { data: taskIds.map((id) => ({ type: 'task' as const, id })) },
    },
  };
}
