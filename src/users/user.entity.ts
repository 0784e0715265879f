/** A person using the service. Passwords are stored only as a memory-hard hash. */
import { defineEntity, p } from '@mikro-orm/postgresql';

const UserSchema = defineEntity({
  name: 'User',
  tableName: 'users',
  properties: {
    id: p.integer().primary().autoincrement(),
    username: p.text(),
    passwordHash: p.text().hidden(),
    createdAt: p.datetime().columnType('timestamptz'),
  },
});

export class User extends UserSchema.class {}
UserSchema.setClass(User);
