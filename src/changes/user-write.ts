/**
 * The one way a user's projects and tasks are written. Every write procedure hands its work
 * to `userWrite`, which gives it, in this order:
 *
 * 1. A turn: at most WRITERS_PER_USER transactions of one user hold a database connection in
 *    this process at once; the others wait in memory (up to QUEUED_PER_USER of them, else
 *    503 at once), so one user's burst cannot fill the pool while its requests wait for
 *    that user's lock.
 * 2. One transaction that first takes the owner's row lock (always first: one lock order for
 *    every write of a user, so writes of one user never deadlock each other), bounded by
 *    LOCK_TIMEOUT (an overrun is 503 with Retry-After, not a pool held hostage).
 * 3. A ChangeSet the work fills with what it created, updated or deleted. Before commit the
 *    change log gets one event per entry, numbered under that same lock (so a user's event
 *    numbers commit in the order they were taken), and a NOTIFY that PostgreSQL delivers
 *    only on commit. A rolled-back write leaves no event; a committed one always has its
 *    events (API-CONTRACT.md §10).
 * 4. A retry of the whole transaction, bounded, on a deadlock or serialization failure with
 *    anything outside this scheme (logged at warn).
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { toSeconds } from '../core/clock.js';
import { DomainError } from '../core/errors.js';
import type { AuthedContext } from '../core/trpc.js';
import { presentProject } from '../projects/project.view.js';
import { Project } from '../projects/project.entity.js';
import { taskIdsOfProjects, tasksByIds } from '../tasks/task.store.js';
import { presentTaskFields } from '../tasks/task.view.js';
import { appendEvents, type NewEvent } from './event.store.js';

export const WRITERS_PER_USER = 2;
export const QUEUED_PER_USER = 200;
const LOCK_TIMEOUT_MS = 5_000;
const RETRIES = 3;

export type Resource = 'project' | 'task';
type Kind = 'created' | 'updated' | 'deleted';

interface Entry {
  resource: Resource;
  id: number;
  kind: Kind;
  /** The resource's `data` document after the change, when the work already has it. */
  document?: unknown;
}

/** What one write changed, in the order it happened; each resource once, with its last document. */
export class ChangeSet {
  readonly #entries = new Map<string, Entry>();

  created(resource: Resource, id: number, document?: unknown): void {
    this.#record({ resource, id, kind: 'created', document });
  }

  updated(resource: Resource, id: number, document?: unknown): void {
    this.#record({ resource, id, kind: 'updated', document });
  }

  /** Only projects are deleted (API-CONTRACT.md §6); a task is abandoned, an update. */
  deleted(resource: 'project', id: number): void {
    this.#record({ resource, id, kind: 'deleted' });
  }

  #record(entry: Entry): void {
    const key = `${entry.resource}:${entry.id}`;
    const before = this.#entries.get(key);
    // A resource created in this write stays "created"; a deleted one stays deleted.
    if (before?.kind === 'deleted') return;
    const kind = before?.kind === 'created' && entry.kind === 'updated' ? 'created' : entry.kind;
    this.#entries.set(key, { ...entry, kind });
  }

  get entries(): readonly Entry[] {
    return [...this.#entries.values()];
  }
}

export interface WriteScope {
  em: SqlEntityManager;
  userId: number;
  now: Date;
  changes: ChangeSet;
}

/** A FIFO of turns per user: WRITERS_PER_USER run, QUEUED_PER_USER wait, the rest are refused. */
class Turns {
  readonly #users = new Map<number, { running: number; waiting: Array<() => void> }>();

  async acquire(userId: number): Promise<() => void> {
    let user = this.#users.get(userId);
    if (!user) this.#users.set(userId, (user = { running: 0, waiting: [] }));
    if (user.running >= WRITERS_PER_USER) {
      if (user.waiting.length >= QUEUED_PER_USER) throw busy();
      await new Promise<void>((resolve) => user.waiting.push(resolve));
    } else {
      user.running++;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = user.waiting.shift();
      if (next) next(); // the turn passes on: `running` stays
      else if (--user.running === 0) this.#users.delete(userId);
    };
  }
}

const turns = new Turns();

function busy(): DomainError {
  return DomainError.of('service_unavailable', { detail: 'Too many writes of this user are waiting; retry shortly.' }).withRetryAfter(1);
}

function sqlState(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 8; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

export async function userWrite<T>(ctx: AuthedContext, work: (scope: WriteScope) => Promise<T>): Promise<T> {
  const release = await turns.acquire(ctx.user.id);
  try {
    for (let attempt = 1; ; attempt++) {
      try {
        return await ctx.em.fork().transactional(async (em) => {
          const scope: WriteScope = { em, userId: ctx.user.id, now: ctx.clock.now(), changes: new ChangeSet() };
          await lockOwner(em, scope.userId);
          const result = await work(scope);
          await em.flush();
          await appendEvents(em, scope.userId, await eventsOf(em, scope), scope.now);
          return result;
        });
      } catch (error) {
        const state = sqlState(error);
        if (state === '55P03') throw busy(); // lock_timeout: another process holds the lock too long
        if ((state === '40P01' || state === '40001') && attempt < RETRIES) {
          ctx.log?.warn({ err: error, attempt }, 'write retried after a deadlock or serialization failure');
          continue;
        }
        throw error;
      }
    }
  } finally {
    release();
  }
}

/**
 * The row lock that serialises a user's writes. `no key update`: excludes every other
 * holder of this lock, but not the key-share locks that inserts referencing the user take
 * (a login's token, a task's foreign-key check). The lock timeout is set in the same
 * statement (set_config runs before the row is locked), so it costs no round trip.
 */
async function lockOwner(em: SqlEntityManager, userId: number): Promise<void> {
  await em.execute(`select set_config('lock_timeout', '${LOCK_TIMEOUT_MS}ms', true), id from users where id = ? for no key update`, [userId]);
}

/** The change set as events, each carrying its resource's document after the change. */
async function eventsOf(em: SqlEntityManager, scope: WriteScope): Promise<NewEvent[]> {
  const entries = scope.changes.entries;
  if (entries.length === 0) return [];
  const missing = (resource: Resource) =>
    entries.filter((e) => e.resource === resource && e.kind !== 'deleted' && e.document === undefined).map((e) => e.id);
  const documents = new Map<string, unknown>();
  const taskIds = missing('task');
  if (taskIds.length > 0) {
    for (const task of await tasksByIds(em, taskIds)) documents.set(`task:${task.id}`, presentTaskFields(task));
  }
  const projectIds = missing('project');
  if (projectIds.length > 0) {
    const [projects, tasksOf] = [await em.find(Project, { id: { $in: projectIds } }), await taskIdsOfProjects(em, projectIds)];
    for (const project of projects) documents.set(`project:${project.id}`, presentProject(project, tasksOf.get(project.id) ?? []));
  }
  const at = toSeconds(scope.now);
  return entries.flatMap((e): NewEvent[] => {
    const type = `${e.resource}.${e.kind}`;
    if (e.kind === 'deleted') return [{ type, data: { type: e.resource, id: e.id }, at }];
    const data = e.document ?? documents.get(`${e.resource}:${e.id}`);
    // A change whose resource is gone would commit without its event: refuse the whole write.
    if (data === undefined) throw new Error(`${e.resource} ${e.id} changed in this write but cannot be read back`);
    return [{ type, data, at }];
  });
}
