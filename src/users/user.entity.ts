/**
 * A person using the service. Passwords are stored only as a memory-hard hash. `username` is
 * the user's own copy of its name; names are unique through the directory of names
 * (src/users/user.store.ts), not on this table, which is split by user on a sharded database.
 */
import { defineEntity, p } from '@mikro-orm/postgresql';

const UserSchema = defineEntity({
  name: 'User',
  tableName: 'users',
  properties: {
    id: p.integer().primary().autoincrement(),
    username: p.text(),
    passwordHash: p.text().hidden(),
    /** An IANA zone name (src/core/user-day.ts); `UTC` unless the user set another. */
    timeZone: p.text().default('UTC'),
    createdAt: p.datetime().columnType('timestamptz'),
  },
});

export class User extends UserSchema.class {}
UserSchema.setClass(User);
