/**
 * GET /api/users/me/export (tRPC `users.export`, API-CONTRACT.md §16): everything of the user
 * as one document, `{"user": …, "projects": [...], "tasks": [...], "webhooks": [...]}`, each
 * item the `data` its GET answers with (webhooks without their secrets, every task whatever
 * its state or age), or, asked for with `Accept: application/x-ndjson`, the same items one
 * JSON object a line: the user, then each project, task and webhook (each has its `type`).
 *
 * Consistency: every page is read in one REPEATABLE READ, read-only transaction on one
 * connection, so the document is one snapshot of the account (a task moved to another project
 * while the export runs is in one of them, never in both or neither). Each statement names the user
 * (the tables are keyed by (user_id, id) and sharded by user: each page goes to one node).
 *
 * Memory: the records are read in keyset pages by id (EXPORT_PAGE_SIZE at a time). The answer
 * is a StreamedAnswer that the door writes page by page, waiting for the socket to drain, so
 * what the process holds does not grow with the account: on REST in the form `Accept` asks
 * for, on /trpc as the JSON document inside tRPC's envelope (a call sent alone,
 * src/http/trpc-streamed.ts). Called otherwise (in a tRPC batch, or by `createCaller`), the
 * procedure answers the whole document: the same snapshot and items, held in memory once.
 */
import { IsolationLevel, type SqlEntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { ACCOUNT_SECTIONS, type AccountSectionName, type AccountSections, type PresentedRecord } from '../core/account-export.js';
import type { AuthedContext } from '../core/context.js';
import { StreamedAnswer } from '../core/streamed-answer.js';
import { UserResource, presentUser } from './user.schema.js';

/** Records read by one statement. */
export const EXPORT_PAGE_SIZE = 1_000;

export const NDJSON = 'application/x-ndjson';

/**
 * Text written at once, about: a page as one string (about 260 KB for 1,000 tasks) would be
 * allocated outside V8's young generation (strings above 128 KB are), where it stays until a
 * full collection, so every page would add to the process's memory until one runs. Chunks
 * this size die young.
 */
const CHUNK_CHARS = 32 * 1024;

/** The export's document, its items described by the sections' schemas. */
export function accountExportSchema(sections: AccountSections) {
  return z.object({
    user: UserResource,
    projects: z.array(sections.projects.item),
    tasks: z.array(sections.tasks.item),
    webhooks: z.array(sections.webhooks.item),
  });
}

export type AccountExport = z.infer<ReturnType<typeof accountExportSchema>>;

export type ExportForm = 'json' | 'ndjson';

/**
 * The form an `Accept` header asks for: NDJSON when it names `application/x-ndjson` with a
 * quality above 0 and above that of an `application/json` it also names; JSON otherwise (no
 * header, `*\/*`, anything else: JSON is the default, never a 406).
 */
export function exportFormOf(accept: string | undefined): ExportForm {
  if (!accept) return 'json';
  const quality = new Map<string, number>();
  for (const range of accept.split(',')) {
    const [type = '', ...parameters] = range.split(';').map((part) => part.trim().toLowerCase());
    const q = parameters.find((p) => /^q\s*=/.test(p));
    const value = q === undefined ? 1 : Number(q.slice(q.indexOf('=') + 1).trim());
    if (Number.isFinite(value)) quality.set(type, Math.max(quality.get(type) ?? 0, value));
  }
  const ndjson = quality.get(NDJSON) ?? 0;
  const json = quality.get('application/json');
  return ndjson > 0 && (json === undefined || ndjson > json) ? 'ndjson' : 'json';
}

interface Page {
  section: AccountSectionName;
  /** The first page of each section comes even when it is empty. */
  items: PresentedRecord[];
}

/**
 * The user's records, section after section, in pages by id, read in one snapshot. Lazy: the
 * transaction begins with the first page asked for, and ends (rolled back: it changed nothing)
 * after the last one, when a read fails, or when the consumer stops early (`return()`).
 */
async function* snapshotPages(em: SqlEntityManager, userId: number, sections: AccountSections): AsyncGenerator<Page> {
  const snapshot = em.fork();
  await snapshot.begin({ isolationLevel: IsolationLevel.REPEATABLE_READ, readOnly: true });
  try {
    for (const section of ACCOUNT_SECTIONS) {
      for (let after = 0; ; ) {
        const items = await sections[section].page(snapshot, userId, after, EXPORT_PAGE_SIZE);
        yield { section, items };
        if (items.length < EXPORT_PAGE_SIZE) break;
        after = items[items.length - 1]!.id;
      }
    }
  } finally {
    // A connection lost mid-way fails its rollback too: the driver has released it already,
    // and the error worth reporting is the read's.
    await snapshot.rollback().catch(() => undefined);
  }
}

/**
 * The document as JSON text, a chunk a page. The first chunk comes only once the first page
 * is read, so a database that cannot be reached fails the request before its answer starts.
 */
async function* jsonChunks(user: unknown, pages: AsyncIterable<Page>): AsyncGenerator<string> {
  let head = `{"user":${JSON.stringify(user)}`;
  let open: AccountSectionName | undefined;
  let written = 0;
  for await (const { section, items } of pages) {
    let chunk = head;
    head = '';
    if (section !== open) {
      chunk += `${open === undefined ? '' : ']'},${JSON.stringify(section)}:[`;
      open = section;
      written = 0;
    }
    for (const item of items) {
      chunk += (written++ === 0 ? '' : ',') + JSON.stringify(item);
      if (chunk.length >= CHUNK_CHARS) {
        yield chunk;
        chunk = '';
      }
    }
    if (chunk !== '') yield chunk;
  }
  yield ']}';
}

/** The same records as NDJSON: the user's line, then one line an item. */
async function* ndjsonChunks(user: unknown, pages: AsyncIterable<Page>): AsyncGenerator<string> {
  let head = `${JSON.stringify(user)}\n`;
  for await (const { items } of pages) {
    let chunk = head;
    head = '';
    for (const item of items) {
      chunk += `${JSON.stringify(item)}\n`;
      if (chunk.length >= CHUNK_CHARS) {
        yield chunk;
        chunk = '';
      }
    }
    if (chunk !== '') yield chunk;
  }
}

export async function exportAccount(ctx: AuthedContext, sections: AccountSections): Promise<AccountExport> {
  const user = presentUser(ctx.user);
  const pages = snapshotPages(ctx.em, ctx.user.id, sections);
  if (ctx.door === 'rest' || ctx.streamsJson) {
    const streamed =
      ctx.door === 'rest' && exportFormOf(ctx.header('accept')) === 'ndjson'
        ? new StreamedAnswer(NDJSON, { 'Content-Disposition': 'attachment; filename="export.ndjson"' }, ndjsonChunks(user, pages))
        : new StreamedAnswer('application/json; charset=utf-8', { 'Content-Disposition': 'attachment; filename="export.json"' }, jsonChunks(user, pages));
    // Not the document's value: the door writes it (src/http/rest.ts, src/http/trpc-streamed.ts),
    // and the output check lets it through (src/core/output-checks.ts).
    return streamed as unknown as AccountExport;
  }
  const document: AccountExport = { user, projects: [], tasks: [], webhooks: [] };
  for await (const { section, items } of pages) {
    for (const item of items) (document[section] as PresentedRecord[]).push(item);
  }
  return document;
}
