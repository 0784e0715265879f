/**
 * What the account's export (API-CONTRACT.md §16, `users.export`) reads besides the user: each
 * kind of record the user owns, as its GET shows it. The export is a use case of src/users/,
 * which sits below the features and imports none of them; the composition root
 * (src/app/account-export.ts) hands these sections in.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { z } from 'zod';

/** The sections of an export, in the order the document and its lines give them. */
export const ACCOUNT_SECTIONS = ['projects', 'tasks', 'webhooks'] as const;
export type AccountSectionName = (typeof ACCOUNT_SECTIONS)[number];

/** A presented record: the `data` document its GET answers with. */
export interface PresentedRecord {
  type: string;
  id: number;
}

export interface AccountSection {
  /** The schema of one item, the one of the `data` its GET answers with (it documents the export in openapi.json). */
  readonly item: z.ZodType<PresentedRecord>;
  /**
   * At most `limit` of the user's records whose id is above `after`, by id, each presented as
   * its GET presents it: every one the user has, whatever its state or age. One statement
   * naming the user (the tables are keyed by (user_id, id) and sharded by user).
   */
  page(em: SqlEntityManager, userId: number, after: number, limit: number): Promise<PresentedRecord[]>;
}

export type AccountSections = Readonly<Record<AccountSectionName, AccountSection>>;
