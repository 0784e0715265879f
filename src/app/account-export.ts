/**
 * What the account's export (src/users/export-account.ts) reads of each feature: its records
 * in keyset pages, presented by the code that presents them to their own GET (the project's
 * and task's `data` of GET /api/projects/{id} and /api/tasks/{id}, the webhook's of GET
 * /api/webhooks/{id}, which has no secret), handed in from here, the composition root:
 * src/users/ sits below the features and imports none of them.
 */
import type { AccountSections } from '../core/account-export.js';
import { ProjectResource } from '../projects/project.schema.js';
import { projectsAfter } from '../projects/project.store.js';
import { presentProjectFields } from '../projects/project.view.js';
import { TaskResource } from '../tasks/task.schema.js';
import { tasksAfter } from '../tasks/task.store.js';
import { presentTaskFields } from '../tasks/task.view.js';
import { WebhookResource } from '../webhooks/webhook.schema.js';
import { presentWebhook, webhooksAfter } from '../webhooks/webhook.store.js';

export const accountSections: AccountSections = {
  projects: {
    item: ProjectResource,
    page: async (em, userId, after, limit) => (await projectsAfter(em, userId, after, limit)).map(presentProjectFields),
  },
  tasks: {
    item: TaskResource,
    page: async (em, userId, after, limit) => (await tasksAfter(em, userId, after, limit)).map(presentTaskFields),
  },
  webhooks: {
    item: WebhookResource,
    page: async (em, userId, after, limit) => (await webhooksAfter(em, userId, after, limit)).map(presentWebhook),
  },
};
