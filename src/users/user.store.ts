/**
 * Users' rows and the directory of their names. A username is unique across all users, which
 * a table split by user cannot hold, so the names live in a table of their own, `usernames`
 * (name → user id; a reference table, src/db/data-layout.ts); each `users` row keeps its own
 * copy of its name, read with the row. Both are written in one statement at registration and
 * never changed after.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';

/** Whether a user has this name (exactly: names are stored as registered). */
export async function isUsernameTaken(em: SqlEntityManager, username: string): Promise<boolean> {
  const rows = await em.execute('select 1 from usernames where username = ?', [username]);
  return rows.length > 0;
}

/**
 * A new user and its name in the directory, in one statement. A name taken meanwhile fails it
 * with a unique violation (on `usernames`), and neither row is written.
 */
export async function insertUser(
  em: SqlEntityManager,
  user: { username: string; passwordHash: string; timeZone: string; createdAt: Date },
): Promise<StoredUser> {
  const [row] = await em.execute<Array<{ id: number; username: string; time_zone: string }>>(
    `with "user" as (
       insert into users (username, password_hash, time_zone, created_at) values (?, ?, ?, ?) returning id, username, time_zone
     ), "name" as (
       insert into usernames (username, user_id) select username, id from "user"
     )
     select id, username, time_zone from "user"`,
    [user.username, user.passwordHash, user.timeZone, user.createdAt],
  );
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

/** The user with this name, through the directory, with its password hash; null when none. */
export async function userByName(
  em: SqlEntityManager,
  username: string,
): Promise<(StoredUser & { passwordHash: string }) | null> {
  const [row] = await em.execute<Array<{ id: number; username: string; time_zone: string; password_hash: string }>>(
    'select u.id, u.username, u.time_zone, u.password_hash from usernames n join users u on u.id = n.user_id where n.username = ?',
    [username],
  );
  return row ? { id: row.id, username: row.username, timeZone: row.time_zone, passwordHash: row.password_hash } : null;
}
