/**
 * Rows that grow with use and are dead after a while are deleted by the service itself:
 * access tokens past their expiry (one row per login) and rate-limit counters of past
 * windows. The service prunes at start and every minute; a second start, a month later on
 * its clock, must find them gone.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ManualClock } from '../../src/core/clock.js';
import { createLogger } from '../../src/core/logger.js';
import { startService } from '../../src/server.js';
import { TOKEN_LIFETIME_SECONDS } from '../../src/users/credentials.js';
import { eventually } from '../helpers/eventually.js';
import { call, registerUser } from '../helpers/http.js';
import { T0, createTestDatabase } from '../helpers/test-app.js';

async function count(databaseUrl: string, table: string): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query(`select count(*)::int as n from ${table}`)).rows[0].n;
  } finally {
    await client.end();
  }
}

describe('housekeeping', () => {
  it('deletes expired access tokens and past rate-limit counters, and keeps live tokens', async () => {
    const databaseUrl = await createTestDatabase();
    const config = { ...loadConfig({}), databaseUrl, port: 0, host: '127.0.0.1', passwordHashCost: 1024, rateLimitAuthPerMinute: 30 };
    const logger = createLogger('silent');

    const first = await startService({ config, logger, clock: new ManualClock(T0) });
    try {
      await registerUser(first.url, 'old_a');
      await registerUser(first.url, 'old_b');
    } finally {
      await first.stop();
    }
    expect(await count(databaseUrl, 'access_tokens')).toBe(2);
    expect(await count(databaseUrl, 'rate_limit_hits')).toBeGreaterThan(0);

    // A second before the tokens expire: nothing to delete yet.
    const early = await startService({ config, logger, clock: new ManualClock(T0 + (TOKEN_LIFETIME_SECONDS - 1) * 1000) });
    await early.stop();
    expect(await count(databaseUrl, 'access_tokens')).toBe(2);

    const later = await startService({ config, logger, clock: new ManualClock(T0 + (TOKEN_LIFETIME_SECONDS + 60) * 1000) });
    try {
      await eventually(async () => (await count(databaseUrl, 'access_tokens')) === 0, { message: 'the expired tokens were deleted', timeout: 20_000 });
      await eventually(async () => (await count(databaseUrl, 'rate_limit_hits')) === 0, { message: 'the past rate-limit counters were deleted', timeout: 20_000 });
      const login = await call(later.url, 'POST', '/api/users/authorizations', { body: { username: 'old_a', password: 'password1' } });
      expect(login.status).toBe(201);
      expect((await call(later.url, 'GET', '/api/users/me', { token: login.body.meta.token })).status).toBe(200);
    } finally {
      await later.stop();
    }
  }, 60_000);
});
