/** The resources a user's writes change, as the write path and the change log name them. */
export type Resource = 'project' | 'task';

/** What a path id may name: a resource of the change log, a webhook (API-CONTRACT.md §14) or a token (§16). */
export type PathResource = Resource | 'webhook' | 'token';
