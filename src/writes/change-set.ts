/**
 * What one write changed, and the change log's events it makes (API-CONTRACT.md §10): each
 * resource once, in the order it was first changed, with its document after the change.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { toSeconds } from '../core/clock.js';
import type { Resource, ResourceReaders } from '../core/resource.js';
import type { NewEvent } from './event-append.js';

type Kind = 'created' | 'updated' | 'deleted';

interface Entry {
  resource: Resource;
  id: number;
  kind: Kind;
  /** The resource's `data` document after the change, when the work already has it. */
  document?: unknown;
}

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

  /**
   * The changes as events, each carrying its resource's document after the change: the work's
   * own, or read back through the resource's reader (one statement per kind of resource).
   */
  async events(readers: ResourceReaders, em: SqlEntityManager, userId: number, now: Date): Promise<NewEvent[]> {
    const entries = [...this.#entries.values()];
    if (entries.length === 0) return [];
    const documents = new Map<string, unknown>();
    for (const resource of ['task', 'project'] as const) {
      const ids = entries.filter((e) => e.resource === resource && e.kind !== 'deleted' && e.document === undefined).map((e) => e.id);
      if (ids.length === 0) continue;
      for (const [id, document] of await readers[resource].documents(em, userId, ids)) documents.set(`${resource}:${id}`, document);
    }
    const at = toSeconds(now);
    return entries.map((e): NewEvent => {
      const type = `${e.resource}.${e.kind}`;
      if (e.kind === 'deleted') return { type, data: { type: e.resource, id: e.id }, at };
      const data = e.document ?? documents.get(`${e.resource}:${e.id}`);
      // A change whose resource is gone would commit without its event: refuse the whole write.
      if (data === undefined) throw new Error(`${e.resource} ${e.id} changed in this write but cannot be read back`);
      return { type, data, at };
    });
  }
}
