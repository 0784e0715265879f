/**
 * The row lock that serialises a user's writes where an invariant spans rows (at most 3
 * started projects; task orders unique and gap-free). Taken inside the transaction, it
 * holds across every server process sharing the database.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';

export async function lockOwner(em: SqlEntityManager, userId: number): Promise<void> {
  // `no key update`: excludes every other holder of this lock, but not the key-share locks
  // that inserts referencing the user take (a login's token, a task's foreign-key check).
  await em.execute('select id from users where id = ? for no key update', [userId]);
}
