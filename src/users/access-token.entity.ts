/**
 * An access token, stored only as the SHA-256 of the opaque value handed to the user once.
 * Revoking a token deletes its row.
 */
import { defineEntity, p } from '@mikro-orm/postgresql';

const AccessTokenSchema = defineEntity({
  name: 'AccessToken',
  tableName: 'access_tokens',
  properties: {
    id: p.integer().primary().autoincrement(),
    userId: p.integer(),
    tokenHash: p.text(),
    createdAt: p.datetime().columnType('timestamptz'),
    expiresAt: p.datetime().columnType('timestamptz'),
  },
});

export class AccessToken extends AccessTokenSchema.class {}
AccessTokenSchema.setClass(AccessToken);
