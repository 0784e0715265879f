/**
 * The one table of what each operation needs of a token (API-CONTRACT.md §16), by procedure
 * path: the same operation on both doors, its REST route included (the event stream is
 * `events.list` with `Accept: text/event-stream`). The router takes it when it is made
 * (`applyAccess`), which fails on an operation without a row or a row without an operation;
 * authentication reads it from the procedure's meta (src/core/procedures.ts), and openapi.json
 * writes each operation's `security` from it (src/openapi/document.ts). Nothing else says
 * which scope an operation needs.
 *
 * A batch needs the scope of each of its operations, checked before any runs
 * (src/batch/batch.router.ts): its own row asks only for a token.
 */
import type { Access } from '../core/scopes.js';

export const ACCESS = {
  'users.register': 'public',
  'users.authorize': 'public',
  'users.me': 'token',
  'users.update': 'account',
  'users.revoke': 'token',
  'users.changePassword': 'account',
  'users.delete': 'account',
  'users.export': 'account',

  'tokens.create': 'tokens:manage',
  'tokens.list': 'tokens:manage',
  'tokens.get': 'tokens:manage',
  'tokens.revoke': 'tokens:manage',
  'tokens.current': 'token',

  'projects.create': 'projects:write',
  'projects.list': 'projects:read',
  'projects.get': 'projects:read',
  'projects.update': 'projects:write',
  'projects.changeState': 'projects:write',
  'projects.delete': 'projects:write',

  'tasks.create': 'tasks:write',
  'tasks.list': 'tasks:read',
  'tasks.get': 'tasks:read',
  'tasks.update': 'tasks:write',
  'tasks.changeState': 'tasks:write',
  'tasks.reorder': 'tasks:write',

  'batch.apply': 'token',

  'events.list': 'events:read',
  'events.onChange': 'events:read',
  'events.ticket': 'events:read',

  'webhooks.create': 'webhooks:manage',
  'webhooks.list': 'webhooks:manage',
  'webhooks.get': 'webhooks:manage',
  'webhooks.update': 'webhooks:manage',
  'webhooks.delete': 'webhooks:manage',
  'webhooks.deliveries': 'webhooks:manage',
  'webhooks.replay': 'webhooks:manage',
  'webhooks.test': 'webhooks:manage',
  'webhooks.rotateSecret': 'webhooks:manage',
} as const satisfies Record<string, Access>;

export type OperationPath = keyof typeof ACCESS;

interface ProcedureLike {
  _def: { meta?: { access?: Access } };
}

/**
 * Writes each procedure's row into its meta, once, where the router is made: every procedure
 * must have exactly one row, and every row a procedure.
 */
export function applyAccess(procedures: Record<string, ProcedureLike>, table: Readonly<Record<string, Access>> = ACCESS): void {
  const missing = Object.keys(procedures).filter((path) => !Object.hasOwn(table, path));
  const unknown = Object.keys(table).filter((path) => !Object.hasOwn(procedures, path));
  if (missing.length || unknown.length) {
    throw new Error(`src/app/scopes.ts: ${[...missing.map((p) => `${p} has no row`), ...unknown.map((p) => `${p} is no procedure`)].join('; ')}`);
  }
  for (const [path, procedure] of Object.entries(procedures)) {
    procedure._def.meta = { ...procedure._def.meta, access: table[path]! };
  }
}
