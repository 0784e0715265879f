/** The resources a user's writes change, as the write path and the change log name them. */
export type Resource = 'project' | 'task';

/** What a path id may name: a resource of the change log, a webhook (API-CONTRACT.md §14) or a token (§16). */
export type PathResource = Resource | 'webhook' | 'token';

/**
 * The table of each path resource whose operations take a body: a body refused by its schema on
 * an id the user has no record of is 404 (src/core/procedures.ts). A token's operations take none.
 */
export const RECORD_TABLES: Partial<Record<PathResource, string>> = { project: 'projects', task: 'tasks', webhook: 'webhooks' };
