/**
 * How the write path reads back each resource a write changed (its document for the change
 * log's event, its ETag for If-Match), handed in through the context from here, the
 * composition root: src/writes/ sits below the features and imports none of them.
 */
import type { ResourceReaders } from '../core/resource.js';
import { projectReader } from '../projects/project.store.js';
import { taskReader } from '../tasks/task.store.js';

export const resources: ResourceReaders = { task: taskReader, project: projectReader };
