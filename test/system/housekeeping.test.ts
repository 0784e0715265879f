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

  it('deletes webhook attempts older than the change log keeps events, and keeps the newer ones', async () => {
    const databaseUrl = await createTestDatabase();
    const config = { ...loadConfig({}), databaseUrl, port: 0, host: '127.0.0.1', passwordHashCost: 1024, rateLimitAuthPerMinute: 0 };
    const logger = createLogger('silent');
    const first = await startService({ config, logger, clock: new ManualClock(T0) });
    let userId: number;
    try {
      userId = (await registerUser(first.url, 'hooks_owner')).id;
    } finally {
      await first.stop();
    }
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const [{ id: webhook }] = (await client.query(
        `insert into webhooks (user_id, url, events, secret, created_at, updated_at, cursor, next_attempt_at, state)
         values ($1, 'https://hooks.example.com/', '["*"]', 'whsec_x', now(), now(), 0, 'epoch', 'disabled') returning id`,
        [userId],
      )).rows;
      const day = 86_400_000;
      for (const ageDays of [40, 31, 29, 1]) {
        await client.query(
          `insert into webhook_deliveries (user_id, webhook_id, event_id, event_type, attempt, at, outcome, duration_ms)
           values ($1, $2, $3, 'task.created', 1, $4, 'delivered', 5)`,
          [userId, webhook, String(ageDays), new Date(T0 + 60 * day - ageDays * day)],
        );
      }
    } finally {
      await client.end();
    }
    // 60 days on, with EVENTS_RETENTION_DAYS at its 30: the attempts of 40 and 31 days ago go.
    const later = await startService({ config, logger, clock: new ManualClock(T0 + 60 * 86_400_000) });
    try {
      await eventually(async () => (await count(databaseUrl, 'webhook_deliveries')) === 2, { message: 'the old attempts were deleted', timeout: 20_000 });
      const check = new pg.Client({ connectionString: databaseUrl });
      await check.connect();
      try {
        expect((await check.query('select event_id from webhook_deliveries order by event_id')).rows.map((r) => r.event_id)).toEqual(['1', '29']);
      } finally {
        await check.end();
      }
    } finally {
      await later.stop();
    }
  }, 60_000);
});
