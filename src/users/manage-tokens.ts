/**
 * Access tokens as their user manages them (API-CONTRACT.md §16): personal tokens made with
 * their scopes, the live tokens listed (sessions too), one read or revoked by its id, the one in
 * use. Every statement names the user, so another user's token is never found, and a database
 * split by user answers each from one node.
 */
import type { z } from 'zod';
import { fromSeconds, toSeconds } from '../core/clock.js';
import type { AuthedContext } from '../core/context.js';
import { pageLinks, pageOf } from '../core/envelope.js';
import { linkQuery } from '../core/list-query.js';
import { DomainError, apiError, type ApiError } from '../core/errors.js';
import { timestamp } from '../core/fields.js';
import { SESSION_ONLY_SCOPES, allows, effectiveScopes, insufficientScope, type Scope } from '../core/scopes.js';
import { textArray } from '../db/sql-fragments.js';
import { plainWrite } from '../writes/user-write.js';
import { hashAccessToken, newPersonalToken } from './credentials.js';
import { announceRevoked } from './revocation.js';
import {
  MAX_PERSONAL_TOKENS, MAX_TOKEN_DAYS, TOKENS_PAGE_SIZE, type CreateTokenInput, type TokenListInput, type TokenResource,
} from './token.schema.js';

export const TOKENS_PATH = '/api/users/me/tokens';

interface TokenRow {
  id: number | string;
  token_hash: string;
  kind: 'session' | 'personal';
  name: string | null;
  scopes: string[] | null;
  created_at: Date | string;
  expires_at: Date | string;
  last_used_at: Date | string | null;
}

const COLUMNS = 't.id, t.token_hash, t.kind, t.name, t.scopes, t.created_at, t.expires_at, t.last_used_at';
const seconds = (value: Date | string | null) => (value === null ? 0 : toSeconds(new Date(value)));

function presentToken(row: TokenRow, currentHash: string): TokenResource {
  return {
    type: 'token',
    id: Number(row.id),
    attributes: {
      name: row.name,
      kind: row.kind,
      scopes: row.kind === 'session' ? effectiveScopes(null) : (row.scopes as Scope[]),
      createdAt: seconds(row.created_at),
      expiresAt: seconds(row.expires_at),
      lastUsedAt: seconds(row.last_used_at),
      current: row.token_hash === currentHash,
    },
  };
}

/**
 * A personal token may give only scopes it has, and never `tokens:manage` or `account`
 * (403 insufficient_scope, naming the first scope it lacks); a session gives any.
 */
function checkMinting(ctx: AuthedContext, wanted: readonly Scope[]): void {
  if (ctx.token.kind === 'session') return;
  for (const scope of wanted) {
    if (SESSION_ONLY_SCOPES.includes(scope)) throw insufficientScope(scope, `Only a session token (from registration or login) can give the scope ${scope}.`);
    if (!allows(ctx.token.scopes, scope)) throw insufficientScope(scope, `This token cannot give the scope ${scope}, which it does not have.`);
  }
}

/** The expiry's rule (in the future, at most MAX_TOKEN_DAYS ahead), which reads the clock: its refusal, or none. */
function expiryRefusals(now: Date, expiresAt: number): ApiError[] {
  const nowSeconds = toSeconds(now);
  if (expiresAt > nowSeconds && expiresAt <= nowSeconds + MAX_TOKEN_DAYS * 86_400) return [];
  return [apiError('invalid', { pointer: '/token/expires_at', detail: `The expiry must be in the future and at most ${MAX_TOKEN_DAYS} days ahead.` })];
}

/** What the schema takes as `expires_at` (CreateTokenInput's member). */
const EXPIRES_AT = timestamp();

/**
 * The expiry's rule for an input the schema refused for another member (its `inputRules`):
 * an `expires_at` the schema took is held to it too, so both refusals are reported together.
 */
export function tokenInputRules(ctx: AuthedContext, rawInput: unknown): ApiError[] {
  const expiresAt = EXPIRES_AT.safeParse((rawInput as { token?: { expires_at?: unknown } } | undefined)?.token?.expires_at);
  return expiresAt.success ? expiryRefusals(ctx.clock.now(), expiresAt.data) : [];
}

export async function createToken(ctx: AuthedContext, input: CreateTokenInput) {
  const { name, scopes, expires_at: expiresAt } = input.token;
  // Before the key's record is read: a token that could not make this one never gets it replayed.
  checkMinting(ctx, scopes);
  // A write of the user (src/writes/user-write.ts): under the owner's lock, so two creations at
  // once count each other; with an Idempotency-Key its answer, the secret with it, is kept
  // under the key for its 24 hours, so a retry gets the token it made, not a second one.
  return plainWrite(ctx, async (em) => {
    // After the key's record is read, so that a retry after a short expiry has passed is
    // replayed; refused as the input's rule it is, kept under no key.
    const now = ctx.clock.now();
    const refused = expiryRefusals(now, expiresAt);
    if (refused.length > 0) throw new DomainError(refused).refusedBeforeRun();
    const [counted] = await em.execute<Array<{ live: string }>>(
      `select count(*)::text as live from access_tokens where user_id = ? and kind = 'personal' and expires_at > ?`,
      [ctx.user.id, now],
    );
    if (Number(counted!.live) >= MAX_PERSONAL_TOKENS) {
      throw DomainError.validation('limit_reached', '/token', `A user may have at most ${MAX_PERSONAL_TOKENS} live personal access tokens: revoke one first.`);
    }
    const secret = newPersonalToken(ctx.user.id);
    const [inserted] = await em.execute<TokenRow[]>(
      `insert into access_tokens as t (token_hash, user_id, created_at, expires_at, kind, name, scopes)
         values (?, ?, ?, ?, 'personal', ?, ?::text[]) returning ${COLUMNS}`,
      [hashAccessToken(secret), ctx.user.id, now, fromSeconds(expiresAt), name, textArray(scopes)],
    );
    return { data: presentToken(inserted!, ctx.tokenHash), meta: { secret } };
  });
}

export async function listTokens(ctx: AuthedContext, input: z.infer<typeof TokenListInput>) {
  const page = pageOf(input.page, TOKENS_PAGE_SIZE);
  const now = ctx.clock.now();
  const rows = await ctx.em.execute<Array<TokenRow & { total: string }>>(
    `select ${COLUMNS}, count(*) over ()::text as total from access_tokens t
      where t.user_id = ? and t.expires_at > ? order by t.id desc limit ? offset ?`,
    [ctx.user.id, now, page.size, page.offset],
  );
  // A page past the last has no row to count on: the count is read alone then.
  const total = rows[0]
    ? Number(rows[0].total)
    : Number((await ctx.em.execute<Array<{ n: string }>>('select count(*)::text as n from access_tokens where user_id = ? and expires_at > ?', [ctx.user.id, now]))[0]!.n);
  return { data: rows.map((row) => presentToken(row, ctx.tokenHash)), links: pageLinks(ctx.baseUrl, TOKENS_PATH, page.page, page.size, total, await linkQuery(ctx, input, [])) };
}

async function findToken(ctx: AuthedContext, id: number): Promise<TokenRow> {
  const [row] = await ctx.em.execute<TokenRow[]>(`select ${COLUMNS} from access_tokens t where t.user_id = ? and t.id = ? and t.expires_at > ?`, [
    ctx.user.id, id, ctx.clock.now(),
  ]);
  if (!row) throw DomainError.notFound('token');
  return row;
}

export async function getToken(ctx: AuthedContext, id: number) {
  return { data: presentToken(await findToken(ctx, id), ctx.tokenHash) };
}

/**
 * The token in use. It was valid when the request was authenticated; revoked (or expired) since,
 * by a request racing this one, it is no record the caller lost but a token that no longer works:
 * 401, as the next request with it gets, not 404.
 */
export async function currentToken(ctx: AuthedContext) {
  const [row] = await ctx.em.execute<TokenRow[]>(`select ${COLUMNS} from access_tokens t where t.user_id = ? and t.id = ? and t.expires_at > ?`, [
    ctx.user.id, ctx.token.id, ctx.clock.now(),
  ]);
  if (!row) throw DomainError.unauthorized('The access token is unknown, revoked or expired.');
  return { data: presentToken(row, ctx.tokenHash) };
}

/** Revokes one of the user's tokens by its id (the one in use too): it stops working at once, everywhere. */
export async function revokeTokenById(ctx: AuthedContext, id: number): Promise<void> {
  let revoked: string[] = [];
  // A write of the user (src/writes/user-write.ts), with its Idempotency-Key: a retry replays the 204.
  await plainWrite(ctx, async (em) => {
    const rows = await em.execute<Array<{ token_hash: string }>>('delete from access_tokens where user_id = ? and id = ? and expires_at > ? returning token_hash', [
      ctx.user.id, id, ctx.clock.now(),
    ]);
    if (rows.length === 0) throw DomainError.notFound('token');
    revoked = rows.map((r) => r.token_hash);
  });
  await announceRevoked(ctx.em, ctx.live, ctx.user.id, revoked);
}
