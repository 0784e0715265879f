/**
 * Users' rows and the directory of their names. A username is unique across all users, which
 * a table split by user cannot hold, so the names live in a table of their own, `usernames`
 * (name → user id; a reference table, src/db/data-layout.ts); each `users` row keeps its own
 * copy of its name, read with the row. Both are written in one transaction at registration
 * and never changed after. Every statement on `users` names the user by its id, so that a
 * database split by user answers it from one node; the directory, a copy on every node, is
 * read by name.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { execute } from '../db/prepared.js';

/** Whether a user has this name (exactly: names are stored as registered). */
export async function isUsernameTaken(em: SqlEntityManager, username: string): Promise<boolean> {
  const rows = await em.execute('select 1 from usernames where username = ?', [username]);
  return rows.length > 0;
}

/**
 * A new user, then its name in the directory, in the caller's transaction. A name taken
 * meanwhile fails the second with a unique violation (on `usernames`), and the transaction
 * writes neither. Two plain statements, not one that feeds the name from the user's row: on a
 * database split by user, the row goes to its user's node and the name to the directory's
 * copies, with nothing to carry from one node to another in between.
 */
export async function insertUser(
  em: SqlEntityManager,
  user: { username: string; passwordHash: string; timeZone: string; createdAt: Date },
): Promise<StoredUser> {
  const [row] = await em.execute<Array<{ id: number; username: string; time_zone: string }>>(
    'insert into users (username, password_hash, time_zone, created_at) values (?, ?, ?, ?) returning id, username, time_zone',
    [user.username, user.passwordHash, user.timeZone, user.createdAt],
  );
  await em.execute('insert into usernames (username, user_id) values (?, ?)', [row!.username, row!.id]);
  return { id: row!.id, username: row!.username, timeZone: row!.time_zone };
}

/** A user as its documents show it. */
export interface StoredUser {
  id: number;
  username: string;
  timeZone: string;
}

/** Sets the user's time zone; the user as stored after. */
export async function updateTimeZone(em: SqlEntityManager, userId: number, timeZone: string): Promise<StoredUser> {
  const [row] = await em.execute<Array<{ id: number; username: string; time_zone: string }>>(
    'update users set time_zone = ? where id = ? returning id, username, time_zone',
    [timeZone, userId],
  );
  return { id: row!.id, username: row!.username, timeZone: row!.time_zone };
}

/**
 * The user with this name, with its password hash; null when none. The directory gives the
 * id, then the user's row is read by it: a join would not name the user, and a database split
 * by user would ask every node for it.
 */
export async function userByName(
  em: SqlEntityManager,
  username: string,
): Promise<(StoredUser & { passwordHash: string }) | null> {
  const [name] = await execute<{ user_id: number }>(em, 'select user_id from usernames where username = ?', [username]);
  if (!name) return null;
  const [row] = await execute<{ id: number; username: string; time_zone: string; password_hash: string }>(
    em,
    'select id, username, time_zone, password_hash from users where id = ?',
    [name.user_id],
  );
  return row ? { id: row.id, username: row.username, timeZone: row.time_zone, passwordHash: row.password_hash } : null;
}
