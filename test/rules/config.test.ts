/** The environment as the service reads it (src/config.ts): a bad value refuses the start with a line naming it. */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';

describe('loadConfig', () => {
  it.each([['notaurl'], ['mysql://x@127.0.0.1/db'], ['http://127.0.0.1:5432/db'], ['127.0.0.1:5432']])(
    'refuses DATABASE_URL and DATABASE_DIRECT_URL %s, saying what a PostgreSQL URL looks like',
    (url) => {
      expect(() => loadConfig({ DATABASE_URL: url })).toThrow(/^Invalid configuration:\nDATABASE_URL: a PostgreSQL URL, such as postgres:\/\//);
      expect(() => loadConfig({ DATABASE_URL: 'postgres://127.0.0.1/db', DATABASE_DIRECT_URL: url })).toThrow(/^Invalid configuration:\nDATABASE_DIRECT_URL: a PostgreSQL URL/);
    },
  );

  it.each([['%%%'], ['10.0.0.0/33'], ['10.0.0.1/ffff::'], ['loopback,nonsense'], ['1.2.3.4/8/8']])('refuses TRUST_PROXY %s, saying what it takes', (value) => {
    expect(() => loadConfig({ TRUST_PROXY: value })).toThrow(/^Invalid configuration:\nTRUST_PROXY: true, false, a number of hops/);
  });

  const NUMBERS = ['PORT', 'WEB_CONCURRENCY', 'DATABASE_POOL_SIZE', 'SHUTDOWN_TIMEOUT_MS', 'EVENTS_RETENTION_DAYS', 'METRICS_PORT', 'WEBHOOK_TIMEOUT_MS', 'RATE_LIMIT_AUTH_PER_MINUTE', 'RATE_LIMIT_PER_MINUTE'];
  it.each(NUMBERS)('refuses %s written other than in decimal digits (a space is not 0, nor 0x10 16)', (name) => {
    for (const value of [' ', '  ', ' 5', '5 ', '0x10', '1e1', '1.5', '-1', '+5', 'abc', '５']) {
      expect(() => loadConfig({ [name]: value }), JSON.stringify(value)).toThrow(new RegExp(`^Invalid configuration:\\n${name}: a whole number, written in decimal digits$`));
    }
    // Unset or empty: its default; digits: that number.
    expect(loadConfig({ [name]: '' })).toEqual(loadConfig({}));
    expect(() => loadConfig({ [name]: '10' })).not.toThrow();
  });

  it('reads decimal digits as their number, and the defaults of API-CONTRACT.md §9 when unset', () => {
    const config = loadConfig({ PORT: '8080', RATE_LIMIT_PER_MINUTE: '0', RATE_LIMIT_AUTH_PER_MINUTE: '007', EVENTS_RETENTION_DAYS: '7' });
    expect([config.port, config.rateLimitPerMinute, config.rateLimitAuthPerMinute, config.eventsRetentionDays]).toEqual([8080, 0, 7, 7]);
    const defaults = loadConfig({});
    expect([defaults.port, defaults.rateLimitPerMinute, defaults.rateLimitAuthPerMinute, defaults.eventsRetentionDays]).toEqual([3000, 1200, 30, 30]);
  });

  it('takes TRUST_PROXY as Express does: true, false, hops, names, addresses and subnets', () => {
    expect(loadConfig({ TRUST_PROXY: 'true' }).trustProxy).toBe(true);
    expect(loadConfig({ TRUST_PROXY: '2' }).trustProxy).toBe(2);
    const list = 'loopback, 10.0.0.0/8, 192.168.0.0/255.255.0.0, ::1, fd00::/8';
    expect(loadConfig({ TRUST_PROXY: list }).trustProxy).toBe(list);
  });

  it('takes postgres://, postgresql:// and socket: URLs as they are, and no URL as the embedded PostgreSQL', () => {
    expect(loadConfig({ DATABASE_URL: 'postgres://app:secret@db.example:6432/planning?sslmode=require' }).databaseUrl).toBe('postgres://app:secret@db.example:6432/planning?sslmode=require');
    expect(loadConfig({ DATABASE_URL: 'postgresql://localhost/planning' }).databaseUrl).toBe('postgresql://localhost/planning');
    expect(loadConfig({ DATABASE_URL: 'socket:/run/postgresql?db=planning' }).databaseUrl).toBe('socket:/run/postgresql?db=planning');
    expect(loadConfig({ DATABASE_URL: '' }).databaseUrl).toBeUndefined();
  });
});
