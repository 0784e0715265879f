/**
 * The resources a user's writes change, as the write path and the change log name them, and
 * how the write path reads one back without knowing its feature: the composition root
 * (src/app/resources.ts) hands these readers in through the context, so the layers below
 * the features never import them.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';

export type Resource = 'project' | 'task';

/** What a path id may name: a resource of the change log, a webhook (API-CONTRACT.md §14) or a token (§16). */
export type PathResource = Resource | 'webhook' | 'token';

export interface ResourceReader {
  /** The `data` documents of these of the user's resources, by id (a missing one is absent). */
  documents(em: SqlEntityManager, userId: number, ids: readonly number[]): Promise<Map<number, unknown>>;
  /**
   * The resource's `data` document in SQL, over its row aliased `row` (a write made in one
   * statement builds its events so); for a project, `listedTaskIds` is the int[] expression of
   * its listed tasks, by order.
   */
  documentSql(row: string, listedTaskIds: string): string;
  /** The resource's current ETag, or null when the user has no such resource. */
  currentEtag(em: SqlEntityManager, userId: number, id: number): Promise<string | null>;
}

export type ResourceReaders = Readonly<Record<Resource, ResourceReader>>;
