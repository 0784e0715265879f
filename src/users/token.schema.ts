/** Wire shapes of access tokens (API-CONTRACT.md §16). */
import { z } from 'zod';
import { PageLinks } from '../core/envelope.js';
import { inputObject, pageParam, pathId, text, timestamp } from '../core/fields.js';
import { SCOPES } from '../core/scopes.js';

/** Live personal tokens a user may have. */
export const MAX_PERSONAL_TOKENS = 50;
/** The furthest a personal token's `expires_at` may be: 366 days ahead. */
export const MAX_TOKEN_DAYS = 366;
/** Tokens per page of the list (API-CONTRACT.md §7). */
export const TOKENS_PAGE_SIZE = 50;

const scopes = z
  .array(z.enum(SCOPES))
  .min(1)
  .max(SCOPES.length)
  .superRefine((list, ctx) => {
    const seen = new Set<string>();
    for (const [index, scope] of list.entries()) {
      if (seen.has(scope)) ctx.addIssue({ code: 'custom', path: [index], message: `${scope} is named twice.`, params: { code: 'invalid' } });
      seen.add(scope);
    }
  })
  .meta({
    description: `What the token may do: a non-empty list of ${SCOPES.map((s) => `\`${s}\``).join(', ')}, each at most once (\`:write\` includes \`:read\` of the same resource). \`tokens:manage\` and \`account\` only from a session token; a personal token gives no scope it does not have (403 \`insufficient_scope\`).`,
    example: ['tasks:read'],
    uniqueItems: true,
  });

export const CreateTokenInput = inputObject({
  token: z.object({
    name: text({ min: 1, max: 100, what: 'Name' }).meta({ example: 'Calendar sync' }),
    scopes,
    expires_at: timestamp().meta({
      description: `Unix seconds when the token stops working: in the future, at most ${MAX_TOKEN_DAYS} days ahead (otherwise 422 \`invalid\`).`,
      example: 1767225600,
    }),
  }),
});
export type CreateTokenInput = z.infer<typeof CreateTokenInput>;

export const TokenIdInput = inputObject({ id: pathId });
export const TokenListInput = z.object({ page: pageParam }).prefault({});

export const TokenResource = z
  .object({
    type: z.literal('token'),
    id: z.int(),
    attributes: z.object({
      name: z.string().nullable().meta({ description: 'What the user called a personal token; null for a session token.' }),
      kind: z.enum(['session', 'personal']).meta({ description: '`session`: from registration or login, every scope, 30 days. `personal`: made by the user, with its scopes.' }),
      scopes: z.array(z.enum(SCOPES)).meta({ description: 'What the token may do (every scope for a session token).' }),
      createdAt: z.int().meta({ description: 'Unix seconds.' }),
      expiresAt: z.int().meta({ description: 'Unix seconds when it stops working.' }),
      lastUsedAt: z.int().meta({ description: 'Unix seconds of its last use, to the minute (written at most once a minute); 0 until first used (a session token is used by the registration or login that makes it).' }),
      current: z.boolean().meta({ description: 'Whether this is the token that made the request.' }),
    }),
  })
  .meta({ id: 'Token' });
export type TokenResource = z.infer<typeof TokenResource>;

export const TokenDocument = z.object({ data: TokenResource });
export const TokenWithSecretDocument = z.object({
  data: TokenResource,
  meta: z.object({
    secret: z.string().meta({ description: 'The token, `plnr_` and 54 characters: send it as `Authorization: <secret>`. Shown this once; only its hash is kept with the token (sent with an `Idempotency-Key`, the answer is also kept under the key for its 24 hours, so that a retry gets it again).' }),
  }),
});
export const TokenPage = z.object({ data: z.array(TokenResource), links: PageLinks });
