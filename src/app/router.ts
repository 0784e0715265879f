/** The whole API: one router, served at /trpc and, through trpc-to-openapi, under /api. */
import { accountSections } from './account-export.js';
import { batchProcedures } from '../batch/batch.router.js';
import { eventsRouter } from '../changes/events.router.js';
import { markNoInput } from '../core/fields.js';
import { applyOutputChecks, outputChecksFor } from '../core/output-checks.js';
import { applyAccess } from './scopes.js';
import { createCallerFactory, router } from '../core/trpc.js';
import { projectsRouter } from '../projects/projects.router.js';
import { tasksRouter } from '../tasks/tasks.router.js';
import { tokensRouter } from '../users/tokens.router.js';
import { usersRouter } from '../users/users.router.js';
import { webhooksRouter } from '../webhooks/webhooks.router.js';

export const appRouter = router({
  users: usersRouter(accountSections),
  tokens: tokensRouter,
  projects: projectsRouter,
  tasks: tasksRouter,
  batch: batchProcedures,
  events: eventsRouter,
  webhooks: webhooksRouter,
});

// What each operation needs of a token: the one table (src/app/scopes.ts).
applyAccess(appRouter._def.procedures as never);

// What an operation that takes no input is sent is no part of the call (src/core/fields.ts).
markNoInput(appRouter._def.procedures as never);

// Answers are checked against their schemas in tests and development, not in production.
applyOutputChecks(appRouter, outputChecksFor());

export type AppRouter = typeof appRouter;

export const createCaller = createCallerFactory(appRouter);
