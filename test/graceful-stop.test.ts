/** Stopping under load: requests in flight complete, nothing new is accepted. */
import pg from 'pg';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/core/logger.js';
import { startService } from '../src/server.js';
import { createTestDatabase } from './helpers/test-app.js';

describe('graceful stop', () => {
  it('finishes in-flight requests and refuses new connections', async () => {
    const databaseUrl = await createTestDatabase();
    const config = { ...loadConfig({}), databaseUrl, port: 0, host: '127.0.0.1', rateLimitAuthPerMinute: 0 };
    const service = await startService({ config, logger: createLogger('silent') });

    // Registrations hash passwords with the production cost, so they are still running
    // when the stop begins.
    const inFlight = Array.from({ length: 16 }, (_, i) =>
      fetch(`${service.url}/api/users`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Connection: 'close' },
        body: JSON.stringify({ user: { username: `graceful${i}`, password: 'password1' } }),
      }).then(async (r) => ({ status: r.status, body: await r.json() })),
    );
    const connections = () => new Promise<number>((resolve, reject) => service.server.getConnections((e, n) => (e ? reject(e) : resolve(n))));
    while ((await connections()) < 16) await new Promise((r) => setImmediate(r));

    const stopping = service.stop();
    const results = await Promise.all(inFlight);
    expect(results.map((r) => r.status)).toEqual(Array(16).fill(201));
    await stopping;
    expect(service.server.listening).toBe(false);
    await expect(fetch(`${service.url}/healthz`)).rejects.toThrow();
  });

  it('lets the handlers of clients that hung up finish before it closes the database', async () => {
    const databaseUrl = await createTestDatabase();
    const config = { ...loadConfig({}), databaseUrl, port: 0, host: '127.0.0.1', rateLimitAuthPerMinute: 0 };
    const lines: any[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const service = await startService({ config, logger });

    // Registrations hash at the production cost: their clients are gone long before they end.
    const aborts = Array.from({ length: 8 }, () => new AbortController());
    const sent = aborts.map((abort, i) =>
      fetch(`${service.url}/api/users`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Connection: 'close' },
        body: JSON.stringify({ user: { username: `hung_up${i}`, password: 'password1' } }),
        signal: abort.signal,
      }).catch((error: Error) => error.name),
    );
    const connections = () => new Promise<number>((resolve, reject) => service.server.getConnections((e, n) => (e ? reject(e) : resolve(n))));
    while ((await connections()) < 8) await new Promise((r) => setImmediate(r));
    await new Promise((r) => setTimeout(r, 20)); // the bodies have arrived; hashing has begun
    for (const abort of aborts) abort.abort();
    expect(await Promise.all(sent)).toEqual(Array(8).fill('AbortError'));
    while ((await connections()) > 0) await new Promise((r) => setImmediate(r));

    await service.stop();
    const failures = lines.filter((l) => l.level >= 50);
    expect(failures, JSON.stringify(failures)).toEqual([]);
    // Every handler ran to its end: all 8 users exist, each with its token.
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query("select count(*)::int as n, (select count(*)::int from access_tokens) as tokens from users where username like 'hung_up%'");
      expect(rows).toEqual([{ n: 8, tokens: 8 }]);
    } finally {
      await client.end();
    }
  });
});
