/**
 * Which server a project's files reach (vitest.config.ts): in the pooled tier, the run's
 * database URLs lead through PgBouncer in transaction mode, and `directUrlOf` past it; in
 * every other project, straight to PostgreSQL. The file runs in both `main` and `pooled`, so a
 * pooled tier that silently ran on the direct server (its global setup never told it was the
 * pooled tier) fails here instead of repeating the main project's checks.
 */
import pg from 'pg';
import { describe, expect, inject, it } from 'vitest';
import { createTestDatabase, directUrlOf } from '../helpers/test-app.js';

/** The port of the PostgreSQL a statement sent to `url` runs on. */
async function serverPortOf(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<{ port: number }>('select inet_server_port() as port')).rows[0]!.port;
  } finally {
    await client.end();
  }
}

describe('the database tier of this project', () => {
  it('reaches PostgreSQL through PgBouncer in the pooled tier, and directly elsewhere', async ({ task }) => {
    // TEST_POOLED=1 runs every project behind the pooler (test/helpers/global-setup.ts).
    const pooledTier = task.file.projectName === 'pooled' || process.env.TEST_POOLED === '1';
    const url = await createTestDatabase();
    const direct = directUrlOf(url);
    const through = await serverPortOf(url);
    const past = await serverPortOf(direct);
    // Both lead to the same PostgreSQL.
    expect(through).toBe(past);
    if (pooledTier) {
      // The URL's port is PgBouncer's, not the PostgreSQL port the statement ran on.
      expect(Number(new URL(url).port)).not.toBe(through);
      expect(new URL(inject('adminDatabaseUrl')).port).not.toBe(new URL(inject('directAdminDatabaseUrl')).port);
      expect(Number(new URL(direct).port)).toBe(past);
    } else {
      expect(direct).toBe(url);
      expect(Number(new URL(url).port)).toBe(through);
      expect(inject('adminDatabaseUrl')).toBe(inject('directAdminDatabaseUrl'));
    }
  });
});
