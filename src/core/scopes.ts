/**
 * What a token may do (API-CONTRACT.md §16): the scopes, what each grants, and the refusal of a
 * token without the scope an operation needs. Which operation needs which scope is one table,
 * src/app/scopes.ts, beside the router; this file is the vocabulary both doors and openapi.json
 * read.
 */
import { DomainError } from './errors.js';

export const SCOPES = [
  'projects:read',
  'projects:write',
  'tasks:read',
  'tasks:write',
  'events:read',
  'webhooks:manage',
  'tokens:manage',
  'account',
] as const;
export type Scope = (typeof SCOPES)[number];

/** Scopes only a session token gives: a personal token never makes a token with them. */
export const SESSION_ONLY_SCOPES: readonly Scope[] = ['tokens:manage', 'account'];

/**
 * What an operation needs: a scope; `token`, any valid token (who am I, log out, the token in
 * use: a token may always see and end itself); `public`, no token (register, log in).
 */
export type Access = Scope | 'token' | 'public';

/** `:write` includes `:read` of the same resource. */
const IMPLIED: Partial<Record<Scope, Scope>> = { 'projects:read': 'projects:write', 'tasks:read': 'tasks:write' };

/** Whether a token with `scopes` (null: a session, every scope) may do what needs `access`. */
export function allows(scopes: readonly string[] | null, access: Access): boolean {
  if (access === 'public' || access === 'token' || scopes === null) return true;
  const wider = IMPLIED[access];
  return scopes.includes(access) || (wider !== undefined && scopes.includes(wider));
}

/** Every scope a token with `scopes` has, the implied ones included (null: a session). */
export function effectiveScopes(scopes: readonly string[] | null): Scope[] {
  return SCOPES.filter((scope) => allows(scopes, scope));
}

/**
 * 403 insufficient_scope (RFC 6750 §3.1): the header names the scope that was missing, and so
 * does `meta.required_scope`.
 */
export function insufficientScope(scope: Scope, detail?: string): DomainError {
  return DomainError.of('insufficient_scope', { detail: detail ?? `This token does not have the scope ${scope}.` })
    .withHeader('WWW-Authenticate', `Bearer error="insufficient_scope", scope="${scope}"`)
    .withMeta({ required_scope: scope });
}
