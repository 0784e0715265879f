/**
 * An access token, stored only as the SHA-256 of the opaque value handed to the user once.
 * Revoking a token deletes its row. Its key is (token_hash, user_id): every row of user data
 * carries its user in its key (src/db/data-layout.ts), and a request's token, which names its
 * user (src/users/credentials.ts), is found by both (src/users/authentication.ts); a token of
 * the form issued before that, by its hash alone until the last of them expires. The table's
 * `id`, numbering tokens in the order they were issued (the id clients name a token by), is
 * left to the database.
 */
import { defineEntity, p } from '@mikro-orm/postgresql';

const AccessTokenSchema = defineEntity({
  name: 'AccessToken',
  tableName: 'access_tokens',
  properties: {
    tokenHash: p.text().primary(),
    userId: p.integer().primary(),
    createdAt: p.datetime().columnType('timestamptz'),
    expiresAt: p.datetime().columnType('timestamptz'),
    /** `session` (register, login: every scope) or `personal` (made by the user, API-CONTRACT.md §16). */
    kind: p.string().columnType('text').default('session'),
    /** A personal token's name; null for a session. */
    name: p.string().columnType('text').nullable(),
    /** A personal token's scopes; null for a session, which has every scope. */
    scopes: p.array().columnType('text[]').nullable(),
    /** Written at most once a minute per token (src/users/token-use.ts). */
    lastUsedAt: p.datetime().columnType('timestamptz').nullable(),
  },
});

export class AccessToken extends AccessTokenSchema.class {}
AccessTokenSchema.setClass(AccessToken);
